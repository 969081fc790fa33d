/* SPDX-License-Identifier: MIT */
/* The client's opening handshake (ws-handshake.c): the accept value against RFC 6455's example,
 * the keys, the request's lines, and the server's answer: complete or not, accepted or refused
 * (why), or not HTTP at all. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <libwebsockets.h>

#include "ws-handshake.h"

/* RFC 6455 section 1.3 */
#define RFC_KEY "dGhlIHNhbXBsZSBub25jZQ=="
#define RFC_ACCEPT "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="

static void test_accept(void **state) {
        char accept[WS_ACCEPT_LEN + 1];

        memset(accept, 'x', sizeof(accept));
        assert_int_equal(ws_handshake_accept(RFC_KEY, accept), 0);
        assert_string_equal(accept, RFC_ACCEPT);

        /* another key, another answer */
        assert_int_equal(ws_handshake_accept("AQIDBAUGBwgJCgsMDQ4PEA==", accept), 0);
        assert_int_equal(strlen(accept), WS_ACCEPT_LEN);
        assert_string_not_equal(accept, RFC_ACCEPT);

        /* a key of the wrong length */
        assert_int_equal(ws_handshake_accept("dGhlIHNhbXBsZSBub25jZQ=", accept), -EINVAL);
        assert_int_equal(ws_handshake_accept(RFC_KEY "A", accept), -EINVAL);
        assert_int_equal(ws_handshake_accept("", accept), -EINVAL);
}

static bool is_base64(char c) {
        return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '+' || c == '/' ||
               c == '=';
}

static void test_key(void **state) {
        char key[WS_KEY_LEN + 1], other[WS_KEY_LEN + 1], decoded[32];

        assert_int_equal(ws_handshake_key(key), 0);
        assert_int_equal(strlen(key), WS_KEY_LEN);
        for (size_t i = 0; i < WS_KEY_LEN; i++)
                assert_true(is_base64(key[i]));
        /* 16 bytes: 22 characters and two of padding */
        assert_int_equal(key[22], '=');
        assert_int_equal(key[23], '=');
        assert_int_equal(lws_b64_decode_string(key, decoded, sizeof(decoded)), 16);

        assert_int_equal(ws_handshake_key(other), 0);
        assert_int_equal(strlen(other), WS_KEY_LEN);
        assert_string_not_equal(key, other);
}

static void test_request(void **state) {
        _cleanup_buffer_ Buffer b = BUFFER_NULL;
        static const char *const want[] = {
                "Host: example.org:8080",
                "Upgrade: websocket",
                "Connection: Upgrade",
                "Sec-WebSocket-Key: " RFC_KEY,
                "Sec-WebSocket-Version: 13",
        };
        bool seen[ELEMENTSOF(want)] = {};
        const char *text, *p, *end;

        /* appended after what the buffer holds */
        assert_int_equal(buffer_append(&b, "PRE", 3), 0);
        assert_int_equal(ws_handshake_request(&b, "example.org:8080", "/socket.io/?EIO=4&transport=websocket", RFC_KEY), 0);
        assert_int_equal(buffer_append_byte(&b, 0), 0);
        text = (const char *) buffer_data(&b);
        assert_memory_equal(text, "PRE", 3);
        text += 3;

        /* ends with the empty line, and has no other */
        assert_true(strlen(text) >= 4);
        assert_string_equal(text + strlen(text) - 4, "\r\n\r\n");
        assert_ptr_equal(strstr(text, "\r\n\r\n"), text + strlen(text) - 4);

        p = text;
        end = strstr(p, "\r\n");
        assert_non_null(end);
        assert_int_equal(end - p, strlen("GET /socket.io/?EIO=4&transport=websocket HTTP/1.1"));
        assert_memory_equal(p, "GET /socket.io/?EIO=4&transport=websocket HTTP/1.1", end - p);

        for (p = end + 2; *p != '\r'; p = end + 2) {
                end = strstr(p, "\r\n");
                assert_non_null(end);
                for (size_t i = 0; i < ELEMENTSOF(want); i++)
                        if ((size_t) (end - p) == strlen(want[i]) && memcmp(p, want[i], end - p) == 0) {
                                assert_false(seen[i]);
                                seen[i] = true;
                        }
                /* every line a header */
                assert_non_null(memchr(p, ':', end - p));
        }
        for (size_t i = 0; i < ELEMENTSOF(want); i++)
                if (!seen[i])
                        fail_msg("missing request line: %s", want[i]);
}

/* ---- answers --------------------------------------------------------------------------------- */

static int answer(const char *text, WsHandshakeAnswer *ret) {
        return ws_handshake_answer((const uint8_t *) text, strlen(text), RFC_ACCEPT, ret);
}

static const char *const valid_answers[] = {
        "HTTP/1.1 101 Switching Protocols\r\n"
        "Upgrade: websocket\r\n"
        "Connection: Upgrade\r\n"
        "Sec-WebSocket-Accept: " RFC_ACCEPT "\r\n"
        "\r\n",

        /* any case, any order, spaces and tabs around values, other headers */
        "HTTP/1.1 101 switching protocols\r\n"
        "Server: test\r\n"
        "sec-websocket-accept:" RFC_ACCEPT "\r\n"
        "CONNECTION:   upgrade  \r\n"
        "Date: Mon, 01 Jan 2024 00:00:00 GMT\r\n"
        "upgrade:\tWebSocket\t\r\n"
        "\r\n",

        /* Connection as a list */
        "HTTP/1.1 101 Switching Protocols\r\n"
        "Upgrade: websocket\r\n"
        "Connection: keep-alive, Upgrade\r\n"
        "Sec-WebSocket-Accept: " RFC_ACCEPT "\r\n"
        "\r\n",

        "HTTP/1.0 101 OK\r\n"
        "Connection: Upgrade ,keep-alive\r\n"
        "Sec-WebSocket-Accept:   " RFC_ACCEPT "   \r\n"
        "Upgrade: websocket\r\n"
        "X-Empty:\r\n"
        "\r\n",

        /* empty extension and protocol headers choose nothing */
        "HTTP/1.1 101 Switching Protocols\r\n"
        "Upgrade: websocket\r\n"
        "Connection: Upgrade\r\n"
        "Sec-WebSocket-Accept: " RFC_ACCEPT "\r\n"
        "Sec-WebSocket-Extensions: \r\n"
        "Sec-WebSocket-Protocol:\r\n"
        "\r\n",
};

static void test_answer_valid(void **state) {
        for (size_t i = 0; i < ELEMENTSOF(valid_answers); i++) {
                const char *head = valid_answers[i];
                size_t head_len = strlen(head);
                WsHandshakeAnswer a;
                char with_frames[1024];

                print_message("answer %zu\n", i);
                assert_int_equal(answer(head, &a), 1);
                assert_int_equal(a.status, 101);
                assert_int_equal(a.head_size, head_len);
                assert_null(a.problem);

                /* frames right behind it are not part of the head, even when they look like
                 * the end of one */
                snprintf(with_frames, sizeof(with_frames), "%s\x81\x05hello\r\n\r\nmore\r\n\r\n", head);
                memset(&a, 0x55, sizeof(a));
                assert_int_equal(answer(with_frames, &a), 1);
                assert_int_equal(a.head_size, head_len);
                assert_int_equal(a.status, 101);

                /* every prefix: not complete yet, nothing said */
                for (size_t n = 0; n < head_len; n++) {
                        memset(&a, 0x55, sizeof(a));
                        assert_int_equal(ws_handshake_answer((const uint8_t *) head, n, RFC_ACCEPT, &a), 0);
                        assert_int_equal(a.status, 0);
                        assert_int_equal(a.head_size, 0);
                }
        }
}

static void test_answer_refused_status(void **state) {
        static const struct {
                const char *text;
                unsigned status;
        } cases[] = {
                { "HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain\r\nContent-Length: 11\r\n\r\nBad Request", 400 },
                { "HTTP/1.1 404 Not Found\r\nConnection: close\r\n\r\n", 404 },
                /* an upgrade's headers do not make a 200 an upgrade */
                { "HTTP/1.1 200 OK\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: " RFC_ACCEPT
                  "\r\n\r\n",
                  200 },
                { "HTTP/1.0 503 Service Unavailable\r\n\r\n", 503 },
        };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                WsHandshakeAnswer a;

                assert_int_equal(answer(cases[i].text, &a), -EPROTO);
                assert_int_equal(a.status, cases[i].status);
                assert_non_null(a.problem);
        }
}

static void test_answer_refused_headers(void **state) {
        static const char *const cases[] = {
                /* no Upgrade */
                "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: " RFC_ACCEPT "\r\n\r\n",
                /* Upgrade to something else */
                "HTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: " RFC_ACCEPT
                "\r\n\r\n",
                "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket2\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: " RFC_ACCEPT
                "\r\n\r\n",
                "HTTP/1.1 101 Switching Protocols\r\nUpgrade: web\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: " RFC_ACCEPT
                "\r\n\r\n",
                "HTTP/1.1 101 Switching Protocols\r\nUpgrade: \r\nConnection: Upgrade\r\nSec-WebSocket-Accept: " RFC_ACCEPT
                "\r\n\r\n",
                /* a header whose name only starts like Upgrade */
                "HTTP/1.1 101 Switching Protocols\r\nUp: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: " RFC_ACCEPT
                "\r\n\r\n",
                /* a later Upgrade header counts */
                "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: " RFC_ACCEPT
                "\r\nUpgrade: h2c\r\n\r\n",
                /* no Connection */
                "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nSec-WebSocket-Accept: " RFC_ACCEPT "\r\n\r\n",
                /* Connection without the upgrade token */
                "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: keep-alive\r\nSec-WebSocket-Accept: " RFC_ACCEPT
                "\r\n\r\n",
                "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: upgraded, close\r\nSec-WebSocket-Accept: " RFC_ACCEPT
                "\r\n\r\n",
                "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: up, close\r\nSec-WebSocket-Accept: " RFC_ACCEPT
                "\r\n\r\n",
                "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: ,\r\nSec-WebSocket-Accept: " RFC_ACCEPT
                "\r\n\r\n",
                /* no accept */
                "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n",
                /* a wrong accept: one character off, one short, one long, another case */
                "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                "Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOp=\r\n\r\n",
                "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                "Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo\r\n\r\n",
                "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                "Sec-WebSocket-Accept: " RFC_ACCEPT "=\r\n\r\n",
                "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                "Sec-WebSocket-Accept: S3PPLMBITXAQ9KYGZZHZRBK+XOO=\r\n\r\n",
                /* the accept for another key */
                "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                "Sec-WebSocket-Accept: HSmrc0sMlYUkAGmm5OPpG2HaGWk=\r\n\r\n",
                /* an extension or a subprotocol that was not asked for */
                "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: " RFC_ACCEPT
                "\r\nSec-WebSocket-Extensions: permessage-deflate\r\n\r\n",
                "HTTP/1.1 101 Switching Protocols\r\nsec-websocket-protocol: chat\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                "Sec-WebSocket-Accept: " RFC_ACCEPT "\r\n\r\n",
        };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                WsHandshakeAnswer a;

                print_message("case %zu\n", i);
                assert_int_equal(answer(cases[i], &a), -EPROTO);
                assert_int_equal(a.status, 101);
                assert_non_null(a.problem);
        }
}

static void test_answer_not_http(void **state) {
        static const char *const cases[] = {
                "hello\r\n\r\n",
                "\r\n\r\n",
                "\r\n\r\nHTTP/1.1 101 Switching Protocols\r\n\r\n",
                "HTTP/2 101 Switching Protocols\r\n\r\n",
                "HTTP/1.1 1O1 Switching Protocols\r\n\r\n",
                "HTTP/1.1  101 Switching Protocols\r\n\r\n",
                "HTTP/1.1 101Switching Protocols\r\n\r\n",
                "HTTP/1.1/101 Switching Protocols\r\n\r\n",
                "HTTP/1.x 101 Switching Protocols\r\n\r\n",
                "HTTP/1.1 10\r\n\r\n",
                "http/1.1 101 Switching Protocols\r\n\r\n",
                "ICY 200 OK\r\n\r\n",
                "SSH-2.0-OpenSSH_9.2\r\n\r\n",
                "\x16\x03\x01\x02\x10\x01\x11\x01\xfc\x03\x03\r\n\r\n",
                /* a header line without a colon */
                "HTTP/1.1 101 Switching Protocols\r\nUpgrade websocket\r\nConnection: Upgrade\r\n"
                "Sec-WebSocket-Accept: " RFC_ACCEPT "\r\n\r\n",
                "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                "Sec-WebSocket-Accept: " RFC_ACCEPT "\r\ngarbage\r\n\r\n",
        };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                WsHandshakeAnswer a;

                print_message("case %zu\n", i);
                assert_int_equal(answer(cases[i], &a), -EBADMSG);
        }
}

/* A head of exactly `size` bytes: a valid 101, padded with one long header. */
static char *padded_head(size_t size) {
        static const char start[] = "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                                    "Sec-WebSocket-Accept: " RFC_ACCEPT "\r\nX-Pad: ";
        char *p = malloc(size + 64);
        size_t fill;

        assert_non_null(p);
        assert_true(size > STRLEN(start) + 4);
        fill = size - STRLEN(start) - 4;
        memcpy(p, start, STRLEN(start));
        memset(p + STRLEN(start), 'a', fill);
        memcpy(p + STRLEN(start) + fill, "\r\n\r\n", 4);
        memcpy(p + size, "\x81\x00", 2);
        return p;
}

static void test_answer_limit(void **state) {
        WsHandshakeAnswer a;
        char *p;

        /* a head of exactly the limit is read, also with frames behind it */
        p = padded_head(WS_HANDSHAKE_HEAD_MAX);
        assert_int_equal(ws_handshake_answer((uint8_t *) p, WS_HANDSHAKE_HEAD_MAX, RFC_ACCEPT, &a), 1);
        assert_int_equal(a.head_size, WS_HANDSHAKE_HEAD_MAX);
        assert_int_equal(ws_handshake_answer((uint8_t *) p, WS_HANDSHAKE_HEAD_MAX + 2, RFC_ACCEPT, &a), 1);
        assert_int_equal(a.head_size, WS_HANDSHAKE_HEAD_MAX);
        /* short of the limit and incomplete: wait for more */
        assert_int_equal(ws_handshake_answer((uint8_t *) p, WS_HANDSHAKE_HEAD_MAX - 1, RFC_ACCEPT, &a), 0);
        free(p);

        /* one byte more than the limit */
        p = padded_head(WS_HANDSHAKE_HEAD_MAX + 1);
        assert_int_equal(ws_handshake_answer((uint8_t *) p, WS_HANDSHAKE_HEAD_MAX - 1, RFC_ACCEPT, &a), 0);
        assert_int_equal(ws_handshake_answer((uint8_t *) p, WS_HANDSHAKE_HEAD_MAX, RFC_ACCEPT, &a), -EBADMSG);
        assert_int_equal(ws_handshake_answer((uint8_t *) p, WS_HANDSHAKE_HEAD_MAX + 1, RFC_ACCEPT, &a), -EBADMSG);
        free(p);

        /* far more, never ending */
        p = malloc(3 * WS_HANDSHAKE_HEAD_MAX);
        assert_non_null(p);
        memset(p, 'x', 3 * WS_HANDSHAKE_HEAD_MAX);
        memcpy(p, "HTTP/1.1 101 ", 13);
        assert_int_equal(ws_handshake_answer((uint8_t *) p, 3 * WS_HANDSHAKE_HEAD_MAX, RFC_ACCEPT, &a), -EBADMSG);
        free(p);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_accept),
                cmocka_unit_test(test_key),
                cmocka_unit_test(test_request),
                cmocka_unit_test(test_answer_valid),
                cmocka_unit_test(test_answer_refused_status),
                cmocka_unit_test(test_answer_refused_headers),
                cmocka_unit_test(test_answer_not_http),
                cmocka_unit_test(test_answer_limit),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}

/* SPDX-License-Identifier: MIT */
/* The load generator's WebSocket client against a hand-driven server end: client frames are
 * masked with the length encodings of RFC 6455 5.2, fragmented server messages are
 * reassembled (with a ping between the fragments answered by a masked pong carrying the same
 * payload), a close frame is echoed and ends the pump, a masked server frame is refused, and
 * the handshake checks Sec-WebSocket-Accept. */
#include <netinet/in.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <sys/socket.h>

#include <cmocka.h>
#include <libwebsockets.h>
#include <openssl/evp.h>

#include "macro.h"
#include "ws-client.h"

typedef struct Got {
        uint8_t first[64]; /* the first message */
        size_t first_size;
        uint8_t data[200000]; /* the last message */
        size_t size;
        bool binary;
        unsigned n;
} Got;

static int on_message(WsClient *ws, const uint8_t *data, size_t size, bool binary, void *userdata) {
        Got *g = userdata;

        assert_true(size <= sizeof(g->data));
        if (g->n == 0 && size <= sizeof(g->first)) {
                memcpy(g->first, data, size);
                g->first_size = size;
        }
        memcpy(g->data, data, size);
        g->size = size;
        g->binary = binary;
        g->n++;
        return 0;
}

/* A client on one end of a socketpair, as ws_client_connect() leaves it. */
static void client_on_pair(WsClient *ws, Got *g, int *ret_server_fd) {
        int sv[2];

        assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sv), 0);
        *ws = (WsClient) { .fd = sv[0], .on_message = on_message, .userdata = g, .max_message = 1 << 20,
                           .mask_state = 0x9e3779b97f4a7c15ull };
        *ret_server_fd = sv[1];
}

static void read_exact(int fd, void *buf, size_t n) {
        size_t got = 0;

        while (got < n) {
                ssize_t k = recv(fd, (uint8_t *) buf + got, n - got, 0);
                if (k < 0 && errno == EAGAIN) {
                        usleep(1000);
                        continue;
                }
                assert_true(k > 0);
                got += (size_t) k;
        }
}

/* Read one client frame: check FIN, opcode and the mask bit, return the unmasked payload. */
static size_t read_client_frame(int fd, uint8_t opcode, uint8_t *payload, size_t max) {
        uint8_t h[2], ext[8], key[4];
        uint64_t len;

        read_exact(fd, h, 2);
        assert_int_equal(h[0], 0x80 | opcode);
        assert_true(h[1] & 0x80); /* every client frame is masked */
        len = h[1] & 0x7f;
        if (len == 126) {
                read_exact(fd, ext, 2);
                len = (uint64_t) ext[0] << 8 | ext[1];
                assert_true(len >= 126); /* shortest encoding */
        } else if (len == 127) {
                read_exact(fd, ext, 8);
                len = 0;
                for (int i = 0; i < 8; i++)
                        len = len << 8 | ext[i];
                assert_true(len > 0xffff);
        }
        assert_true(len <= max);
        read_exact(fd, key, 4);
        read_exact(fd, payload, (size_t) len);
        for (size_t i = 0; i < len; i++)
                payload[i] ^= key[i & 3];
        return (size_t) len;
}

static void send_all(int fd, const void *p, size_t n) {
        assert_int_equal(send(fd, p, n, MSG_NOSIGNAL), (ssize_t) n);
}

static void test_client_frames_are_masked(void **state) {
        static uint8_t payload[70000], back[70000 + 14];
        const size_t sizes[] = { 0, 1, 125, 126, 65535, 65536, 70000 };
        WsClient ws;
        Got g = {};
        int srv;

        client_on_pair(&ws, &g, &srv);
        for (size_t i = 0; i < sizeof(payload); i++)
                payload[i] = (uint8_t) (i * 7 + 3);

        for (size_t i = 0; i < ELEMENTSOF(sizes); i++) {
                size_t n = sizes[i], hdr = 2 + (n >= 126 ? (n > 0xffff ? 8 : 2) : 0) + 4, got = 0, len;
                const uint8_t *key;

                assert_int_equal(ws_client_queue(&ws, i % 2, payload, n), 0);
                /* Large frames do not fit the socket buffer at once: flush while reading. */
                while (got < hdr + n) {
                        ssize_t k;

                        assert_int_equal(ws_client_flush(&ws), 0);
                        k = recv(srv, back + got, hdr + n - got, 0);
                        if (k < 0 && errno == EAGAIN)
                                continue;
                        assert_true(k > 0);
                        got += (size_t) k;
                }
                assert_int_equal(ws.tx.len, 0);
                assert_int_equal(back[0], 0x80 | (i % 2 ? 0x2 : 0x1));
                assert_true(back[1] & 0x80); /* every client frame is masked */
                len = back[1] & 0x7f;
                if (len == 126)
                        len = (size_t) back[2] << 8 | back[3];
                else if (len == 127) {
                        len = 0;
                        for (int k = 0; k < 8; k++)
                                len = len << 8 | back[2 + k];
                }
                assert_int_equal(len, n); /* and uses the shortest length encoding (hdr above) */
                key = back + hdr - 4;
                for (size_t k = 0; k < n; k++)
                        back[hdr + k] ^= key[k & 3];
                assert_memory_equal(back + hdr, payload, n);
        }
        ws_client_done(&ws);
        safe_close(srv);
}

static void test_fragments_and_ping(void **state) {
        /* "Hello, " + ping("p1") + "frag" + "mented!" as text in three fragments. */
        static const uint8_t wire[] = {
                0x01, 7, 'H', 'e', 'l', 'l', 'o', ',', ' ',
                0x89, 2, 'p', '1',
                0x00, 4, 'f', 'r', 'a', 'g',
                0x80, 7, 'm', 'e', 'n', 't', 'e', 'd', '!',
                0x82, 3, 1, 2, 3, /* then a whole binary message */
        };
        uint8_t pong[16];
        WsClient ws;
        Got g = {};
        int srv, r;

        client_on_pair(&ws, &g, &srv);
        /* Byte by byte first: frames split anywhere must still parse. */
        for (size_t i = 0; i < 12; i++) {
                send_all(srv, wire + i, 1);
                r = ws_client_pump(&ws, 1000);
                assert_true(r >= 0);
        }
        send_all(srv, wire + 12, sizeof(wire) - 12);
        for (int i = 0; i < 10 && g.n < 2; i++)
                assert_true(ws_client_pump(&ws, 1000) >= 0);

        assert_int_equal(g.n, 2);
        assert_int_equal(g.first_size, 18);
        assert_memory_equal(g.first, "Hello, fragmented!", 18);
        assert_true(g.binary);
        assert_int_equal(g.size, 3);
        assert_int_equal(read_client_frame(srv, 0xa, pong, sizeof(pong)), 2);
        assert_memory_equal(pong, "p1", 2);
        ws_client_done(&ws);
        safe_close(srv);
}

static void test_reassembled_text(void **state) {
        static const uint8_t wire[] = {
                0x01, 3, 'a', 'b', 'c',
                0x00, 0,
                0x80, 2, 'd', 'e',
        };
        WsClient ws;
        Got g = {};
        int srv;

        client_on_pair(&ws, &g, &srv);
        send_all(srv, wire, sizeof(wire));
        assert_int_equal(ws_client_pump(&ws, 1000), 1);
        assert_int_equal(g.n, 1);
        assert_false(g.binary);
        assert_int_equal(g.size, 5);
        assert_memory_equal(g.data, "abcde", 5);
        ws_client_done(&ws);
        safe_close(srv);
}

static void test_large_frame_lengths(void **state) {
        static uint8_t wire[4 + 10 + 70000];
        WsClient ws;
        Got g = {};
        size_t n = 0;
        int srv;

        client_on_pair(&ws, &g, &srv);
        /* 300 bytes with the 16-bit length, then 70000 with the 64-bit length. */
        wire[n++] = 0x82;
        wire[n++] = 126;
        wire[n++] = 300 >> 8;
        wire[n++] = 300 & 0xff;
        memset(wire + n, 'x', 300);
        n += 300;
        send_all(srv, wire, n);
        assert_int_equal(ws_client_pump(&ws, 1000), 1);
        assert_int_equal(g.size, 300);

        n = 0;
        wire[n++] = 0x82;
        wire[n++] = 127;
        for (int i = 7; i >= 0; i--)
                wire[n++] = (uint8_t) ((uint64_t) 70000 >> (i * 8));
        memset(wire + n, 'y', 70000);
        n += 70000;
        for (size_t off = 0; off < n;) {
                ssize_t k = send(srv, wire + off, n - off, MSG_NOSIGNAL);
                if (k < 0 && errno == EAGAIN) {
                        assert_true(ws_client_pump(&ws, 10) >= 0);
                        continue;
                }
                assert_true(k > 0);
                off += (size_t) k;
        }
        for (int i = 0; i < 100 && g.n < 2; i++)
                assert_true(ws_client_pump(&ws, 100) >= 0);
        assert_int_equal(g.n, 2);
        assert_int_equal(g.size, 70000);
        assert_int_equal(g.data[69999], 'y');
        ws_client_done(&ws);
        safe_close(srv);
}

static void test_close_is_echoed(void **state) {
        static const uint8_t wire[] = { 0x88, 2, 0x03, 0xe8 };
        uint8_t back[8];
        WsClient ws;
        Got g = {};
        int srv;

        client_on_pair(&ws, &g, &srv);
        send_all(srv, wire, sizeof(wire));
        assert_int_equal(ws_client_pump(&ws, 1000), -ECONNRESET);
        assert_true(ws.closed);
        assert_int_equal(read_client_frame(srv, 0x8, back, sizeof(back)), 2);
        assert_memory_equal(back, "\x03\xe8", 2);
        assert_int_equal(ws_client_queue(&ws, false, "x", 1), -ECONNRESET);
        ws_client_done(&ws);
        safe_close(srv);
}

static void test_protocol_errors(void **state) {
        static const uint8_t masked[] = { 0x81, 0x81, 1, 2, 3, 4, 'a' };
        static const uint8_t stray_cont[] = { 0x80, 1, 'a' };
        static const uint8_t rsv[] = { 0xc1, 1, 'a' };
        const struct {
                const uint8_t *p;
                size_t n;
        } cases[] = { { masked, sizeof(masked) }, { stray_cont, sizeof(stray_cont) }, { rsv, sizeof(rsv) } };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                WsClient ws;
                Got g = {};
                int srv;

                client_on_pair(&ws, &g, &srv);
                send_all(srv, cases[i].p, cases[i].n);
                assert_int_equal(ws_client_pump(&ws, 1000), -EPROTO);
                assert_int_equal(g.n, 0);
                ws_client_done(&ws);
                safe_close(srv);
        }
}

/* ---- handshake against a one-shot server thread ---------------------------------------- */

typedef struct Fake {
        int listen_fd;
        bool wrong_accept;
} Fake;

static void *fake_server(void *userdata) {
        Fake *f = userdata;
        char req[2048], resp[512], accept_b64[64], in[128];
        unsigned char md[EVP_MAX_MD_SIZE];
        unsigned md_len;
        size_t got = 0;
        const char *k;
        int fd = accept(f->listen_fd, NULL, NULL);

        if (fd < 0)
                return NULL;
        while (got < sizeof(req) - 1 && !strstr(req, "\r\n\r\n")) {
                ssize_t n = recv(fd, req + got, sizeof(req) - 1 - got, 0);
                if (n <= 0)
                        break;
                got += (size_t) n;
                req[got] = 0;
        }
        k = strstr(req, "Sec-WebSocket-Key: ");
        if (k) {
                k += strlen("Sec-WebSocket-Key: ");
                snprintf(in, sizeof(in), "%.*s258EAFA5-E914-47DA-95CA-C5AB0DC85B11", (int) strcspn(k, "\r"), k);
                EVP_Digest(in, strlen(in), md, &md_len, EVP_sha1(), NULL);
                lws_b64_encode_string((const char *) md, (int) md_len, accept_b64, sizeof(accept_b64));
                if (f->wrong_accept)
                        accept_b64[0] = accept_b64[0] == 'A' ? 'B' : 'A';
                /* The first server frame rides along with the response headers. */
                snprintf(resp, sizeof(resp),
                         "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                         "sec-websocket-accept: %s\r\n\r\n\x81\x02hi",
                         accept_b64);
                send_all(fd, resp, strlen(resp));
        }
        usleep(200 * 1000);
        close(fd);
        return NULL;
}

static void handshake(bool wrong_accept) {
        struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        socklen_t al = sizeof(a);
        Fake f = { .wrong_accept = wrong_accept };
        char port[16];
        pthread_t t;
        WsClient ws = {};
        Got g = {};
        int r;

        f.listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        assert_true(f.listen_fd >= 0);
        assert_int_equal(bind(f.listen_fd, (struct sockaddr *) &a, sizeof(a)), 0);
        assert_int_equal(listen(f.listen_fd, 1), 0);
        assert_int_equal(getsockname(f.listen_fd, (struct sockaddr *) &a, &al), 0);
        snprintf(port, sizeof(port), "%u", ntohs(a.sin_port));
        assert_int_equal(pthread_create(&t, NULL, fake_server, &f), 0);

        ws.on_message = on_message;
        ws.userdata = &g;
        r = ws_client_connect(&ws, "127.0.0.1", port, "/socket.io/?EIO=4&transport=websocket", 5000);
        if (wrong_accept)
                assert_int_equal(r, -EPROTO);
        else {
                assert_int_equal(r, 0);
                /* The frame that came with the headers is delivered by the first pump. */
                assert_int_equal(ws_client_pump(&ws, 1000), 1);
                assert_int_equal(g.size, 2);
                assert_memory_equal(g.data, "hi", 2);
        }
        ws_client_done(&ws);
        pthread_join(t, NULL);
        safe_close(f.listen_fd);
}

static void test_handshake_ok(void **state) {
        handshake(false);
}

static void test_handshake_wrong_accept(void **state) {
        handshake(true);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_client_frames_are_masked),
                cmocka_unit_test(test_fragments_and_ping),
                cmocka_unit_test(test_reassembled_text),
                cmocka_unit_test(test_large_frame_lengths),
                cmocka_unit_test(test_close_is_echoed),
                cmocka_unit_test(test_protocol_errors),
                cmocka_unit_test(test_handshake_ok),
                cmocka_unit_test(test_handshake_wrong_accept),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}

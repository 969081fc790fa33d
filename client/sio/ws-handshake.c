/* SPDX-License-Identifier: MIT */
#include <ctype.h>
#include <errno.h>
#include <string.h>
#include <sys/random.h>

#include <libwebsockets.h>
#include <openssl/evp.h>

#include "macro.h"
#include "ws-handshake.h"

#define WS_GUID "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

static int base64(const uint8_t *data, size_t n, char *out, size_t out_size) {
        /* lws wants room for the NUL and a spare byte. */
        return lws_b64_encode_string((const char *) data, (int) n, out, (int) out_size) < 0 ? -EINVAL : 0;
}

int ws_handshake_key(char ret_key[static WS_KEY_LEN + 1]) {
        uint8_t nonce[16];
        char key[WS_KEY_LEN + 2];
        int r;

        if (getrandom(nonce, sizeof(nonce), GRND_NONBLOCK) != (ssize_t) sizeof(nonce))
                return errno > 0 ? -errno : -EIO;
        r = base64(nonce, sizeof(nonce), key, sizeof(key));
        if (r < 0)
                return r;
        memcpy(ret_key, key, WS_KEY_LEN + 1);
        return 0;
}

int ws_handshake_accept(const char *key, char ret_accept[static WS_ACCEPT_LEN + 1]) {
        char text[WS_KEY_LEN + STRLEN(WS_GUID) + 1], accept[WS_ACCEPT_LEN + 2];
        uint8_t digest[EVP_MAX_MD_SIZE];
        unsigned digest_len = 0;
        int r;

        if (strlen(key) != WS_KEY_LEN)
                return -EINVAL;
        memcpy(text, key, WS_KEY_LEN);
        memcpy(text + WS_KEY_LEN, WS_GUID, sizeof(WS_GUID));
        if (EVP_Digest(text, strlen(text), digest, &digest_len, EVP_sha1(), NULL) != 1 || digest_len != 20)
                return -EIO;
        r = base64(digest, digest_len, accept, sizeof(accept));
        if (r < 0)
                return r;
        memcpy(ret_accept, accept, WS_ACCEPT_LEN + 1);
        return 0;
}

int ws_handshake_request(Buffer *out, const char *host_header, const char *path, const char *key) {
        return buffer_printf(out,
                             "GET %s HTTP/1.1\r\n"
                             "Host: %s\r\n"
                             "Upgrade: websocket\r\n"
                             "Connection: Upgrade\r\n"
                             "Sec-WebSocket-Key: %s\r\n"
                             "Sec-WebSocket-Version: 13\r\n"
                             "User-Agent: libagentix\r\n"
                             "\r\n",
                             path, host_header, key);
}

/* ---- the answer ------------------------------------------------------------------------------ */

typedef struct Span {
        const char *p;
        size_t n;
} Span;

static Span trim(const char *p, size_t n) {
        while (n > 0 && (*p == ' ' || *p == '\t'))
                p++, n--;
        while (n > 0 && (p[n - 1] == ' ' || p[n - 1] == '\t'))
                n--;
        return (Span) { p, n };
}

static bool span_equal_nocase(Span s, const char *word) {
        return s.n == strlen(word) && strncasecmp(s.p, word, s.n) == 0;
}

/* Whether a comma-separated header value lists `token` (Connection: keep-alive, Upgrade). */
static bool span_has_token(Span s, const char *token) {
        while (s.n > 0) {
                const char *comma = memchr(s.p, ',', s.n);
                size_t len = comma ? (size_t) (comma - s.p) : s.n;

                if (span_equal_nocase(trim(s.p, len), token))
                        return true;
                if (!comma)
                        break;
                s.p += len + 1;
                s.n -= len + 1;
        }
        return false;
}

static const uint8_t *find_head_end(const uint8_t *data, size_t n) {
        for (size_t i = 3; i < n; i++)
                if (data[i] == '\n' && data[i - 1] == '\r' && data[i - 2] == '\n' && data[i - 3] == '\r')
                        return data + i + 1;
        return NULL;
}

/* "HTTP/1.1 101 Switching Protocols": the status, or 0 if the line is not a status line. */
static unsigned parse_status_line(Span line) {
        unsigned status = 0;

        if (line.n < 12 || !strneq(line.p, "HTTP/1.", 7) || !isdigit((unsigned char) line.p[7]) || line.p[8] != ' ')
                return 0;
        for (size_t i = 9; i < 12; i++) {
                if (!isdigit((unsigned char) line.p[i]))
                        return 0;
                status = status * 10 + (unsigned) (line.p[i] - '0');
        }
        if (line.n > 12 && line.p[12] != ' ')
                return 0;
        return status;
}

int ws_handshake_answer(const uint8_t *data, size_t n, const char *accept, WsHandshakeAnswer *ret) {
        const uint8_t *end = find_head_end(data, MIN(n, (size_t) WS_HANDSHAKE_HEAD_MAX));
        bool upgrade = false, connection = false, accepted = false;
        const char *p = (const char *) data, *problem = NULL;
        size_t left;
        Span line;

        *ret = (WsHandshakeAnswer) {};
        if (!end)
                return n >= WS_HANDSHAKE_HEAD_MAX ? -EBADMSG : 0;
        left = (size_t) (end - data) - 2; /* the lines, each with its CRLF, without the empty one */

        for (bool first = true; left > 0; first = false) {
                const char *crlf = memmem(p, left, "\r\n", 2), *colon;
                size_t len;
                Span name, value;

                if (!crlf)
                        return -EBADMSG;
                len = (size_t) (crlf - p);

                line = (Span) { p, len };
                p += len + 2;
                left -= len + 2;
                if (first) {
                        ret->status = parse_status_line(line);
                        if (ret->status == 0)
                                return -EBADMSG;
                        continue;
                }
                colon = memchr(line.p, ':', line.n);
                if (!colon)
                        return -EBADMSG;
                name = trim(line.p, (size_t) (colon - line.p));
                value = trim(colon + 1, line.n - (size_t) (colon - line.p) - 1);

                if (span_equal_nocase(name, "Upgrade"))
                        upgrade = span_equal_nocase(value, "websocket");
                else if (span_equal_nocase(name, "Connection"))
                        connection = span_has_token(value, "upgrade");
                else if (span_equal_nocase(name, "Sec-WebSocket-Accept"))
                        accepted = value.n == WS_ACCEPT_LEN && memcmp(value.p, accept, WS_ACCEPT_LEN) == 0;
                else if (span_equal_nocase(name, "Sec-WebSocket-Extensions") && value.n > 0)
                        problem = "the server chose an extension that was not asked for";
                else if (span_equal_nocase(name, "Sec-WebSocket-Protocol") && value.n > 0)
                        problem = "the server chose a subprotocol that was not asked for";
        }
        ret->head_size = (size_t) (end - data);

        if (ret->status != 101)
                problem = "the server did not switch protocols";
        else if (!upgrade)
                problem = "the answer has no \"Upgrade: websocket\"";
        else if (!connection)
                problem = "the answer has no \"Connection: Upgrade\"";
        else if (!accepted)
                problem = "the answer's Sec-WebSocket-Accept is wrong";
        if (problem) {
                ret->problem = problem;
                return -EPROTO;
        }
        return 1;
}

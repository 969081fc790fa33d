/* SPDX-License-Identifier: MIT */
/* The check of the server's answer to the WebSocket upgrade (client/sio/ws-handshake.c) on any
 * bytes, with a fixed Sec-WebSocket-Accept (RFC 6455's example).
 *
 * Byte 0: bit 0 set pads the input with a long run of header bytes (at a place byte 1
 * picks) so that heads around WS_HANDSHAKE_HEAD_MAX are reached too; the rest is the answer.
 * Checked: the result is one of the four documented ones; an accepted head ends at its first
 * CRLFCRLF, is a 101, and reads the same when the bytes behind it are cut off; a refused one
 * says its status and why; an incomplete one has no CRLFCRLF and is shorter than the limit;
 * "not HTTP" without a complete head only at the limit, and with one only when it breaks the
 * HTTP form (checked by a plain reading here); a complete head gives the same
 * answer alone as with more bytes behind it, and one byte less of it is incomplete. */
#include <errno.h>
#include <string.h>

#include "fuzz-util.h"
#include "ws-handshake.h"

#define ACCEPT "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="

static const uint8_t *first_crlfcrlf(const uint8_t *p, size_t n) {
        const uint8_t *q = memmem(p, n, "\r\n\r\n", 4);

        return q ? q + 4 : NULL;
}

/* HTTP as the answer must be: "HTTP/1.<d> <ddd>[ <reason>]" with a status other than 000,
 * then header lines that each have a colon. `len` includes the final CRLFCRLF. */
static bool well_formed(const uint8_t *p, size_t len) {
        const uint8_t *end = p + len - 2;
        bool first = true;

        while (p < end) {
                const uint8_t *crlf = memmem(p, (size_t) (end - p), "\r\n", 2);
                size_t n = (size_t) (crlf - p);

                if (first) {
                        if (n < 12 || memcmp(p, "HTTP/1.", 7) != 0 || p[7] < '0' || p[7] > '9' || p[8] != ' ')
                                return false;
                        for (size_t i = 9; i < 12; i++)
                                if (p[i] < '0' || p[i] > '9')
                                        return false;
                        if (memcmp(p + 9, "000", 3) == 0 || (n > 12 && p[12] != ' '))
                                return false;
                        first = false;
                } else if (!memchr(p, ':', n))
                        return false;
                p = crlf + 2;
        }
        return !first;
}

static void check(const uint8_t *p, size_t n) {
        const uint8_t *end = first_crlfcrlf(p, n);
        WsHandshakeAnswer a, b;
        int r, again;

        memset(&a, 0xaa, sizeof(a));
        r = ws_handshake_answer(p, n, ACCEPT, &a);
        CHECK(r == 0 || r == 1 || r == -EPROTO || r == -EBADMSG);

        switch (r) {
        case 0:
                CHECK(!end);
                CHECK(n < WS_HANDSHAKE_HEAD_MAX);
                CHECK(a.status == 0 && a.head_size == 0 && !a.problem);
                return;
        case 1:
                CHECK(end && (size_t) (end - p) == a.head_size);
                CHECK(a.head_size <= n && a.head_size <= WS_HANDSHAKE_HEAD_MAX);
                CHECK(memcmp(p + a.head_size - 4, "\r\n\r\n", 4) == 0);
                CHECK(a.status == 101 && !a.problem);
                CHECK(well_formed(p, a.head_size));
                break;
        case -EPROTO:
                CHECK(end && (size_t) (end - p) <= WS_HANDSHAKE_HEAD_MAX);
                CHECK(a.status >= 1 && a.status <= 999);
                CHECK(a.problem && a.problem[0]);
                CHECK(a.status == 101 || strstr(a.problem, "switch"));
                CHECK(well_formed(p, (size_t) (end - p)));
                break;
        default: /* -EBADMSG: no end within the limit, or a complete head that is not HTTP */
                if (!end || (size_t) (end - p) > WS_HANDSHAKE_HEAD_MAX) {
                        CHECK(n >= WS_HANDSHAKE_HEAD_MAX);
                        return;
                }
                CHECK(!well_formed(p, (size_t) (end - p)));
                CHECK(ws_handshake_answer(p, (size_t) (end - p), ACCEPT, &b) == -EBADMSG);
                return;
        }

        /* The head alone gives the same answer; one byte less is not complete. */
        memset(&b, 0x55, sizeof(b));
        again = ws_handshake_answer(p, (size_t) (end - p), ACCEPT, &b);
        CHECK(again == r && b.status == a.status && b.problem == a.problem);
        if (r == 1)
                CHECK(b.head_size == a.head_size);
        CHECK(ws_handshake_answer(p, (size_t) (end - p) - 1, ACCEPT, &b) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        uint8_t *buf;
        size_t at, pad, n;

        if (size < 2)
                return 0;
        if (!(data[0] & 1)) {
                check(data + 2, size - 2);
                return 0;
        }

        /* A long header line somewhere in the answer: lands around the limit. */
        at = data[1] < size - 2 ? data[1] : size - 2;
        pad = WS_HANDSHAKE_HEAD_MAX - 384 + (size_t) (data[0] >> 1) * 4;
        n = size - 2 + pad;
        buf = malloc(n);
        CHECK(buf);
        memcpy(buf, data + 2, at);
        memset(buf + at, 'a', pad);
        memcpy(buf + at + pad, data + 2 + at, size - 2 - at);
        check(buf, n);
        free(buf);
        return 0;
}

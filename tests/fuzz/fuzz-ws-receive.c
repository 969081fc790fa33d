/* SPDX-License-Identifier: MIT */
/* The client's reader of server WebSocket frames (client/sio/ws-receive.c) on any bytes.
 *
 * Input: bytes 0-1 max_message (0..4096), byte 2 head_max (0..63), byte 3 the seed of the
 * split pattern, byte 4 the handler call that fails (0: none), then the stream. The stream
 * goes through three readers: a plain one-pass parser written here (the reference), the
 * receiver fed everything at once, and the receiver fed in pseudo-random pieces, reading
 * straight into the message (ws_receiver_direct()) whenever that is offered. All three must
 * report the same calls and the same end; delivered messages stay within max_message, heads
 * within head_max. */
#include <errno.h>
#include <string.h>

#include "fuzz-util.h"
#include "ws-receive.h"

/* One handler call, its data folded into a hash. */
typedef struct Event {
        char kind;
        bool binary;
        uint64_t size, total;
        unsigned code;
        uint64_t hash;
} Event;

typedef struct Events {
        Event *ev;
        size_t n, cap;
        size_t fail_at; /* the call with this number (from 1) returns -ECANCELED */
        size_t max_message, head_max;
} Events;

static uint64_t fnv(const uint8_t *p, size_t n) {
        uint64_t h = 0xcbf29ce484222325ull;

        for (size_t i = 0; i < n; i++)
                h = (h ^ p[i]) * 0x100000001b3ull;
        return h;
}

static int add(Events *e, Event ev, const uint8_t *data, size_t size) {
        if (e->n == e->cap) {
                e->cap = e->cap ? 2 * e->cap : 64;
                e->ev = realloc(e->ev, e->cap * sizeof(Event));
                CHECK(e->ev);
        }
        ev.size = size;
        ev.hash = fnv(data, size);
        e->ev[e->n++] = ev;
        return e->fail_at == e->n ? -ECANCELED : 0;
}

static int on_message(void *userdata, bool binary, const uint8_t *data, size_t size) {
        Events *e = userdata;

        CHECK(size <= e->max_message);
        CHECK(size == 0 || data);
        return add(e, (Event) { .kind = 'M', .binary = binary }, data, size);
}

static int on_too_large(void *userdata, bool binary, const uint8_t *head, size_t head_size, uint64_t size) {
        Events *e = userdata;

        CHECK(size > e->max_message);
        CHECK(head_size <= e->head_max && head_size <= size);
        /* the whole head is there, as far as the message reaches */
        CHECK(head_size == (size < e->head_max ? size : e->head_max));
        return add(e, (Event) { .kind = 'T', .binary = binary, .total = size }, head, head_size);
}

static int on_ping(void *userdata, const uint8_t *data, size_t size) {
        CHECK(size <= WS_CONTROL_MAX);
        return add(userdata, (Event) { .kind = 'P' }, data, size);
}

static int on_close(void *userdata, unsigned code, const uint8_t *reason, size_t reason_size) {
        CHECK(code <= 0xffff);
        CHECK(reason_size <= WS_CONTROL_MAX - 2);
        return add(userdata, (Event) { .kind = 'C', .code = code }, reason, reason_size);
}

static const WsReceiverHandlers handlers = {
        .message = on_message,
        .too_large = on_too_large,
        .ping = on_ping,
        .close = on_close,
};

/* ---- the reference: the whole stream in one pass, RFC 6455 section 5 as written ---------- */

static int reference(const uint8_t *p, size_t n, Events *e) {
        uint8_t *msg = malloc(n + 1);
        size_t pos = 0, msg_len = 0;
        bool in_message = false, binary = false;
        int k = 0;

        CHECK(msg);
        while (k == 0 && n - pos >= 2) {
                unsigned opcode = p[pos] & 0x0f, len7 = p[pos + 1] & 0x7f;
                bool fin = p[pos] & 0x80, control = opcode & 0x8;
                size_t hs = 2 + (len7 == 126 ? 2 : len7 == 127 ? 8 : 0) + (p[pos + 1] & 0x80 ? 4 : 0);
                uint64_t len = len7;

                if (n - pos < hs)
                        break;
                if (len7 == 126)
                        len = (uint64_t) p[pos + 2] << 8 | p[pos + 3];
                else if (len7 == 127)
                        for (unsigned i = 0; i < 8; i++)
                                len = (i == 0 ? 0 : len << 8) | p[pos + 2 + i];

                /* refused as soon as the header is complete */
                if ((p[pos] & 0x70) || (p[pos + 1] & 0x80) || (len >> 63) ||
                    (control && opcode != WS_OP_CLOSE && opcode != WS_OP_PING && opcode != WS_OP_PONG) ||
                    (control && (!fin || len > WS_CONTROL_MAX)) || (!control && opcode > 2) ||
                    (opcode == 0 && !in_message) || ((opcode == 1 || opcode == 2) && in_message)) {
                        k = -EPROTO;
                        break;
                }
                if (len > n - pos - hs)
                        break; /* the rest of the frame never came */
                pos += hs;

                if (opcode == WS_OP_PING)
                        k = add(e, (Event) { .kind = 'P' }, p + pos, len);
                else if (opcode == WS_OP_CLOSE) {
                        if (len == 1)
                                k = -EPROTO;
                        else
                                k = add(e, (Event) { .kind = 'C', .code = len >= 2 ? (unsigned) p[pos] << 8 | p[pos + 1] : 0 },
                                        p + pos + (len >= 2 ? 2 : 0), len >= 2 ? len - 2 : 0);
                } else if (!control) {
                        if (opcode != 0) {
                                in_message = true;
                                binary = opcode == 2;
                                msg_len = 0;
                        }
                        memcpy(msg + msg_len, p + pos, len);
                        msg_len += len;
                        if (fin) {
                                in_message = false;
                                if (msg_len <= e->max_message)
                                        k = add(e, (Event) { .kind = 'M', .binary = binary }, msg, msg_len);
                                else
                                        k = add(e, (Event) { .kind = 'T', .binary = binary, .total = msg_len }, msg,
                                                msg_len < e->head_max ? msg_len : e->head_max);
                        }
                }
                pos += len;
        }
        free(msg);
        return k;
}

/* ---- the receiver, fed in pieces ---------------------------------------------------------- */

static uint32_t next(uint32_t *s) {
        *s = *s * 1103515245u + 12345u;
        return *s >> 16;
}

static int feed_pieces(WsReceiver *r, const uint8_t *p, size_t n, uint32_t seed, bool *used_direct) {
        size_t pos = 0;

        while (pos < n) {
                uint32_t x = next(&seed);
                size_t piece = x % 4 == 0 ? 1 + x % 3000 : 1 + x % 17, size = 0;
                uint8_t *space = NULL;
                int k;

                if (piece > n - pos)
                        piece = n - pos;
                k = ws_receiver_direct(r, (next(&seed) % 4) * 16, &space, &size);
                CHECK(k == 0 || k == 1);
                if (k == 1 && next(&seed) % 4 != 0) {
                        CHECK(space && size > 0);
                        if (piece > size)
                                piece = size;
                        memcpy(space, p + pos, piece);
                        k = ws_receiver_direct_done(r, piece);
                        *used_direct = true;
                } else
                        k = ws_receiver_feed(r, p + pos, piece);
                if (k < 0)
                        return k;
                CHECK(k == 0);
                pos += piece;
        }
        return 0;
}

static void check_same(const Events *a, const Events *b) {
        CHECK(a->n == b->n);
        for (size_t i = 0; i < a->n; i++) {
                const Event *x = &a->ev[i], *y = &b->ev[i];

                CHECK(x->kind == y->kind && x->binary == y->binary && x->size == y->size && x->total == y->total &&
                      x->code == y->code && x->hash == y->hash);
        }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        Events ref = {}, once = {}, pieces = {};
        size_t max_message, head_max, fail_at;
        bool used_direct = false;
        WsReceiver r;
        uint32_t seed;
        int k_ref, k_once, k_pieces;

        if (size < 5)
                return 0;
        max_message = ((size_t) data[0] << 8 | data[1]) % 4097;
        head_max = data[2] % 64;
        seed = data[3];
        fail_at = data[4] % 8;
        data += 5;
        size -= 5;

        ref = (Events) { .fail_at = fail_at, .max_message = max_message, .head_max = head_max };
        once = ref;
        pieces = ref;

        k_ref = reference(data, size, &ref);

        ws_receiver_init(&r, max_message, head_max, &handlers, &once);
        k_once = ws_receiver_feed(&r, data, size);
        ws_receiver_done(&r);

        ws_receiver_init(&r, max_message, head_max, &handlers, &pieces);
        k_pieces = feed_pieces(&r, data, size, seed, &used_direct);
        /* whatever was taken, done() releases it */
        ws_receiver_trim(&r);
        ws_receiver_done(&r);

        CHECK(k_once == 0 || k_once == -EPROTO || k_once == -ECANCELED);
        CHECK(k_once == k_ref);
        CHECK(k_pieces == k_ref);
        check_same(&ref, &once);
        check_same(&ref, &pieces);
        if (k_once == -ECANCELED)
                CHECK(once.n == fail_at);

        free(ref.ev);
        free(once.ev);
        free(pieces.ev);
        return 0;
}

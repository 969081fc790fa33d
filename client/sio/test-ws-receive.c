/* SPDX-License-Identifier: MIT */
/* The reader of server frames (ws-receive.c) on frames built here by hand: messages in each
 * length form, reassembly, control frames between fragments, every protocol error, messages
 * above max_message (head and size, then the next message), any split of the same bytes, the
 * direct-read API, and handlers that stop the feeding. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ws-frame.h"
#include "ws-receive.h"

/* ---- frames as a server writes them (unmasked unless asked) ---------------------------------- */

enum {
        FIN = 0x80,
        RSV1 = 0x40,
        RSV2 = 0x20,
        RSV3 = 0x10,
};

/* Length forms: the smallest that fits, or a given one. */
enum { LEN_AUTO, LEN_7, LEN_16, LEN_64 };

static void frame_full(Buffer *out, uint8_t b0, const void *payload, size_t n, int form, bool mask) {
        uint8_t h[14];
        size_t hs = 2;

        if (form == LEN_AUTO)
                form = n < 126 ? LEN_7 : n < 65536 ? LEN_16 : LEN_64;
        h[0] = b0;
        h[1] = mask ? 0x80 : 0;
        if (form == LEN_7) {
                assert_true(n < 126);
                h[1] |= (uint8_t) n;
        } else if (form == LEN_16) {
                assert_true(n < 65536);
                h[1] |= 126;
                h[2] = (uint8_t) (n >> 8);
                h[3] = (uint8_t) n;
                hs = 4;
        } else {
                h[1] |= 127;
                for (unsigned i = 0; i < 8; i++)
                        h[2 + i] = (uint8_t) ((uint64_t) n >> (56 - 8 * i));
                hs = 10;
        }
        if (mask) {
                memcpy(h + hs, "\x01\x02\x03\x04", 4);
                hs += 4;
        }
        assert_int_equal(buffer_append(out, h, hs), 0);
        if (n > 0) {
                uint8_t *p = malloc(n);

                assert_non_null(p);
                for (size_t i = 0; i < n; i++)
                        p[i] = ((const uint8_t *) payload)[i] ^ (mask ? h[hs - 4 + i % 4] : 0);
                assert_int_equal(buffer_append(out, p, n), 0);
                free(p);
        }
}

static void frame(Buffer *out, bool fin, unsigned opcode, const void *payload, size_t n) {
        frame_full(out, (uint8_t) ((fin ? FIN : 0) | opcode), payload, n, LEN_AUTO, false);
}

static void frame_str(Buffer *out, bool fin, unsigned opcode, const char *s) {
        frame(out, fin, opcode, s, strlen(s));
}

/* A payload whose bytes differ from position to position (and from seed to seed). */
static uint8_t *pattern(size_t n, unsigned seed) {
        uint8_t *p = malloc(n ? n : 1);

        assert_non_null(p);
        for (size_t i = 0; i < n; i++)
                p[i] = (uint8_t) (i * 131 + (i >> 8) * 7 + seed * 29 + 3);
        return p;
}

/* ---- what the handlers saw ------------------------------------------------------------------- */

enum { EV_MESSAGE = 'M', EV_TOO_LARGE = 'T', EV_PING = 'P', EV_CLOSE = 'C' };

typedef struct Event {
        char kind;
        bool binary;
        uint8_t *data; /* message, head, ping payload, close reason */
        size_t size;
        uint64_t total; /* too_large */
        unsigned code;  /* close */
} Event;

typedef struct Recorder {
        Event ev[256];
        size_t n;
        /* the handler call with this index (counting from 1) returns fail_errno */
        size_t fail_at;
        int fail_errno;
} Recorder;

static int record(Recorder *rec, char kind, bool binary, const uint8_t *data, size_t size, uint64_t total,
                  unsigned code) {
        Event *e;

        assert_true(rec->n < ELEMENTSOF(rec->ev));
        e = &rec->ev[rec->n++];
        *e = (Event) { .kind = kind, .binary = binary, .size = size, .total = total, .code = code };
        e->data = malloc(size ? size : 1);
        assert_non_null(e->data);
        if (size > 0)
                memcpy(e->data, data, size);
        return rec->fail_at == rec->n ? rec->fail_errno : 0;
}

static int on_message(void *userdata, bool binary, const uint8_t *data, size_t size) {
        return record(userdata, EV_MESSAGE, binary, data, size, 0, 0);
}

static int on_too_large(void *userdata, bool binary, const uint8_t *head, size_t head_size, uint64_t size) {
        return record(userdata, EV_TOO_LARGE, binary, head, head_size, size, 0);
}

static int on_ping(void *userdata, const uint8_t *data, size_t size) {
        return record(userdata, EV_PING, false, data, size, 0, 0);
}

static int on_close(void *userdata, unsigned code, const uint8_t *reason, size_t reason_size) {
        return record(userdata, EV_CLOSE, false, reason, reason_size, 0, code);
}

static const WsReceiverHandlers handlers = {
        .message = on_message,
        .too_large = on_too_large,
        .ping = on_ping,
        .close = on_close,
};

static void recorder_clear(Recorder *rec) {
        for (size_t i = 0; i < rec->n; i++)
                free(rec->ev[i].data);
        *rec = (Recorder) {};
}

static bool events_equal(const Recorder *a, const Recorder *b) {
        if (a->n != b->n)
                return false;
        for (size_t i = 0; i < a->n; i++) {
                const Event *x = &a->ev[i], *y = &b->ev[i];

                if (x->kind != y->kind || x->binary != y->binary || x->size != y->size || x->total != y->total ||
                    x->code != y->code || memcmp(x->data, y->data, x->size) != 0)
                        return false;
        }
        return true;
}

static void assert_message(const Recorder *rec, size_t i, bool binary, const void *data, size_t size) {
        assert_true(i < rec->n);
        assert_int_equal(rec->ev[i].kind, EV_MESSAGE);
        assert_int_equal(rec->ev[i].binary, binary);
        assert_int_equal(rec->ev[i].size, size);
        if (size > 0)
                assert_memory_equal(rec->ev[i].data, data, size);
}

static void assert_message_str(const Recorder *rec, size_t i, const char *s) {
        assert_message(rec, i, false, s, strlen(s));
}

/* ---- feeding --------------------------------------------------------------------------------- */

/* Feed a stream in pieces of the given sizes (the last one takes the rest); stops at the first
 * error, which is returned. */
static int feed_pieces(WsReceiver *r, const uint8_t *data, size_t n, const size_t *pieces, size_t n_pieces) {
        size_t off = 0;

        for (size_t i = 0; off < n; i++) {
                size_t take = i < n_pieces ? MIN(pieces[i], n - off) : n - off;
                int k = ws_receiver_feed(r, data + off, take);

                if (k < 0)
                        return k;
                assert_int_equal(k, 0);
                off += take;
        }
        return 0;
}

static int feed_all(WsReceiver *r, const Buffer *b) {
        return ws_receiver_feed(r, buffer_data(b), b->len);
}

static int feed_bytewise(WsReceiver *r, const Buffer *b) {
        for (size_t i = 0; i < b->len; i++) {
                int k = ws_receiver_feed(r, buffer_data(b) + i, 1);

                if (k < 0)
                        return k;
                assert_int_equal(k, 0);
        }
        return 0;
}

/* Run a stream through a fresh receiver at once and byte by byte; both must agree, and the
 * result (0 or an errno) is returned with the events of the at-once run in rec. */
static int run_both(const Buffer *b, size_t max_message, size_t head_max, Recorder *rec) {
        Recorder bytewise = {};
        WsReceiver r;
        int k, kb;

        ws_receiver_init(&r, max_message, head_max, &handlers, rec);
        k = feed_all(&r, b);
        ws_receiver_done(&r);

        ws_receiver_init(&r, max_message, head_max, &handlers, &bytewise);
        kb = feed_bytewise(&r, b);
        ws_receiver_done(&r);

        assert_int_equal(k, kb);
        assert_true(events_equal(rec, &bytewise));
        recorder_clear(&bytewise);
        return k;
}

/* ---- tests ----------------------------------------------------------------------------------- */

static void test_single_messages(void **state) {
        /* Each length form and its edges. */
        static const size_t sizes[] = { 1, 5, 125, 126, 200, 65535, 65536, 70000 };

        for (size_t i = 0; i < ELEMENTSOF(sizes); i++)
                for (unsigned binary = 0; binary <= 1; binary++) {
                        _cleanup_buffer_ Buffer b = BUFFER_NULL;
                        _cleanup_free_ uint8_t *p = pattern(sizes[i], (unsigned) i);
                        Recorder rec = {};

                        frame(&b, true, binary ? WS_OP_BINARY : WS_OP_TEXT, p, sizes[i]);
                        assert_int_equal(run_both(&b, 1u << 20, 64, &rec), 0);
                        assert_int_equal(rec.n, 1);
                        assert_message(&rec, 0, binary, p, sizes[i]);
                        recorder_clear(&rec);
                }
}

static void test_length_forms(void **state) {
        /* Non-minimal length forms carry the same length (the reader takes what it is told). */
        _cleanup_buffer_ Buffer b = BUFFER_NULL;
        Recorder rec = {};

        frame_full(&b, FIN | WS_OP_TEXT, "abc", 3, LEN_16, false);
        frame_full(&b, FIN | WS_OP_BINARY, "defg", 4, LEN_64, false);
        frame_full(&b, FIN | WS_OP_PING, "p", 1, LEN_16, false);
        assert_int_equal(run_both(&b, 100, 16, &rec), 0);
        assert_int_equal(rec.n, 3);
        assert_message_str(&rec, 0, "abc");
        assert_message(&rec, 1, true, "defg", 4);
        assert_int_equal(rec.ev[2].kind, EV_PING);
        assert_int_equal(rec.ev[2].size, 1);
        recorder_clear(&rec);
}

static void test_fragmented(void **state) {
        _cleanup_buffer_ Buffer b = BUFFER_NULL;
        _cleanup_free_ uint8_t *big = pattern(70000, 9);
        Recorder rec = {};

        frame_str(&b, false, WS_OP_TEXT, "Hel");
        frame_str(&b, false, WS_OP_CONTINUATION, "lo, ");
        frame_str(&b, true, WS_OP_CONTINUATION, "world");
        /* binary, in fragments of each length form */
        frame(&b, false, WS_OP_BINARY, big, 100);
        frame(&b, false, WS_OP_CONTINUATION, big + 100, 1000);
        frame(&b, true, WS_OP_CONTINUATION, big + 1100, 70000 - 1100);
        /* a two-fragment text right after */
        frame_str(&b, false, WS_OP_TEXT, "x");
        frame_str(&b, true, WS_OP_CONTINUATION, "y");

        assert_int_equal(run_both(&b, 1u << 20, 16, &rec), 0);
        assert_int_equal(rec.n, 3);
        assert_message_str(&rec, 0, "Hello, world");
        assert_message(&rec, 1, true, big, 70000);
        assert_message_str(&rec, 2, "xy");
        recorder_clear(&rec);
}

static void test_control_between_fragments(void **state) {
        _cleanup_buffer_ Buffer b = BUFFER_NULL;
        Recorder rec = {};

        frame_str(&b, false, WS_OP_BINARY, "part1-");
        frame_str(&b, true, WS_OP_PING, "are you there");
        frame_str(&b, false, WS_OP_CONTINUATION, "part2-");
        frame_str(&b, true, WS_OP_PONG, "ignored");
        frame_str(&b, true, WS_OP_PING, "");
        frame_str(&b, true, WS_OP_CONTINUATION, "part3");

        assert_int_equal(run_both(&b, 1024, 16, &rec), 0);
        assert_int_equal(rec.n, 3);
        assert_int_equal(rec.ev[0].kind, EV_PING);
        assert_int_equal(rec.ev[0].size, 13);
        assert_memory_equal(rec.ev[0].data, "are you there", 13);
        assert_int_equal(rec.ev[1].kind, EV_PING);
        assert_int_equal(rec.ev[1].size, 0);
        assert_message(&rec, 2, true, "part1-part2-part3", 17);
        recorder_clear(&rec);
}

static void test_pong_ignored(void **state) {
        _cleanup_buffer_ Buffer b = BUFFER_NULL;
        Recorder rec = {};

        frame_str(&b, true, WS_OP_PONG, "pong data");
        frame_str(&b, true, WS_OP_PONG, "");
        frame_str(&b, true, WS_OP_TEXT, "after");
        assert_int_equal(run_both(&b, 1024, 16, &rec), 0);
        assert_int_equal(rec.n, 1);
        assert_message_str(&rec, 0, "after");
        recorder_clear(&rec);
}

static void test_close(void **state) {
        _cleanup_buffer_ Buffer b = BUFFER_NULL;
        uint8_t payload[WS_CONTROL_MAX];
        Recorder rec = {};

        /* code and reason */
        frame(&b, true, WS_OP_CLOSE, "\x03\xe8" "bye", 5);
        assert_int_equal(run_both(&b, 1024, 16, &rec), 0);
        assert_int_equal(rec.n, 1);
        assert_int_equal(rec.ev[0].kind, EV_CLOSE);
        assert_int_equal(rec.ev[0].code, 1000);
        assert_int_equal(rec.ev[0].size, 3);
        assert_memory_equal(rec.ev[0].data, "bye", 3);
        recorder_clear(&rec);

        /* code only, a high code (both bytes count) */
        buffer_clear(&b);
        frame(&b, true, WS_OP_CLOSE, "\x0f\xa1", 2);
        assert_int_equal(run_both(&b, 1024, 16, &rec), 0);
        assert_int_equal(rec.n, 1);
        assert_int_equal(rec.ev[0].code, 4001);
        assert_int_equal(rec.ev[0].size, 0);
        recorder_clear(&rec);

        /* no payload: no code */
        buffer_clear(&b);
        frame(&b, true, WS_OP_CLOSE, NULL, 0);
        assert_int_equal(run_both(&b, 1024, 16, &rec), 0);
        assert_int_equal(rec.n, 1);
        assert_int_equal(rec.ev[0].kind, EV_CLOSE);
        assert_int_equal(rec.ev[0].code, 0);
        assert_int_equal(rec.ev[0].size, 0);
        recorder_clear(&rec);

        /* the longest close frame: 123 bytes of reason */
        buffer_clear(&b);
        payload[0] = 0x03, payload[1] = 0xe9;
        for (size_t i = 2; i < sizeof(payload); i++)
                payload[i] = (uint8_t) ('a' + i % 26);
        frame(&b, true, WS_OP_CLOSE, payload, sizeof(payload));
        assert_int_equal(run_both(&b, 1024, 16, &rec), 0);
        assert_int_equal(rec.n, 1);
        assert_int_equal(rec.ev[0].code, 1001);
        assert_int_equal(rec.ev[0].size, sizeof(payload) - 2);
        assert_memory_equal(rec.ev[0].data, payload + 2, sizeof(payload) - 2);
        recorder_clear(&rec);

        /* a close between fragments, the message still whole after it */
        buffer_clear(&b);
        frame_str(&b, false, WS_OP_TEXT, "ab");
        frame(&b, true, WS_OP_CLOSE, "\x03\xe8", 2);
        frame_str(&b, true, WS_OP_CONTINUATION, "cd");
        assert_int_equal(run_both(&b, 1024, 16, &rec), 0);
        assert_int_equal(rec.n, 2);
        assert_int_equal(rec.ev[0].kind, EV_CLOSE);
        assert_message_str(&rec, 1, "abcd");
        recorder_clear(&rec);

        /* one byte of payload: half a code */
        buffer_clear(&b);
        frame(&b, true, WS_OP_CLOSE, "\x03", 1);
        assert_int_equal(run_both(&b, 1024, 16, &rec), -EPROTO);
        assert_int_equal(rec.n, 0);
        recorder_clear(&rec);
}

static void test_protocol_errors(void **state) {
        static const struct {
                const char *what;
                uint8_t b0;
                size_t n;
                int form;
                bool mask;
                bool fragment_first; /* an unfinished text message before the frame */
        } cases[] = {
                { "masked text", FIN | WS_OP_TEXT, 5, LEN_AUTO, true, false },
                { "masked empty ping", FIN | WS_OP_PING, 0, LEN_AUTO, true, false },
                { "masked 64-bit", FIN | WS_OP_BINARY, 70000, LEN_AUTO, true, false },
                { "RSV1", FIN | RSV1 | WS_OP_TEXT, 5, LEN_AUTO, false, false },
                { "RSV2", FIN | RSV2 | WS_OP_BINARY, 5, LEN_AUTO, false, false },
                { "RSV3", FIN | RSV3 | WS_OP_TEXT, 0, LEN_AUTO, false, false },
                { "RSV1 on a continuation", FIN | RSV1, 3, LEN_AUTO, false, true },
                { "RSV1 on a ping", FIN | RSV1 | WS_OP_PING, 0, LEN_AUTO, false, false },
                { "opcode 3", FIN | 0x3, 1, LEN_AUTO, false, false },
                { "opcode 7", FIN | 0x7, 0, LEN_AUTO, false, false },
                { "opcode 0xB", FIN | 0xb, 1, LEN_AUTO, false, false },
                { "opcode 0xF", FIN | 0xf, 0, LEN_AUTO, false, false },
                { "continuation of nothing", FIN | WS_OP_CONTINUATION, 3, LEN_AUTO, false, false },
                { "unfinished continuation of nothing", WS_OP_CONTINUATION, 0, LEN_AUTO, false, false },
                { "text inside a fragmented message", FIN | WS_OP_TEXT, 3, LEN_AUTO, false, true },
                { "binary inside a fragmented message", WS_OP_BINARY, 3, LEN_AUTO, false, true },
                { "ping without FIN", WS_OP_PING, 3, LEN_AUTO, false, false },
                { "close without FIN", WS_OP_CLOSE, 2, LEN_AUTO, false, false },
                { "pong without FIN", WS_OP_PONG, 0, LEN_AUTO, false, false },
                { "ping of 126 bytes", FIN | WS_OP_PING, 126, LEN_AUTO, false, false },
                { "close of 200 bytes", FIN | WS_OP_CLOSE, 200, LEN_AUTO, false, false },
                { "pong of 126 bytes", FIN | WS_OP_PONG, 126, LEN_AUTO, false, false },
                { "ping, 64-bit form, 126 bytes", FIN | WS_OP_PING, 126, LEN_64, false, false },
        };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                _cleanup_buffer_ Buffer b = BUFFER_NULL;
                _cleanup_free_ uint8_t *big = pattern(cases[i].n, 2);
                Recorder rec = {};

                print_message("%s\n", cases[i].what);
                /* a whole message before: it is delivered, the error comes after it */
                frame_str(&b, true, WS_OP_TEXT, "ok");
                if (cases[i].fragment_first)
                        frame_str(&b, false, WS_OP_TEXT, "unfinished");
                frame_full(&b, cases[i].b0, big, cases[i].n, cases[i].form, cases[i].mask);
                /* and one after, never delivered */
                frame_str(&b, true, WS_OP_TEXT, "never");

                assert_int_equal(run_both(&b, 1u << 20, 16, &rec), -EPROTO);
                assert_int_equal(rec.n, 1);
                assert_message_str(&rec, 0, "ok");
                recorder_clear(&rec);
        }

        /* A 64-bit length with its top bit set. */
        {
                _cleanup_buffer_ Buffer b = BUFFER_NULL;
                static const uint8_t h[] = { FIN | WS_OP_BINARY, 127, 0x80, 0, 0, 0, 0, 0, 0, 1, 'x' };
                static const uint8_t h2[] = { FIN | WS_OP_BINARY, 127, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff };
                Recorder rec = {};

                assert_int_equal(buffer_append(&b, h, sizeof(h)), 0);
                assert_int_equal(run_both(&b, 1u << 20, 16, &rec), -EPROTO);
                assert_int_equal(rec.n, 0);
                buffer_clear(&b);
                assert_int_equal(buffer_append(&b, h2, sizeof(h2)), 0);
                assert_int_equal(run_both(&b, 1u << 20, 16, &rec), -EPROTO);
                assert_int_equal(rec.n, 0);
        }
}

static void test_huge_length_is_too_large(void **state) {
        /* The largest legal 64-bit length: skipped as too large, not an error (the head is what
         * arrived); nothing is allocated for it. */
        static const uint8_t h[] = { FIN | WS_OP_BINARY, 127, 0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff };
        _cleanup_buffer_ Buffer b = BUFFER_NULL;
        _cleanup_free_ uint8_t *p = pattern(100, 4);
        uint8_t *space = NULL;
        size_t size = 0;
        Recorder rec = {};
        WsReceiver r;

        assert_int_equal(buffer_append(&b, h, sizeof(h)), 0);
        assert_int_equal(buffer_append(&b, p, 100), 0);
        ws_receiver_init(&r, 1024, 16, &handlers, &rec);
        assert_int_equal(feed_all(&r, &b), 0);
        assert_int_equal(rec.n, 0);
        assert_int_equal(ws_receiver_direct(&r, 1, &space, &size), 0);
        /* what is skipped is not kept: only the head */
        for (unsigned i = 0; i < 1000; i++)
                assert_int_equal(ws_receiver_feed(&r, p, 100), 0);
        assert_int_equal(rec.n, 0);
        assert_int_equal(r.message.len, 16);
        assert_true(r.message.cap < 4096);
        ws_receiver_done(&r);
        recorder_clear(&rec);
}

static void assert_too_large(const Recorder *rec, size_t i, bool binary, const uint8_t *head, size_t head_size,
                             uint64_t total) {
        assert_true(i < rec->n);
        assert_int_equal(rec->ev[i].kind, EV_TOO_LARGE);
        assert_int_equal(rec->ev[i].binary, binary);
        assert_int_equal(rec->ev[i].size, head_size);
        assert_memory_equal(rec->ev[i].data, head, head_size);
        assert_true(rec->ev[i].total == total);
}

static void test_too_large(void **state) {
        _cleanup_free_ uint8_t *p = pattern(100001, 5);
        _cleanup_buffer_ Buffer b = BUFFER_NULL;
        Recorder rec = {};

        /* max_message 100, head_max 16 */

        /* exactly max_message: delivered; one more: skipped */
        frame(&b, true, WS_OP_BINARY, p, 100);
        frame(&b, true, WS_OP_BINARY, p, 101);
        frame_str(&b, true, WS_OP_TEXT, "next");
        assert_int_equal(run_both(&b, 100, 16, &rec), 0);
        assert_int_equal(rec.n, 3);
        assert_message(&rec, 0, true, p, 100);
        assert_too_large(&rec, 1, true, p, 16, 101);
        assert_message_str(&rec, 2, "next");
        recorder_clear(&rec);

        /* one large frame in each length form, text and binary */
        buffer_clear(&b);
        frame(&b, true, WS_OP_TEXT, p, 300);
        frame(&b, true, WS_OP_BINARY, p + 1, 100000);
        frame_str(&b, true, WS_OP_TEXT, "next");
        assert_int_equal(run_both(&b, 100, 16, &rec), 0);
        assert_int_equal(rec.n, 3);
        assert_too_large(&rec, 0, false, p, 16, 300);
        assert_too_large(&rec, 1, true, p + 1, 16, 100000);
        assert_message_str(&rec, 2, "next");
        recorder_clear(&rec);

        /* fragmented: the first fragments fit, a later one does not; the head spans
         * fragments; a ping between them still arrives */
        buffer_clear(&b);
        frame(&b, false, WS_OP_BINARY, p, 10);
        frame(&b, false, WS_OP_CONTINUATION, p + 10, 3);
        frame_str(&b, true, WS_OP_PING, "hi");
        frame(&b, false, WS_OP_CONTINUATION, p + 13, 80);
        frame(&b, false, WS_OP_CONTINUATION, p + 93, 50);
        frame(&b, true, WS_OP_CONTINUATION, p + 143, 7);
        frame_str(&b, true, WS_OP_BINARY, "next");
        assert_int_equal(run_both(&b, 100, 16, &rec), 0);
        assert_int_equal(rec.n, 3);
        assert_int_equal(rec.ev[0].kind, EV_PING);
        assert_too_large(&rec, 1, true, p, 16, 150);
        assert_message(&rec, 2, true, "next", 4);
        recorder_clear(&rec);

        /* fragmented: the first fragment is already too large */
        buffer_clear(&b);
        frame(&b, false, WS_OP_TEXT, p, 500);
        frame(&b, true, WS_OP_CONTINUATION, p + 500, 5);
        frame_str(&b, false, WS_OP_TEXT, "ne");
        frame_str(&b, true, WS_OP_CONTINUATION, "xt");
        assert_int_equal(run_both(&b, 100, 16, &rec), 0);
        assert_int_equal(rec.n, 2);
        assert_too_large(&rec, 0, false, p, 16, 505);
        assert_message_str(&rec, 1, "next");
        recorder_clear(&rec);

        /* fragments adding up to exactly max_message: delivered */
        buffer_clear(&b);
        frame(&b, false, WS_OP_BINARY, p, 60);
        frame(&b, true, WS_OP_CONTINUATION, p + 60, 40);
        assert_int_equal(run_both(&b, 100, 16, &rec), 0);
        assert_int_equal(rec.n, 1);
        assert_message(&rec, 0, true, p, 100);
        recorder_clear(&rec);

        /* a fragment that is empty after the message became too large */
        buffer_clear(&b);
        frame(&b, false, WS_OP_BINARY, p, 101);
        frame(&b, false, WS_OP_CONTINUATION, NULL, 0);
        frame(&b, true, WS_OP_CONTINUATION, NULL, 0);
        frame_str(&b, true, WS_OP_TEXT, "next");
        assert_int_equal(run_both(&b, 100, 16, &rec), 0);
        assert_int_equal(rec.n, 2);
        assert_too_large(&rec, 0, true, p, 16, 101);
        assert_message_str(&rec, 1, "next");
        recorder_clear(&rec);

        /* head_max above the message: the whole message is its head */
        buffer_clear(&b);
        frame(&b, false, WS_OP_BINARY, p, 5);
        frame(&b, true, WS_OP_CONTINUATION, p + 5, 15);
        assert_int_equal(run_both(&b, 10, 64, &rec), 0);
        assert_int_equal(rec.n, 1);
        assert_too_large(&rec, 0, true, p, 20, 20);
        recorder_clear(&rec);

        /* head_max 0: no head at all */
        buffer_clear(&b);
        frame(&b, true, WS_OP_BINARY, p, 50);
        frame(&b, true, WS_OP_BINARY, p, 5);
        assert_int_equal(run_both(&b, 10, 0, &rec), 0);
        assert_int_equal(rec.n, 2);
        assert_too_large(&rec, 0, true, p, 0, 50);
        assert_message(&rec, 1, true, p, 5);
        recorder_clear(&rec);
}

static void test_zero_length(void **state) {
        _cleanup_buffer_ Buffer b = BUFFER_NULL;
        Recorder rec = {};

        frame(&b, true, WS_OP_TEXT, NULL, 0);
        frame(&b, true, WS_OP_BINARY, NULL, 0);
        /* all fragments empty */
        frame(&b, false, WS_OP_BINARY, NULL, 0);
        frame(&b, false, WS_OP_CONTINUATION, NULL, 0);
        frame(&b, true, WS_OP_CONTINUATION, NULL, 0);
        /* an empty first fragment, the data in the last */
        frame(&b, false, WS_OP_TEXT, NULL, 0);
        frame_str(&b, true, WS_OP_CONTINUATION, "abc");
        /* an empty last fragment */
        frame_str(&b, false, WS_OP_BINARY, "de");
        frame(&b, true, WS_OP_CONTINUATION, NULL, 0);
        frame(&b, true, WS_OP_TEXT, NULL, 0);

        assert_int_equal(run_both(&b, 16, 4, &rec), 0);
        assert_int_equal(rec.n, 6);
        assert_message(&rec, 0, false, NULL, 0);
        assert_message(&rec, 1, true, NULL, 0);
        assert_message(&rec, 2, true, NULL, 0);
        assert_message_str(&rec, 3, "abc");
        assert_message(&rec, 4, true, "de", 2);
        assert_message(&rec, 5, false, NULL, 0);
        recorder_clear(&rec);

        /* max_message 0: empty messages pass, one byte is too large */
        buffer_clear(&b);
        frame(&b, true, WS_OP_BINARY, NULL, 0);
        frame_str(&b, true, WS_OP_TEXT, "x");
        assert_int_equal(run_both(&b, 0, 4, &rec), 0);
        assert_int_equal(rec.n, 2);
        assert_message(&rec, 0, true, NULL, 0);
        assert_too_large(&rec, 1, false, (const uint8_t *) "x", 1, 1);
        recorder_clear(&rec);
}

/* Several messages of every kind in one stream. */
static void mixed_stream(Buffer *b, bool with_big) {
        _cleanup_free_ uint8_t *p = pattern(70000, 7);

        frame_str(b, true, WS_OP_TEXT, "4hello");
        frame(b, true, WS_OP_BINARY, p, 126);
        frame_str(b, true, WS_OP_PING, "ping!");
        frame_str(b, false, WS_OP_TEXT, "frag");
        frame_str(b, true, WS_OP_PONG, "");
        frame(b, false, WS_OP_CONTINUATION, p, 130);
        frame(b, true, WS_OP_PING, p, 125);
        frame_str(b, true, WS_OP_CONTINUATION, "end");
        frame(b, true, WS_OP_BINARY, p + 3, 300); /* too large */
        frame(b, true, WS_OP_TEXT, NULL, 0);
        frame(b, false, WS_OP_BINARY, p, 200);
        frame(b, true, WS_OP_CONTINUATION, p + 200, 200); /* too large, in fragments */
        frame(b, true, WS_OP_BINARY, p + 9, 250);
        if (with_big) {
                frame(b, true, WS_OP_BINARY, p, 70000); /* too large, 64-bit form */
                frame(b, false, WS_OP_BINARY, p + 5, 1000);
                frame(b, true, WS_OP_CONTINUATION, p + 1005, 60000); /* too large */
        }
        frame_str(b, true, WS_OP_TEXT, "last");
        frame(b, true, WS_OP_CLOSE, "\x03\xe8" "done", 6);
}

static void test_splits(void **state) {
        _cleanup_buffer_ Buffer b = BUFFER_NULL, small = BUFFER_NULL;
        Recorder want = {}, got = {};
        WsReceiver r;

        mixed_stream(&b, true);
        ws_receiver_init(&r, 256, 16, &handlers, &want);
        assert_int_equal(feed_all(&r, &b), 0);
        ws_receiver_done(&r);
        assert_int_equal(want.n, 13);
        assert_int_equal(want.ev[0].kind, EV_MESSAGE);
        assert_int_equal(want.ev[1].kind, EV_MESSAGE);
        assert_int_equal(want.ev[2].kind, EV_PING);
        assert_int_equal(want.ev[3].kind, EV_PING);
        assert_int_equal(want.ev[4].kind, EV_MESSAGE);
        assert_int_equal(want.ev[4].size, 4 + 130 + 3);
        assert_int_equal(want.ev[5].kind, EV_TOO_LARGE);
        assert_int_equal(want.ev[6].kind, EV_MESSAGE);
        assert_int_equal(want.ev[7].kind, EV_TOO_LARGE);
        assert_true(want.ev[7].total == 400);
        assert_int_equal(want.ev[8].kind, EV_MESSAGE);
        assert_int_equal(want.ev[9].kind, EV_TOO_LARGE);
        assert_int_equal(want.ev[10].kind, EV_TOO_LARGE);
        assert_true(want.ev[10].total == 61000);
        assert_message_str(&want, 11, "last");
        assert_int_equal(want.ev[12].kind, EV_CLOSE);

        /* byte by byte */
        ws_receiver_init(&r, 256, 16, &handlers, &got);
        assert_int_equal(feed_bytewise(&r, &b), 0);
        ws_receiver_done(&r);
        assert_true(events_equal(&want, &got));
        recorder_clear(&got);

        /* random splits, seeded */
        for (unsigned seed = 1; seed <= 200; seed++) {
                size_t pieces[4096], n_pieces = 0, sum = 0;

                srand(seed);
                while (sum < b.len && n_pieces < ELEMENTSOF(pieces)) {
                        /* mostly small pieces, sometimes large ones */
                        size_t piece = rand() % 4 == 0 ? (size_t) (rand() % 20000) : (size_t) (rand() % 40);

                        pieces[n_pieces++] = piece;
                        sum += piece;
                }
                ws_receiver_init(&r, 256, 16, &handlers, &got);
                assert_int_equal(feed_pieces(&r, buffer_data(&b), b.len, pieces, n_pieces), 0);
                ws_receiver_done(&r);
                assert_true(events_equal(&want, &got));
                recorder_clear(&got);
        }
        recorder_clear(&want);

        /* every split in two of a stream without the large frames */
        mixed_stream(&small, false);
        ws_receiver_init(&r, 256, 16, &handlers, &want);
        assert_int_equal(feed_all(&r, &small), 0);
        ws_receiver_done(&r);
        for (size_t cut = 0; cut <= small.len; cut++) {
                ws_receiver_init(&r, 256, 16, &handlers, &got);
                assert_int_equal(feed_pieces(&r, buffer_data(&small), small.len, &cut, 1), 0);
                ws_receiver_done(&r);
                assert_true(events_equal(&want, &got));
                recorder_clear(&got);
        }
        recorder_clear(&want);
}

static void test_direct(void **state) {
        _cleanup_buffer_ Buffer b = BUFFER_NULL;
        _cleanup_free_ uint8_t *p = pattern(100000, 11);
        uint8_t *space = NULL;
        size_t size = 0;
        Recorder rec = {};
        WsReceiver r;

        ws_receiver_init(&r, 1u << 20, 16, &handlers, &rec);

        /* idle: nothing to read into */
        assert_int_equal(ws_receiver_direct(&r, 1, &space, &size), 0);

        /* the header and 10 payload bytes by feed(), the rest straight into the message */
        frame(&b, true, WS_OP_BINARY, p, 100000);
        assert_int_equal(b.len, 10 + 100000);
        assert_int_equal(ws_receiver_feed(&r, buffer_data(&b), 10 + 10), 0);
        assert_int_equal(ws_receiver_direct(&r, 1000, &space, &size), 1);
        assert_int_equal(size, 100000 - 10);
        memcpy(space, p + 10, 50000);
        assert_int_equal(ws_receiver_direct_done(&r, 50000), 0);
        assert_int_equal(rec.n, 0);
        /* asking again gives the rest, right after what was written */
        assert_int_equal(ws_receiver_direct(&r, 1000, &space, &size), 1);
        assert_int_equal(size, 100000 - 10 - 50000);
        memcpy(space, p + 50010, size);
        assert_int_equal(ws_receiver_direct_done(&r, size), 0);
        assert_int_equal(rec.n, 1);
        assert_message(&rec, 0, true, p, 100000);
        recorder_clear(&rec);

        /* feed() takes over again for what follows */
        buffer_clear(&b);
        frame_str(&b, true, WS_OP_TEXT, "small");
        assert_int_equal(feed_all(&r, &b), 0);
        assert_int_equal(rec.n, 1);
        assert_message_str(&rec, 0, "small");
        recorder_clear(&rec);

        /* a fragmented message: first fragment by feed(), the second direct, interleaved with
         * feed() of its middle, and the last fragment by feed() again */
        buffer_clear(&b);
        frame(&b, false, WS_OP_TEXT, p, 3000);
        assert_int_equal(feed_all(&r, &b), 0);
        buffer_clear(&b);
        frame(&b, false, WS_OP_CONTINUATION, p + 3000, 40000);
        assert_int_equal(ws_receiver_feed(&r, buffer_data(&b), 4), 0); /* the header only */
        assert_int_equal(ws_receiver_direct(&r, 1, &space, &size), 1);
        assert_int_equal(size, 40000);
        memcpy(space, p + 3000, 1000);
        assert_int_equal(ws_receiver_direct_done(&r, 1000), 0);
        assert_int_equal(ws_receiver_feed(&r, buffer_data(&b) + 4 + 1000, 2000), 0);
        assert_int_equal(ws_receiver_direct(&r, 1, &space, &size), 1);
        assert_int_equal(size, 37000);
        memcpy(space, p + 6000, size);
        assert_int_equal(ws_receiver_direct_done(&r, size), 0);
        assert_int_equal(rec.n, 0);
        buffer_clear(&b);
        frame(&b, true, WS_OP_CONTINUATION, p + 43000, 7);
        assert_int_equal(feed_all(&r, &b), 0);
        assert_int_equal(rec.n, 1);
        assert_message(&rec, 0, false, p, 43007);
        recorder_clear(&rec);

        /* no direct read into a control frame */
        buffer_clear(&b);
        frame(&b, true, WS_OP_PING, p, 125);
        assert_int_equal(ws_receiver_feed(&r, buffer_data(&b), 2 + 5), 0);
        assert_int_equal(ws_receiver_direct(&r, 1, &space, &size), 0);
        assert_int_equal(ws_receiver_feed(&r, buffer_data(&b) + 7, b.len - 7), 0);
        assert_int_equal(rec.n, 1);
        assert_int_equal(rec.ev[0].kind, EV_PING);
        assert_int_equal(rec.ev[0].size, 125);
        assert_memory_equal(rec.ev[0].data, p, 125);
        recorder_clear(&rec);

        /* nor while fewer than min_size bytes are due; exactly min_size is enough */
        buffer_clear(&b);
        frame(&b, true, WS_OP_BINARY, p, 200);
        assert_int_equal(ws_receiver_feed(&r, buffer_data(&b), 4 + 150), 0);
        assert_int_equal(ws_receiver_direct(&r, 51, &space, &size), 0);
        assert_int_equal(ws_receiver_direct(&r, 50, &space, &size), 1);
        assert_int_equal(size, 50);
        /* n beyond the frame is refused */
        assert_int_equal(ws_receiver_direct_done(&r, 51), -EINVAL);
        memcpy(space, p + 150, 50);
        assert_int_equal(ws_receiver_direct_done(&r, 50), 0);
        assert_int_equal(rec.n, 1);
        assert_message(&rec, 0, true, p, 200);
        recorder_clear(&rec);

        /* direct_done without a frame */
        assert_int_equal(ws_receiver_direct_done(&r, 1), -EINVAL);
        ws_receiver_done(&r);

        /* nor into a message that is too large: its bytes are skipped by feed() */
        ws_receiver_init(&r, 1000, 16, &handlers, &rec);
        buffer_clear(&b);
        frame(&b, true, WS_OP_BINARY, p, 5000);
        assert_int_equal(ws_receiver_feed(&r, buffer_data(&b), 4 + 100), 0);
        assert_int_equal(ws_receiver_direct(&r, 1, &space, &size), 0);
        assert_int_equal(ws_receiver_feed(&r, buffer_data(&b) + 104, b.len - 104), 0);
        assert_int_equal(rec.n, 1);
        assert_too_large(&rec, 0, true, p, 16, 5000);
        recorder_clear(&rec);

        /* a fragmented message that turns too large after a direct read */
        buffer_clear(&b);
        frame(&b, false, WS_OP_BINARY, p, 900);
        frame(&b, true, WS_OP_CONTINUATION, p + 900, 200);
        assert_int_equal(ws_receiver_feed(&r, buffer_data(&b), 4), 0);
        assert_int_equal(ws_receiver_direct(&r, 1, &space, &size), 1);
        assert_int_equal(size, 900);
        memcpy(space, p, 900);
        assert_int_equal(ws_receiver_direct_done(&r, 900), 0);
        assert_int_equal(ws_receiver_feed(&r, buffer_data(&b) + 904, 4), 0);
        assert_int_equal(ws_receiver_direct(&r, 1, &space, &size), 0);
        assert_int_equal(ws_receiver_feed(&r, buffer_data(&b) + 908, b.len - 908), 0);
        assert_int_equal(rec.n, 1);
        assert_too_large(&rec, 0, true, p, 16, 1100);
        recorder_clear(&rec);
        ws_receiver_done(&r);
}

/* The same mixed stream read as a transport does: direct whenever offered, feed() otherwise,
 * in pieces of varying size. */
static void test_direct_splits(void **state) {
        _cleanup_buffer_ Buffer b = BUFFER_NULL;
        Recorder want = {}, got = {};
        WsReceiver r;

        mixed_stream(&b, true);
        ws_receiver_init(&r, 1u << 20, 16, &handlers, &want);
        assert_int_equal(feed_all(&r, &b), 0);
        ws_receiver_done(&r);

        for (unsigned seed = 1; seed <= 100; seed++) {
                size_t off = 0;
                unsigned directs = 0;

                srand(seed);
                ws_receiver_init(&r, 1u << 20, 16, &handlers, &got);
                while (off < b.len) {
                        size_t want_size = 1 + (size_t) (rand() % (rand() % 2 ? 50 : 30000)), size = 0;
                        uint8_t *space = NULL;
                        int k = ws_receiver_direct(&r, (size_t) (rand() % 64), &space, &size);

                        assert_true(k == 0 || k == 1);
                        want_size = MIN(want_size, b.len - off);
                        if (k == 1) {
                                size_t n = MIN(want_size, size);

                                memcpy(space, buffer_data(&b) + off, n);
                                assert_int_equal(ws_receiver_direct_done(&r, n), 0);
                                off += n;
                                directs++;
                        } else {
                                assert_int_equal(ws_receiver_feed(&r, buffer_data(&b) + off, want_size), 0);
                                off += want_size;
                        }
                }
                ws_receiver_done(&r);
                assert_true(directs > 0);
                assert_true(events_equal(&want, &got));
                recorder_clear(&got);
        }
        recorder_clear(&want);
}

static void test_handler_stops(void **state) {
        _cleanup_buffer_ Buffer b = BUFFER_NULL;
        _cleanup_free_ uint8_t *p = pattern(1000, 3);

        /* message, ping, too_large, message (fragmented), close, message */
        frame_str(&b, true, WS_OP_TEXT, "one");
        frame_str(&b, true, WS_OP_PING, "two");
        frame(&b, true, WS_OP_BINARY, p, 1000);
        frame_str(&b, false, WS_OP_TEXT, "fo");
        frame_str(&b, true, WS_OP_CONTINUATION, "ur");
        frame(&b, true, WS_OP_CLOSE, "\x03\xe8", 2);
        frame_str(&b, true, WS_OP_TEXT, "six");

        for (size_t at = 1; at <= 6; at++)
                for (unsigned mode = 0; mode < 2; mode++) {
                        Recorder rec = { .fail_at = at, .fail_errno = -ECANCELED };
                        WsReceiver r;
                        int k;

                        ws_receiver_init(&r, 100, 8, &handlers, &rec);
                        k = mode == 0 ? feed_all(&r, &b) : feed_bytewise(&r, &b);
                        ws_receiver_done(&r);
                        assert_int_equal(k, -ECANCELED);
                        /* no handler call after the one that stopped it */
                        assert_int_equal(rec.n, at);
                        recorder_clear(&rec);
                }
}

static void test_trim(void **state) {
        _cleanup_free_ uint8_t *p = pattern(5u << 20, 8);
        _cleanup_buffer_ Buffer b = BUFFER_NULL;
        Recorder rec = {};
        WsReceiver r;

        /* A large fragmented message leaves a large buffer; trim drops it when idle, not in the
         * middle of a message, and the receiver goes on. */
        frame(&b, false, WS_OP_BINARY, p, 1u << 20);
        frame(&b, true, WS_OP_CONTINUATION, p + (1u << 20), 4u << 20);
        frame(&b, false, WS_OP_TEXT, p, 10);
        ws_receiver_init(&r, 8u << 20, 16, &handlers, &rec);
        assert_int_equal(feed_all(&r, &b), 0);
        assert_int_equal(rec.n, 1);
        assert_message(&rec, 0, true, p, 5u << 20);
        ws_receiver_trim(&r);
        /* a message is in progress: its buffer stays */
        assert_int_equal(r.message.len, 10);
        buffer_clear(&b);
        frame(&b, true, WS_OP_CONTINUATION, "x", 1);
        assert_int_equal(feed_all(&r, &b), 0);
        assert_int_equal(rec.n, 2);
        ws_receiver_trim(&r);
        assert_int_equal(r.message.cap, 0);

        buffer_clear(&b);
        frame(&b, false, WS_OP_TEXT, "a", 1);
        frame(&b, true, WS_OP_CONTINUATION, "b", 1);
        assert_int_equal(feed_all(&r, &b), 0);
        assert_int_equal(rec.n, 3);
        assert_message_str(&rec, 2, "ab");
        ws_receiver_done(&r);
        recorder_clear(&rec);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_single_messages),
                cmocka_unit_test(test_length_forms),
                cmocka_unit_test(test_fragmented),
                cmocka_unit_test(test_control_between_fragments),
                cmocka_unit_test(test_pong_ignored),
                cmocka_unit_test(test_close),
                cmocka_unit_test(test_protocol_errors),
                cmocka_unit_test(test_huge_length_is_too_large),
                cmocka_unit_test(test_too_large),
                cmocka_unit_test(test_zero_length),
                cmocka_unit_test(test_splits),
                cmocka_unit_test(test_direct),
                cmocka_unit_test(test_direct_splits),
                cmocka_unit_test(test_handler_stops),
                cmocka_unit_test(test_trim),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}

/* SPDX-License-Identifier: MIT */
/* The worker frame parsers on a byte stream: FrameReader fed all at once, fed in chunks, fed
 * through a pipe with frame_reader_fill(), and frame_read() on a pipe. All four must hand
 * out the same frames.
 *
 * Input: byte 0 sets max_frame (0xff: the default limit, else (n + 1) * 64), byte 1 the chunk
 * size of the chunked feed, the rest is the stream. The default limit is the rare choice: with
 * it a header alone makes frame_reader_fill() and frame_read() allocate up to 256 MiB, which
 * is slow under ASan. */
#include <fcntl.h>

#include "frame.h"
#include "fuzz-util.h"

#define MAX_FRAMES 64

typedef struct Seen {
        uint8_t kind[MAX_FRAMES];
        size_t size[MAX_FRAMES];
        uint32_t sum[MAX_FRAMES];
        size_t n;
        int error; /* the peek error that stopped it, 0 if none */
} Seen;

static uint32_t checksum(const uint8_t *p, size_t n) {
        uint32_t h = 2166136261u;

        for (size_t i = 0; i < n; i++)
                h = (h ^ p[i]) * 16777619u;
        return h;
}

static void record(Seen *s, uint8_t kind, const uint8_t *payload, size_t size, size_t max_frame) {
        CHECK(frame_kind_is_valid(kind));
        CHECK(size <= (max_frame ?: FRAME_DEFAULT_MAX));
        if (s->n < MAX_FRAMES) {
                s->kind[s->n] = kind;
                s->size[s->n] = size;
                s->sum[s->n] = checksum(payload, size);
        }
        s->n++;
}

static void check_equal(const Seen *a, const Seen *b) {
        CHECK(a->n == b->n);
        for (size_t i = 0; i < MIN(a->n, (size_t) MAX_FRAMES); i++) {
                CHECK(a->kind[i] == b->kind[i]);
                CHECK(a->size[i] == b->size[i]);
                CHECK(a->sum[i] == b->sum[i]);
        }
}

/* Take every complete frame out of the reader; returns 0 or the error that stopped it. */
static int drain(FrameReader *r, Seen *s) {
        for (;;) {
                const uint8_t *payload;
                size_t size;
                uint8_t kind;
                int k;

                k = frame_reader_peek(r, &kind, &payload, &size);
                if (k < 0) {
                        CHECK(k == -EBADMSG || k == -EMSGSIZE);
                        return k;
                }
                if (k == 0)
                        return 0;
                CHECK(payload >= buffer_data(&r->buf) && payload + size <= buffer_data(&r->buf) + r->buf.len);
                record(s, kind, payload, size, r->max_frame);
                frame_reader_consume(r);
        }
}

static void feed_whole(const uint8_t *d, size_t n, size_t max_frame, Seen *s) {
        FrameReader r = { .max_frame = max_frame };

        CHECK(buffer_append(&r.buf, d, n) == 0);
        s->error = drain(&r, s);
        frame_reader_done(&r);
}

static void feed_chunked(const uint8_t *d, size_t n, size_t max_frame, size_t chunk, Seen *s) {
        FrameReader r = { .max_frame = max_frame };

        for (size_t off = 0; off < n && s->error == 0; off += chunk) {
                CHECK(buffer_append(&r.buf, d + off, MIN(chunk, n - off)) == 0);
                s->error = drain(&r, s);
        }
        frame_reader_done(&r);
}

static void feed_pipe(const uint8_t *d, size_t n, size_t max_frame, Seen *s) {
        FrameReader r = { .max_frame = max_frame };
        int p[2];

        CHECK(pipe2(p, O_CLOEXEC | O_NONBLOCK) == 0);
        CHECK(loop_write(p[1], d, n) == 0); /* n fits in the pipe buffer, see below */
        safe_close(p[1]);

        for (;;) {
                ssize_t k = frame_reader_fill(&r, p[0]);

                CHECK(k >= 0); /* never -EAGAIN: all bytes are there, then EOF */
                s->error = drain(&r, s);
                if (k == 0 || s->error < 0)
                        break;
        }
        safe_close(p[0]);
        frame_reader_done(&r);
}

static void feed_frame_read(const uint8_t *d, size_t n, size_t max_frame, Seen *s) {
        int p[2];

        CHECK(pipe2(p, O_CLOEXEC) == 0);
        CHECK(loop_write(p[1], d, n) == 0);
        safe_close(p[1]);

        for (;;) {
                uint8_t kind, *payload = NULL;
                size_t size;
                int k;

                k = frame_read(p[0], max_frame, &kind, &payload, &size);
                if (k < 0) {
                        CHECK(k == -EPIPE || k == -EBADMSG || k == -EMSGSIZE);
                        CHECK(!payload);
                        break;
                }
                CHECK(payload[size] == 0);
                record(s, kind, payload, size, max_frame);
                free(payload);
        }
        safe_close(p[0]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        Seen whole = {}, chunked = {}, piped = {}, blocking = {};
        size_t max_frame, chunk;

        if (size < 2)
                return 0;
        max_frame = data[0] == 0xff ? 0 : ((size_t) data[0] + 1) * 64;
        chunk = (size_t) data[1] % 16 + 1;
        data += 2;
        size -= 2;
        /* Keep the stream within one pipe buffer so no writer thread is needed. */
        if (size > 60000)
                size = 60000;

        feed_whole(data, size, max_frame, &whole);
        feed_chunked(data, size, max_frame, chunk, &chunked);
        feed_pipe(data, size, max_frame, &piped);
        feed_frame_read(data, size, max_frame, &blocking);

        check_equal(&whole, &chunked);
        check_equal(&whole, &piped);
        /* frame_read() checks the kind before the length and does not wait for the payload to
         * check it, but it stops at the same frame. */
        check_equal(&whole, &blocking);
        CHECK(whole.error == chunked.error);
        CHECK(whole.error == piped.error);
        return 0;
}

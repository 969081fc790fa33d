/* SPDX-License-Identifier: MIT */
#include <sys/uio.h>

#include "frame.h"
#include "blob.h"

bool frame_kind_is_valid(uint8_t kind) {
        switch (kind) {
        case FRAME_CALL: case FRAME_IN: case FRAME_END_IN: case FRAME_CANCEL: case FRAME_SHUTDOWN: case FRAME_OUT_CREDIT:
        case FRAME_READY: case FRAME_RESULT: case FRAME_ITEM: case FRAME_END: case FRAME_ERROR: case FRAME_IN_TAKEN:
                return true;
        default:
                return false;
        }
}

bool frame_kind_is_terminal(uint8_t kind) {
        return kind == FRAME_RESULT || kind == FRAME_END || kind == FRAME_ERROR;
}

void frame_header_write(uint8_t out[FRAME_HEADER_SIZE], uint8_t kind, size_t payload_size) {
        uint32_t len = (uint32_t) payload_size + 1;

        out[0] = len & 0xff;
        out[1] = (len >> 8) & 0xff;
        out[2] = (len >> 16) & 0xff;
        out[3] = (len >> 24) & 0xff;
        out[4] = kind;
}

int frame_seal(uint8_t *frame, size_t frame_size, uint8_t kind) {
        if (frame_size < FRAME_HEADER_SIZE || frame_size - FRAME_HEADER_SIZE >= UINT32_MAX)
                return -EMSGSIZE;
        frame_header_write(frame, kind, frame_size - FRAME_HEADER_SIZE);
        return 0;
}

static size_t max_payload(const FrameReader *r) {
        return r->max_frame ?: FRAME_DEFAULT_MAX;
}

ssize_t frame_reader_fill(FrameReader *r, int fd) {
        size_t want = 64 * 1024;
        ssize_t k;
        int q;

        /* When a large frame is pending, size the read to the rest of it: fewer syscalls and
         * no repeated doubling copies. */
        if (r->buf.len >= 4) {
                const uint8_t *d = buffer_data(&r->buf);
                size_t total = FRAME_HEADER_SIZE - 1 +
                               ((size_t) d[0] | (size_t) d[1] << 8 | (size_t) d[2] << 16 | (size_t) d[3] << 24);
                if (total > r->buf.len && total - r->buf.len > want && total - 4 <= max_payload(r) + 1)
                        want = total - r->buf.len;
        }

        /* Room in front of the first frame lets frame_reader_take() hand the buffer out as a
         * blob whose data can carry a WebSocket header in place. */
        if (!r->buf.mem) {
                q = buffer_set_headroom(&r->buf, BLOB_HEADROOM);
                if (q < 0)
                        return q;
        }
        q = buffer_reserve(&r->buf, want);
        if (q < 0)
                return q;

        k = read(fd, buffer_data(&r->buf) + r->buf.len, want);
        if (k < 0)
                return errno == EINTR ? -EAGAIN : negative_errno();
        r->buf.len += (size_t) k;
        return k;
}

int frame_reader_peek(FrameReader *r, uint8_t *ret_kind, const uint8_t **ret_payload, size_t *ret_size) {
        const uint8_t *d = buffer_data(&r->buf);
        size_t len;

        if (r->buf.len < 4)
                return 0;
        len = (size_t) d[0] | (size_t) d[1] << 8 | (size_t) d[2] << 16 | (size_t) d[3] << 24;
        if (len == 0)
                return -EBADMSG;
        if (len - 1 > max_payload(r))
                return -EMSGSIZE;
        if (r->buf.len < 4 + len)
                return 0;
        if (!frame_kind_is_valid(d[4]))
                return -EBADMSG;

        *ret_kind = d[4];
        *ret_payload = d + FRAME_HEADER_SIZE;
        *ret_size = len - 1;
        return 1;
}

void frame_reader_consume(FrameReader *r) {
        const uint8_t *d = buffer_data(&r->buf);
        size_t len;

        if (r->taken) {
                r->taken = false; /* frame_reader_take() already removed it */
                return;
        }

        if (r->buf.len < 4)
                return;
        len = (size_t) d[0] | (size_t) d[1] << 8 | (size_t) d[2] << 16 | (size_t) d[3] << 24;
        buffer_consume(&r->buf, MIN(r->buf.len, 4 + len));
        /* Do not sit on a huge allocation after a big frame went through. */
        if (r->buf.len == 0 && r->buf.cap > 4 * 1024 * 1024)
                buffer_done(&r->buf);
}

/* Below this a copy is cheaper than a new reader buffer. */
#define FRAME_TAKE_STEAL_MIN (64u * 1024u)

int frame_reader_take(FrameReader *r, Blob **ret) {
        uint8_t *d = buffer_data(&r->buf);
        size_t len, total, rest;
        Buffer next = BUFFER_NULL;
        Blob *b;
        int q;

        if (r->buf.len < 4)
                return -ENODATA;
        len = (size_t) d[0] | (size_t) d[1] << 8 | (size_t) d[2] << 16 | (size_t) d[3] << 24;
        total = 4 + len;
        if (len == 0 || r->buf.len < total)
                return -ENODATA;

        if (len - 1 < FRAME_TAKE_STEAL_MIN || r->buf.headroom + FRAME_HEADER_SIZE < BLOB_HEADROOM) {
                b = blob_new_copy(d + FRAME_HEADER_SIZE, len - 1);
                if (!b)
                        return -ENOMEM;
                *ret = b;
                return 0;
        }

        /* Hand the whole allocation over; what was read past this frame moves to a new one. */
        rest = r->buf.len - total;
        q = buffer_set_headroom(&next, BLOB_HEADROOM);
        if (q >= 0)
                q = buffer_append(&next, d + total, rest);
        if (q < 0) {
                buffer_done(&next);
                return q;
        }
        b = blob_new_take(r->buf.mem, d + FRAME_HEADER_SIZE, len - 1);
        if (!b) {
                buffer_done(&next);
                return -ENOMEM;
        }
        r->buf = next;
        r->taken = true;
        *ret = b;
        return 0;
}

void frame_reader_done(FrameReader *r) {
        buffer_done(&r->buf);
}

int frame_write(int fd, uint8_t kind, const void *payload, size_t size) {
        uint8_t hdr[FRAME_HEADER_SIZE];
        struct iovec iov[2];
        size_t total, done = 0;

        if (size >= UINT32_MAX)
                return -EMSGSIZE;
        frame_header_write(hdr, kind, size);
        total = FRAME_HEADER_SIZE + size;

        while (done < total) {
                int n = 0;
                if (done < FRAME_HEADER_SIZE) {
                        iov[n++] = (struct iovec) { hdr + done, FRAME_HEADER_SIZE - done };
                        if (size > 0)
                                iov[n++] = (struct iovec) { (void *) payload, size };
                } else
                        iov[n++] = (struct iovec) { (uint8_t *) payload + (done - FRAME_HEADER_SIZE), total - done };

                ssize_t k = writev(fd, iov, n);
                if (k < 0) {
                        if (errno == EINTR)
                                continue;
                        return negative_errno();
                }
                done += (size_t) k;
        }
        return 0;
}

int frame_read(int fd, size_t max_frame, uint8_t *ret_kind, uint8_t **ret_payload, size_t *ret_size) {
        uint8_t hdr[FRAME_HEADER_SIZE];
        _cleanup_free_ uint8_t *p = NULL;
        size_t len;
        int r;

        r = loop_read_exact(fd, hdr, sizeof(hdr));
        if (r < 0)
                return r;
        len = (size_t) hdr[0] | (size_t) hdr[1] << 8 | (size_t) hdr[2] << 16 | (size_t) hdr[3] << 24;
        if (len == 0 || !frame_kind_is_valid(hdr[4]))
                return -EBADMSG;
        if (len - 1 > (max_frame ?: FRAME_DEFAULT_MAX))
                return -EMSGSIZE;

        p = malloc(len); /* len - 1 payload bytes plus a spare NUL */
        if (!p)
                return -ENOMEM;
        r = loop_read_exact(fd, p, len - 1);
        if (r < 0)
                return r;
        p[len - 1] = 0;

        *ret_kind = hdr[4];
        *ret_size = len - 1;
        *ret_payload = TAKE_PTR(p);
        return 0;
}

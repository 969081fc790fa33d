/* SPDX-License-Identifier: MIT */
#include "fs-line-reader.h"
#include "macro.h"

int fs_line_reader_init(FsLineReader *r, int fd, size_t buffer_size) {
        *r = (FsLineReader) { .fd = fd, .size = buffer_size ?: FS_LINE_READER_BUFFER_SIZE };
        r->buf = malloc(r->size);
        return r->buf ? 0 : -ENOMEM;
}

void fs_line_reader_done(FsLineReader *r) {
        free(r->buf);
        *r = (FsLineReader) { .fd = -EBADF };
}

/* Refill an exhausted buffer. Returns bytes now available, 0 at EOF, or a negative errno. */
static ssize_t fill(FsLineReader *r) {
        ssize_t k;

        if (r->start < r->end)
                return (ssize_t) (r->end - r->start);
        r->start = r->end = 0;
        if (r->eof)
                return 0;
        do
                k = read(r->fd, r->buf, r->size);
        while (k < 0 && errno == EINTR);
        if (k < 0)
                return negative_errno();
        if (k == 0)
                r->eof = true;
        r->end = (size_t) k;
        return k;
}

/* Index of the first '\r' or '\n' in p[0..n), or n. */
static size_t find_eol(const uint8_t *p, size_t n) {
        const uint8_t *nl = memchr(p, '\n', n);
        size_t lim = nl ? (size_t) (nl - p) : n;
        const uint8_t *cr = memchr(p, '\r', lim);

        return cr ? (size_t) (cr - p) : lim;
}

int fs_line_reader_next(FsLineReader *r, Buffer *line, size_t keep, uint64_t *ret_len) {
        uint64_t total = 0;
        bool any = false;
        ssize_t k;
        int q;

        if (line)
                buffer_clear(line);

        for (;;) {
                k = fill(r);
                if (k < 0)
                        return (int) k;
                if (k == 0)
                        break; /* EOF: the last line has no terminator */

                const uint8_t *p = r->buf + r->start;
                size_t n = r->end - r->start;
                size_t eol = find_eol(p, n);

                any = true;
                if (line && line->len < keep) {
                        q = buffer_append(line, p, MIN(eol, keep - line->len));
                        if (q < 0)
                                return q;
                }
                total += eol;
                r->start += eol;
                if (eol == n)
                        continue;

                uint8_t c = r->buf[r->start++];
                if (c == '\r') {
                        /* "\r\n" is one terminator, even when the buffer ends between them. */
                        k = fill(r);
                        if (k < 0)
                                return (int) k;
                        if (k > 0 && r->buf[r->start] == '\n')
                                r->start++;
                }
                break;
        }

        if (!any)
                return 0;
        if (ret_len)
                *ret_len = total;
        return 1;
}

int fs_line_reader_at_eof(FsLineReader *r) {
        ssize_t k = fill(r);

        if (k < 0)
                return (int) k;
        return k == 0;
}

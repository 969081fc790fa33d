/* SPDX-License-Identifier: MIT */
/* fs.read: a page of numbered lines (deepagents 0.7 semantics), or a small binary file. */
#include <inttypes.h>
#include <sys/stat.h>

#include "fs-line-reader.h"
#include "fs-ops.h"
#include "fs-path.h"
#include "fs-utf8.h"
#include "macro.h"

void fs_read_result_done(FsReadResult *r) {
        fs_status_done(&r->status);
        free(r->data);
        *r = (FsReadResult) {};
}

static ssize_t pread_full(int fd, void *buf, size_t n, off_t offset) {
        size_t done = 0;

        while (done < n) {
                ssize_t k = pread(fd, (uint8_t *) buf + done, n - done, offset + (off_t) done);
                if (k < 0) {
                        if (errno == EINTR)
                                continue;
                        return negative_errno();
                }
                if (k == 0)
                        break;
                done += (size_t) k;
        }
        return (ssize_t) done;
}

static int read_binary(int fd, const char *path, FsReadResult *res) {
        _cleanup_free_ uint8_t *buf = NULL;
        ssize_t k;

        /* One byte more than allowed tells a file that grew past the cap since fstat(). */
        buf = malloc(FS_READ_MAX_BINARY_BYTES + 1);
        if (!buf)
                return -ENOMEM;
        k = pread_full(fd, buf, FS_READ_MAX_BINARY_BYTES + 1, 0);
        if (k < 0)
                return fs_status_from_errno(&res->status, (int) k, path, FS_SUBJECT_FILE);
        if ((size_t) k > FS_READ_MAX_BINARY_BYTES)
                return fs_status_set(&res->status, FS_ERROR_TOO_LARGE,
                                     "Binary file exceeds maximum preview size of %u bytes",
                                     FS_READ_MAX_BINARY_BYTES);
        res->binary = true;
        res->size = (size_t) k;
        res->data = TAKE_PTR(buf);
        return 0;
}

/* Render one line as rows "%6d\t<chunk>" of at most FS_READ_MAX_LINE_LENGTH characters;
 * continuation rows are marked "N.1", "N.2", … like deepagents' formatter. `text` is
 * valid UTF-8. */
static int render_line(Buffer *out, uint64_t lineno, const uint8_t *text, size_t len, bool first_in_page) {
        size_t i = 0, chunk = 0;
        int r;

        do {
                size_t start = i, chars = 0;

                while (i < len && chars < FS_READ_MAX_LINE_LENGTH) {
                        int k = fs_utf8_sequence_length(text + i, len - i);
                        i += k > 0 ? (size_t) k : 1;
                        chars++;
                }

                if (!(first_in_page && chunk == 0)) {
                        r = buffer_append_byte(out, '\n');
                        if (r < 0)
                                return r;
                }
                if (chunk == 0)
                        r = buffer_printf(out, "%6" PRIu64 "\t", lineno);
                else {
                        char marker[48];
                        snprintf(marker, sizeof(marker), "%" PRIu64 ".%zu", lineno, chunk);
                        r = buffer_printf(out, "%6s\t", marker);
                }
                if (r < 0)
                        return r;
                r = buffer_append(out, text + start, i - start);
                if (r < 0)
                        return r;
                chunk++;
        } while (i < len);

        return 0;
}

/* Skipping to a far offset reads the file up to there: check now and then whether the
 * caller still wants the answer. */
#define CANCEL_CHECK_LINES 65536u

typedef struct ReadCancel {
        FsCancelled cancelled;
        void *userdata;
} ReadCancel;

static bool read_cancelled(const ReadCancel *c, uint64_t line) {
        return c->cancelled && line % CANCEL_CHECK_LINES == 0 && c->cancelled(c->userdata);
}

static int read_text(int fd, const struct stat *st, const char *path, int64_t offset, int64_t limit,
                     const ReadCancel *cancel, FsReadResult *res) {
        _cleanup_buffer_ Buffer page = BUFFER_NULL, raw = BUFFER_NULL, clean = BUFFER_NULL, piece = BUFFER_NULL;
        _cleanup_(fs_line_reader_done) FsLineReader reader = { .fd = -EBADF };
        uint64_t line_count = 0, returned = 0;
        bool truncated = false, at_eof = false;
        int64_t total_lines;
        int r;

        r = fs_line_reader_init(&reader, fd, 0);
        if (r < 0)
                return r;

        /* Skip to the requested line without keeping anything. */
        while (line_count < (uint64_t) offset) {
                r = fs_line_reader_next(&reader, NULL, 0, NULL);
                if (r < 0)
                        return fs_status_from_errno(&res->status, r, path, FS_SUBJECT_FILE);
                if (r == 0) {
                        at_eof = true;
                        break;
                }
                line_count++;
                if (read_cancelled(cancel, line_count))
                        return fs_status_set(&res->status, FS_ERROR_IO, "Error: Reading '%s' was cancelled", path);
        }

        /* The page always starts with an empty buffer, so data is non-NULL even for "". */
        r = buffer_reserve(&page, 0);
        if (r < 0)
                return r;

        while (!at_eof && returned < (uint64_t) limit) {
                /* Keeping a little more than the page cap is enough to know a line overflows it. */
                r = fs_line_reader_next(&reader, &raw, FS_READ_MAX_OUTPUT_BYTES + 1, NULL);
                if (r < 0)
                        return fs_status_from_errno(&res->status, r, path, FS_SUBJECT_FILE);
                if (r == 0) {
                        at_eof = true;
                        break;
                }
                line_count++;

                buffer_clear(&clean);
                r = fs_utf8_append_sanitized(&clean, buffer_data(&raw), raw.len);
                if (r < 0)
                        return r;
                buffer_clear(&piece);
                r = render_line(&piece, line_count, buffer_data(&clean), clean.len, returned == 0);
                if (r < 0)
                        return r;

                if (page.len + piece.len > FS_READ_MAX_OUTPUT_BYTES) {
                        /* Keep what fits of the line; it is not counted as returned, so the
                         * next page starts with it again. */
                        size_t room = FS_READ_MAX_OUTPUT_BYTES - page.len;
                        r = buffer_append(&page, buffer_data(&piece), fs_utf8_cut(buffer_data(&piece), room));
                        if (r < 0)
                                return r;
                        truncated = true;
                        break;
                }
                r = buffer_append(&page, buffer_data(&piece), piece.len);
                if (r < 0)
                        return r;
                returned++;
        }

        if (returned == 0 && !truncated)
                return fs_status_set(&res->status, FS_ERROR_INVALID_OFFSET,
                                     "Line offset %" PRIi64 " exceeds file length (%" PRIu64 " lines)",
                                     offset, line_count);

        if (!at_eof) {
                r = fs_line_reader_at_eof(&reader);
                if (r < 0)
                        return fs_status_from_errno(&res->status, r, path, FS_SUBJECT_FILE);
                at_eof = r > 0;
        }

        if (at_eof)
                total_lines = (int64_t) line_count;
        else if (st->st_size <= (off_t) FS_READ_MAX_LINE_COUNT_BYTES) {
                /* Small enough to count the rest too. */
                for (;;) {
                        r = fs_line_reader_next(&reader, NULL, 0, NULL);
                        if (r < 0)
                                return fs_status_from_errno(&res->status, r, path, FS_SUBJECT_FILE);
                        if (r == 0)
                                break;
                        line_count++;
                }
                total_lines = (int64_t) line_count;
        } else
                total_lines = -1;

        /* A first line longer than the page still advances the offset, or a caller paging
         * through the file would loop on it forever. */
        if (truncated && returned == 0)
                returned = 1;

        int64_t end_line = offset + (int64_t) returned;
        res->start_line = offset + 1;
        res->end_line = end_line;
        res->total_lines = total_lines;
        res->next_offset = total_lines >= 0 && end_line >= total_lines ? -1 : end_line;
        res->truncated = truncated;
        if (truncated) {
                r = fs_status_set(&res->status, FS_OK,
                                  "Output was truncated at %u bytes. Continue reading with offset=%" PRIi64
                                  " or a smaller limit to see the rest of the file.",
                                  FS_READ_MAX_OUTPUT_BYTES, end_line);
                if (r < 0)
                        return r;
        }
        res->data = buffer_steal(&page, &res->size);
        return res->data ? 0 : -ENOMEM;
}

int fs_read_full(const char *path, int64_t offset, int64_t limit, FsCancelled cancelled, void *userdata,
                 FsReadResult *ret) {
        const ReadCancel cancel = { .cancelled = cancelled, .userdata = userdata };
        _cleanup_(fs_read_result_done) FsReadResult res = { .total_lines = -1, .next_offset = -1 };
        _cleanup_close_ int fd = -EBADF;
        uint8_t sniff[FS_READ_SNIFF_BYTES];
        struct stat st;
        ssize_t k;
        int r;

        r = fs_open_regular(path, &fd, &st, &res.status);
        if (r < 0)
                return r;
        if (!fs_status_ok(&res.status))
                goto done;

        /* Decide on the bytes, not on st_size: files in /proc and /sys report 0. */
        k = pread_full(fd, sniff, sizeof(sniff), 0);
        if (k < 0) {
                r = fs_status_from_errno(&res.status, (int) k, path, FS_SUBJECT_FILE);
                if (r < 0)
                        return r;
                goto done;
        }
        if (k == 0) {
                res.data = (uint8_t *) strdup("");
                if (!res.data)
                        return -ENOMEM;
                res.total_lines = 0;
                r = fs_status_set(&res.status, FS_OK, FS_READ_EMPTY_MESSAGE);
                if (r < 0)
                        return r;
                goto done;
        }

        /* A multi-byte character cut by the end of the sample is fine unless the file ends there. */
        if (!fs_utf8_is_valid(sniff, (size_t) k, (size_t) k < sizeof(sniff))) {
                r = read_binary(fd, path, &res);
                if (r < 0)
                        return r;
                goto done;
        }

        if (limit <= 0) {
                res.data = (uint8_t *) strdup("");
                if (!res.data)
                        return -ENOMEM;
                res.no_lines_requested = true;
                goto done;
        }

        r = read_text(fd, &st, path, MAX(offset, (int64_t) 0), limit, &cancel, &res);
        if (r < 0)
                return r;

done:
        *ret = res;
        res = (FsReadResult) {};
        return 0;
}

int fs_read(const char *path, int64_t offset, int64_t limit, FsReadResult *ret) {
        return fs_read_full(path, offset, limit, NULL, NULL, ret);
}

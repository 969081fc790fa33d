/* SPDX-License-Identifier: MIT */
/* fs.edit: replace a string in a text file (deepagents 0.7 semantics, CRLF-aware as in
 * deepagents #2880), rewriting the file atomically by streaming the unchanged parts and
 * the replacements into the new file — the result is never assembled in memory. */
#include <inttypes.h>
#include <sys/stat.h>

#include "buffer.h"
#include "fs-ops.h"
#include "fs-path.h"
#include "fs-utf8.h"
#include "macro.h"

/* Strings echoed in messages are cut here, so a huge old_string cannot bloat the result. */
#define ECHO_MAX 1024u

void fs_edit_result_done(FsEditResult *r) {
        fs_status_done(&r->status);
        *r = (FsEditResult) {};
}

static int read_all(int fd, const struct stat *st, uint8_t **ret, size_t *ret_size) {
        _cleanup_free_ uint8_t *buf = NULL;
        size_t cap = (size_t) st->st_size + 1, len = 0;

        buf = malloc(cap);
        if (!buf)
                return -ENOMEM;
        for (;;) {
                if (len == cap) {
                        /* The file grew since fstat(). */
                        if (cap > FS_EDIT_MAX_FILE_BYTES)
                                return -EFBIG;
                        size_t ncap = MIN(cap * 2, (size_t) FS_EDIT_MAX_FILE_BYTES + 1);
                        uint8_t *n = realloc(buf, ncap);
                        if (!n)
                                return -ENOMEM;
                        buf = n;
                        cap = ncap;
                }
                ssize_t k = read(fd, buf + len, cap - len);
                if (k < 0) {
                        if (errno == EINTR)
                                continue;
                        return negative_errno();
                }
                if (k == 0)
                        break;
                len += (size_t) k;
        }
        *ret = TAKE_PTR(buf);
        *ret_size = len;
        return 0;
}

static size_t count_occurrences(const uint8_t *text, size_t len, const uint8_t *s, size_t n) {
        const uint8_t *p = text, *end = text + len;
        size_t count = 0;

        /* Non-overlapping, left to right, like Python's str.count(). */
        while ((size_t) (end - p) >= n) {
                const uint8_t *q = memmem(p, (size_t) (end - p), s, n);
                if (!q)
                        break;
                count++;
                p = q + n;
        }
        return count;
}

/* s with every "\r\n" turned into "\n", and then, if to_crlf, every "\n" into "\r\n". */
static int line_ending_variant(const uint8_t *s, size_t n, bool to_crlf, Buffer *out) {
        int r;

        buffer_clear(out);
        r = buffer_reserve(out, 0);
        if (r < 0)
                return r;
        for (size_t i = 0; i < n; i++) {
                if (s[i] == '\r' && i + 1 < n && s[i + 1] == '\n')
                        continue; /* the '\n' that follows is emitted next */
                if (s[i] == '\n' && to_crlf) {
                        r = buffer_append_byte(out, '\r');
                        if (r < 0)
                                return r;
                }
                r = buffer_append_byte(out, s[i]);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* Write through a buffer: replacements can be many and tiny. */
typedef struct EditWriter {
        const uint8_t *text;
        size_t text_len;
        const uint8_t *old;
        size_t old_len;
        const uint8_t *new;
        size_t new_len;
        bool replace_all;
        Buffer out;
} EditWriter;

static int emit(EditWriter *w, int fd, const void *p, size_t n) {
        int r;

        /* Flush before a big piece too, or it would overtake what is buffered. */
        if (w->out.len > 0 && (n >= 64 * 1024 || w->out.len + n > 256 * 1024)) {
                r = loop_write(fd, buffer_data(&w->out), w->out.len);
                if (r < 0)
                        return r;
                buffer_clear(&w->out);
        }
        if (n >= 64 * 1024)
                return loop_write(fd, p, n);
        return buffer_append(&w->out, p, n);
}

static int write_edited(int fd, void *userdata) {
        EditWriter *w = userdata;
        const uint8_t *p = w->text, *end = w->text + w->text_len;
        int r;

        buffer_clear(&w->out);
        for (;;) {
                const uint8_t *q = memmem(p, (size_t) (end - p), w->old, w->old_len);
                if (!q)
                        break;
                r = emit(w, fd, p, (size_t) (q - p));
                if (r < 0)
                        return r;
                r = emit(w, fd, w->new, w->new_len);
                if (r < 0)
                        return r;
                p = q + w->old_len;
                if (!w->replace_all)
                        break;
        }
        r = emit(w, fd, p, (size_t) (end - p));
        if (r < 0)
                return r;
        return loop_write(fd, buffer_data(&w->out), w->out.len);
}

static int echo_len(const void *s, size_t n) {
        return (int) (n <= ECHO_MAX ? n : fs_utf8_cut(s, ECHO_MAX));
}

static int edit_impl(const char *path, const uint8_t *old, size_t old_len, const uint8_t *new, size_t new_len,
                     bool replace_all, FsEditResult *res) {
        _cleanup_buffer_ Buffer old_crlf = BUFFER_NULL, new_crlf = BUFFER_NULL, old_lf = BUFFER_NULL,
                                new_lf = BUFFER_NULL;
        _cleanup_free_ uint8_t *text = NULL;
        _cleanup_close_ int fd = -EBADF;
        size_t text_len, count = 0;
        struct stat st;
        int r;

        r = fs_open_regular(path, &fd, &st, &res->status);
        if (r < 0 || !fs_status_ok(&res->status))
                return r;
        if (old_len == 0)
                return fs_status_set(&res->status, FS_ERROR_STRING_NOT_FOUND, "Error: old_string must not be empty");
        if (st.st_size > (off_t) FS_EDIT_MAX_FILE_BYTES)
                return fs_status_set(&res->status, FS_ERROR_TOO_LARGE,
                                     "Error: File '%s' is too large to edit (more than %u bytes)", path,
                                     FS_EDIT_MAX_FILE_BYTES);

        r = read_all(fd, &st, &text, &text_len);
        if (r == -ENOMEM)
                return r;
        if (r < 0)
                return fs_status_from_errno(&res->status, r, path, FS_SUBJECT_FILE);
        fd = safe_close(fd);

        if (!fs_utf8_is_valid(text, text_len, true))
                return fs_status_set(&res->status, FS_ERROR_NOT_A_TEXT_FILE, "Error: File '%s' is not a text file", path);

        /* Try old as sent, then with CRLF line endings, then with LF; the first that occurs
         * tells the file's line-ending style there, and new gets the same treatment. */
        r = line_ending_variant(old, old_len, true, &old_crlf);
        if (r >= 0)
                r = line_ending_variant(new, new_len, true, &new_crlf);
        if (r >= 0)
                r = line_ending_variant(old, old_len, false, &old_lf);
        if (r >= 0)
                r = line_ending_variant(new, new_len, false, &new_lf);
        if (r < 0)
                return r;

        const struct {
                const uint8_t *old, *new;
                size_t old_len, new_len;
        } candidates[] = {
                { old, new, old_len, new_len },
                { buffer_data(&old_crlf), buffer_data(&new_crlf), old_crlf.len, new_crlf.len },
                { buffer_data(&old_lf), buffer_data(&new_lf), old_lf.len, new_lf.len },
        };
        size_t chosen = 0;
        for (size_t i = 0; i < ELEMENTSOF(candidates); i++) {
                if (candidates[i].old_len == 0)
                        continue;
                count = count_occurrences(text, text_len, candidates[i].old, candidates[i].old_len);
                if (count > 0) {
                        chosen = i;
                        break;
                }
        }

        if (count == 0)
                return fs_status_set(&res->status, FS_ERROR_STRING_NOT_FOUND, "Error: String not found in file: '%.*s'",
                                     echo_len(old, old_len), (const char *) old);
        if (count > 1 && !replace_all)
                return fs_status_set(&res->status, FS_ERROR_MULTIPLE_OCCURRENCES,
                                     "Error: String '%.*s' appears %zu times in file. Use replace_all=True to "
                                     "replace all instances, or provide a more specific string with surrounding "
                                     "context.",
                                     echo_len(old, old_len), (const char *) old, count);

        EditWriter w = {
                .text = text,
                .text_len = text_len,
                .old = candidates[chosen].old,
                .old_len = candidates[chosen].old_len,
                .new = candidates[chosen].new,
                .new_len = candidates[chosen].new_len,
                .replace_all = replace_all,
        };
        fs_status_done(&res->status);
        r = fs_write_atomic(path, /* overwrite= */ true, write_edited, &w, &res->status);
        buffer_done(&w.out);
        if (r < 0)
                return r;
        if (fs_status_ok(&res->status))
                res->occurrences = replace_all ? count : 1;
        return 0;
}

int fs_edit(const char *path, const void *old, size_t old_len, const void *new, size_t new_len, bool replace_all,
            FsEditResult *ret) {
        _cleanup_(fs_edit_result_done) FsEditResult res = {};
        int r;

        r = edit_impl(path, old, old_len, new, new_len, replace_all, &res);
        if (r < 0)
                return r;
        if (res.status.error == FS_ERROR_PERMISSION_DENIED) {
                r = fs_status_set(&res.status, FS_ERROR_PERMISSION_DENIED, "Error: Permission denied editing file '%s'",
                                  path);
                if (r < 0)
                        return r;
        }
        *ret = res;
        res = (FsEditResult) {};
        return 0;
}

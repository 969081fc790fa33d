/* SPDX-License-Identifier: MIT */
/* fs.grep: literal (never regex) search, like `grep -rnF`: files are read in large chunks,
 * searched with memmem() over whole chunks, and lines are only counted up to each match,
 * so the cost per byte stays close to memmem()'s. Bounded by max_count, a total output
 * size, a deadline and cancellation; each ends the search with truncated=true. */
#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>

#include "fs-ops.h"
#include "fs-path.h"
#include "fs-pattern.h"
#include "fs-search.h"
#include "fs-utf8.h"
#include "fs-walk.h"
#include "macro.h"

#define GREP_BUFFER_SIZE (256u * 1024u)
/* A line longer than this is searched in windows; only its head is kept for the text. */
#define GREP_MAX_LINE_BUFFER (4u * 1024u * 1024u)
/* How much to read between deadline checks within one file. */
#define GREP_CHECK_BYTES (8u * 1024u * 1024u)

void fs_grep_result_done(FsGrepResult *r) {
        fs_status_done(&r->status);
        free(r->strings);
        free(r->matches);
        *r = (FsGrepResult) {};
}

typedef struct GrepWalk {
        FsWalk walk;
        const FsGrepOptions *opts;
        FsPattern *glob;          /* NULL: every file */
        Buffer strings;
        FsGrepMatch *matches;
        size_t n_matches, cap;
        uint64_t max_matches;
        bool capped;              /* max_count or the output budget was hit */
        size_t file_path;         /* offset of the current file's path in strings, SIZE_MAX: not added */
        FsSearch search;
        uint8_t *buf;
        size_t buf_size;
        Buffer head;              /* the start of an overlong line */
} GrepWalk;

/* Number of '\n' in p[0..n). Eight bytes at a time, with per-byte counters in a word
 * (no popcount: without -mpopcnt that is a library call), summed every 255 words before
 * a byte counter could overflow. Line counting touches every byte grep reads, so this is
 * what bounds its speed on files without matches. */
static uint64_t count_newlines(const uint8_t *p, size_t n) {
        const uint64_t ones = UINT64_C(0x0101010101010101), highs = UINT64_C(0x8080808080808080);
        const uint64_t newlines = ones * '\n', lanes = UINT64_C(0x00ff00ff00ff00ff);
        uint64_t count = 0;
        size_t i = 0;

        while (n - i >= 8) {
                size_t words = MIN((n - i) / 8, (size_t) 255);
                uint64_t acc = 0;

                for (size_t k = 0; k < words; k++, i += 8) {
                        uint64_t w;
                        memcpy(&w, p + i, 8);
                        w ^= newlines;
                        /* high bit of each byte: set when the byte is non-zero (exact) */
                        uint64_t t = ((w & ~highs) + ~highs) | w;
                        acc += (~t & highs) >> 7;
                }
                /* bytes → 16-bit lanes → one sum */
                acc = (acc & lanes) + ((acc >> 8) & lanes);
                count += (acc * UINT64_C(0x0001000100010001)) >> 48;
        }
        for (; i < n; i++)
                count += p[i] == '\n';
        return count;
}

static int add_match(GrepWalk *g, uint64_t line, const uint8_t *text, size_t len) {
        int r;

        if (g->n_matches >= g->max_matches || g->strings.len >= FS_GREP_MAX_OUTPUT_BYTES) {
                g->capped = true;
                fs_walk_stop(&g->walk);
                return 0;
        }

        if (g->file_path == SIZE_MAX) {
                const char *path = (const char *) buffer_data(&g->walk.path);
                g->file_path = g->strings.len;
                r = buffer_append(&g->strings, path, strlen(path) + 1);
                if (r < 0)
                        return r;
        }

        if (len > 0 && text[len - 1] == '\r')
                len--;
        if (len > FS_GREP_MAX_TEXT_BYTES)
                len = FS_GREP_MAX_TEXT_BYTES;

        if (g->n_matches == g->cap) {
                size_t ncap = MAX(g->cap * 2, (size_t) 64);
                FsGrepMatch *n = reallocarray(g->matches, ncap, sizeof(FsGrepMatch));
                if (!n)
                        return -ENOMEM;
                g->matches = n;
                g->cap = ncap;
        }

        size_t text_off = g->strings.len;
        r = fs_utf8_append_sanitized(&g->strings, text, len);
        if (r < 0)
                return r;
        /* Cutting at FS_GREP_MAX_TEXT_BYTES may have split a character: drop its remains. */
        size_t text_len = g->strings.len - text_off;
        text_len = fs_utf8_cut(buffer_data(&g->strings) + text_off, text_len);
        g->strings.len = text_off + text_len;
        r = buffer_append_byte(&g->strings, 0);
        if (r < 0)
                return r;

        g->matches[g->n_matches++] = (FsGrepMatch) {
                .path = g->file_path,
                .line = line,
                .text = text_off,
                .text_len = text_len,
        };
        return 0;
}

static ssize_t read_some(int fd, uint8_t *p, size_t n) {
        ssize_t k;

        do
                k = read(fd, p, n);
        while (k < 0 && errno == EINTR);
        return k < 0 ? negative_errno() : k;
}

/* Search the lines of buf[0..end), which starts at a line start, with `lines` lines before
 * it. Returns 0 and the number of lines in the region via *ret_lines, or a negative errno. */
static int search_region(GrepWalk *g, const uint8_t *buf, size_t end, uint64_t lines, uint64_t *ret_lines) {
        const uint8_t *p = buf, *counted = buf, *stop = buf + end;
        int r;

        while (p < stop && !g->walk.stopped) {
                const uint8_t *q = fs_search_find(&g->search, p, stop);
                if (!q)
                        break;

                const uint8_t *line_start = q > counted ? memrchr(counted, '\n', (size_t) (q - counted)) : NULL;
                line_start = line_start ? line_start + 1 : counted;
                lines += count_newlines(counted, (size_t) (line_start - counted));

                const uint8_t *line_end = memchr(q, '\n', (size_t) (stop - q));
                if (!line_end)
                        line_end = stop;

                r = add_match(g, lines + 1, line_start, (size_t) (line_end - line_start));
                if (r < 0)
                        return r;

                counted = line_end < stop ? line_end + 1 : stop;
                lines += line_end < stop;
                p = counted;
        }

        lines += count_newlines(counted, (size_t) (stop - counted));
        *ret_lines = lines;
        return 0;
}

/* A line that does not fit GREP_MAX_LINE_BUFFER: keep its head for the text, search the
 * rest in windows that overlap by pattern_len - 1 bytes, until its end. On return the
 * buffer holds what followed the line (*len bytes). */
static int search_long_line(GrepWalk *g, int fd, size_t *len, uint64_t *lines, bool *eof) {
        size_t plen = g->opts->pattern_len, keep = plen > 0 ? plen - 1 : 0;
        uint8_t *buf = g->buf;
        bool matched = false;
        int r;

        buffer_clear(&g->head);
        r = buffer_append(&g->head, buf, MIN(*len, (size_t) FS_GREP_MAX_TEXT_BYTES));
        if (r < 0)
                return r;

        for (;;) {
                const uint8_t *nl = memchr(buf, '\n', *len);
                size_t search_end = nl ? (size_t) (nl - buf) : *len;

                if (!matched && fs_search_find(&g->search, buf, buf + search_end))
                        matched = true;

                if (nl) {
                        if (matched) {
                                r = add_match(g, *lines + 1, buffer_data(&g->head), g->head.len);
                                if (r < 0)
                                        return r;
                        }
                        (*lines)++;
                        size_t rest = *len - search_end - 1;
                        memmove(buf, nl + 1, rest);
                        *len = rest;
                        return 0;
                }
                if (*eof) {
                        *len = 0; /* the line was the rest of the file */
                        if (matched)
                                return add_match(g, *lines + 1, buffer_data(&g->head), g->head.len);
                        return 0;
                }

                /* Carry the tail a match could start in, then read on. */
                size_t carry = MIN(keep, *len);
                memmove(buf, buf + *len - carry, carry);
                *len = carry;

                ssize_t k = read_some(fd, buf + *len, g->buf_size - *len);
                if (k < 0)
                        return (int) k;
                if (k == 0)
                        *eof = true;
                *len += (size_t) k;
                if (fs_walk_should_stop(&g->walk))
                        return 0;
        }
}

static int grep_fd(GrepWalk *g, int fd) {
        size_t len = 0, since_check = 0;
        uint64_t lines = 0;
        bool eof = false, first = true;
        int r;

        g->file_path = SIZE_MAX;
        /* Per file: whether the prefilter pays off depends on the file's text. */
        fs_search_init(&g->search, g->opts->pattern, g->opts->pattern_len);
        if (g->opts->pattern_len > 0 && memchr(g->opts->pattern, '\n', g->opts->pattern_len))
                return 0; /* a line never contains a newline */

        (void) posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);

        while (!eof) {
                if (len == g->buf_size) {
                        /* One line fills the buffer: grow it, up to a point. */
                        if (g->buf_size >= GREP_MAX_LINE_BUFFER) {
                                r = search_long_line(g, fd, &len, &lines, &eof);
                                if (r < 0 || g->walk.stopped)
                                        return r;
                                if (eof) /* what followed the long line is all there is */
                                        return search_region(g, g->buf, len, lines, &lines);
                                continue;
                        }
                        uint8_t *n = realloc(g->buf, g->buf_size * 2);
                        if (!n)
                                return -ENOMEM;
                        g->buf = n;
                        g->buf_size *= 2;
                }

                ssize_t k = read_some(fd, g->buf + len, g->buf_size - len);
                if (k < 0)
                        return 0; /* unreadable midway (EIO): keep what was found, like grep */
                if (k == 0)
                        eof = true;

                if (first) {
                        /* Binary files are skipped, as grep -I would. */
                        if (memchr(g->buf, 0, MIN((size_t) k, (size_t) FS_GREP_BINARY_SNIFF)))
                                return 0;
                        first = false;
                }
                len += (size_t) k;

                size_t end;
                if (eof)
                        end = len;
                else {
                        const uint8_t *last_nl = memrchr(g->buf, '\n', len);
                        if (!last_nl)
                                continue; /* no complete line yet */
                        end = (size_t) (last_nl - g->buf) + 1;
                }

                r = search_region(g, g->buf, end, lines, &lines);
                if (r < 0 || g->walk.stopped)
                        return r;
                memmove(g->buf, g->buf + end, len - end);
                len -= end;

                since_check += (size_t) k;
                if (since_check >= GREP_CHECK_BYTES) {
                        since_check = 0;
                        if (fs_walk_should_stop(&g->walk))
                                return 0;
                }
        }
        return 0;
}

static int grep_on_directory(FsWalk *w, int dir_fd, const char *name, void *parent_ctx, void **ret_child_ctx) {
        GrepWalk *g = (GrepWalk *) w;
        FsPatternStates *child;
        int r;

        if (!g->glob)
                return 1;

        child = malloc(sizeof(FsPatternStates));
        if (!child)
                return -ENOMEM;
        r = fs_pattern_states_advance(g->glob, parent_ctx, name, child);
        if (r < 0 || !fs_pattern_states_alive(g->glob, child)) {
                fs_pattern_states_done(child);
                free(child);
                return r < 0 ? r : 0;
        }
        *ret_child_ctx = child;
        return 1;
}

static void grep_free_ctx(void *ctx) {
        if (!ctx)
                return;
        fs_pattern_states_done(ctx);
        free(ctx);
}

static int grep_on_file(FsWalk *w, int dir_fd, const char *name, unsigned char type, void *dir_ctx) {
        GrepWalk *g = (GrepWalk *) w;
        _cleanup_close_ int fd = -EBADF;
        struct stat st;

        /* Like grep -r: links found while recursing are not followed. */
        if (type != DT_REG)
                return 0;
        if (g->glob && !fs_pattern_states_match_file(g->glob, dir_ctx, name))
                return 0;

        fd = openat(dir_fd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
        if (fd < 0) {
                w->incomplete = true;
                return 0;
        }
        if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
                return 0;
        return grep_fd(g, fd);
}

static int grep_impl(const FsGrepOptions *opts, FsGrepResult *res) {
        _cleanup_(fs_pattern_states_done) FsPatternStates initial = {};
        _cleanup_free_ char *cwd = NULL;
        _cleanup_close_ int fd = -EBADF;
        const char *root = opts->path;
        GrepWalk g = {};
        struct stat st;
        int r;

        if (root) {
                r = fs_path_check(root, strlen(root), &res->status);
                if (r <= 0)
                        return r;
        } else {
                cwd = getcwd(NULL, 0);
                if (!cwd)
                        return errno == ENOMEM ? -ENOMEM : fs_status_from_errno(&res->status, -errno, ".", FS_SUBJECT_DIRECTORY);
                root = cwd;
        }
        if (opts->pattern_len > FS_GREP_MAX_PATTERN_BYTES)
                return fs_status_set(&res->status, FS_ERROR_TOO_LARGE, "Error: Pattern is longer than %u bytes",
                                     FS_GREP_MAX_PATTERN_BYTES);

        g = (GrepWalk) {
                .walk = {
                        .deadline_usec = now_usec() + (opts->timeout_usec ?: FS_GREP_TIMEOUT_USEC),
                        .cancelled = opts->cancelled,
                        .userdata = opts->userdata,
                        .on_directory = grep_on_directory,
                        .free_ctx = grep_free_ctx,
                        .on_file = grep_on_file,
                },
                .opts = opts,
                .max_matches = opts->max_count >= 0 ? MIN((uint64_t) opts->max_count, (uint64_t) FS_GREP_MAX_MATCHES)
                                                    : FS_GREP_MAX_MATCHES,
                .buf_size = GREP_BUFFER_SIZE,
        };

        if (opts->glob) {
                r = fs_pattern_compile(opts->glob, &g.glob);
                if (r == -EINVAL) {
                        r = fs_status_set(&res->status, FS_ERROR_INVALID_PATH,
                                          "Error: Path traversal not allowed in glob pattern '%s'", opts->glob);
                        goto finish;
                }
                if (r == -E2BIG) {
                        r = fs_status_set(&res->status, FS_ERROR_TOO_LARGE,
                                          "Error: Glob pattern is too broad (more than %u brace expansions or %u bytes)",
                                          FS_PATTERN_MAX_EXPANSIONS, FS_PATTERN_MAX_LENGTH);
                        goto finish;
                }
                if (r < 0)
                        goto finish;
                r = fs_pattern_states_initial(g.glob, &initial);
                if (r < 0)
                        goto finish;
        }

        g.buf = malloc(g.buf_size);
        if (!g.buf) {
                r = -ENOMEM;
                goto finish;
        }

        /* The root itself is followed if it is a link, as grep does with its operands. */
        fd = open(root, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
        if (fd < 0 || fstat(fd, &st) < 0) {
                r = fs_status_from_errno(&res->status, -errno, root, FS_SUBJECT_DIRECTORY);
                goto finish;
        }

        if (S_ISDIR(st.st_mode)) {
                if (!g.glob || fs_pattern_states_alive(g.glob, &initial))
                        r = fs_walk_run(&g.walk, root, fd, &initial);
                else
                        r = 0;
        } else if (S_ISREG(st.st_mode)) {
                /* One file: searched whatever the glob says (deepagents does the same). */
                r = buffer_append(&g.walk.path, root, strlen(root) + 1);
                if (r >= 0)
                        r = grep_fd(&g, fd);
        } else
                r = fs_status_set(&res->status, FS_ERROR_NOT_A_FILE, "Error: '%s' is not a regular file or directory",
                                  root);
        if (r < 0)
                goto finish;

        res->truncated = g.walk.incomplete || g.capped;
        res->matches = TAKE_PTR(g.matches);
        res->n_matches = g.n_matches;
        res->strings = (char *) buffer_steal(&g.strings, &res->strings_len);
        if (!res->strings)
                r = -ENOMEM;

finish:
        fs_pattern_free(g.glob);
        free(g.buf);
        free(g.matches);
        buffer_done(&g.strings);
        buffer_done(&g.head);
        fs_walk_done(&g.walk);
        return r;
}

int fs_grep(const FsGrepOptions *opts, FsGrepResult *ret) {
        _cleanup_(fs_grep_result_done) FsGrepResult res = {};
        int r;

        r = grep_impl(opts, &res);
        if (r < 0)
                return r;
        *ret = res;
        res = (FsGrepResult) {};
        return 0;
}

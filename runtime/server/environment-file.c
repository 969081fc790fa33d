/* SPDX-License-Identifier: MIT */
#include <ctype.h>
#include <fcntl.h>
#include <sys/stat.h>

#include "buffer.h"
#include "environment-file.h"
#include "log.h"

#define ENVIRONMENT_FILE_MAX (1024u * 1024u)
/* A value, expanded: no longer than the kernel passes one environment string to a program
 * (MAX_ARG_STRLEN); without a bound, lines like A=${A}${A} double it each time. */
#define ENVIRONMENT_VALUE_MAX (128u * 1024u)

static bool name_char(char c, bool first) {
        return c == '_' || isalpha((unsigned char) c) || (!first && isdigit((unsigned char) c));
}

static size_t name_length(const char *s, size_t n) {
        size_t i = 0;

        while (i < n && name_char(s[i], i == 0))
                i++;
        return i;
}

/* One line's value, with ${NAME} expanded, into b (NUL-terminated). */
static int expand(const char *v, size_t n, environment_lookup_t lookup, void *userdata, Buffer *b) {
        for (size_t i = 0; i < n;) {
                if (v[i] == '$' && i + 1 < n && v[i + 1] == '{') {
                        size_t len = name_length(v + i + 2, n - i - 2);
                        char name[256];
                        const char *value;

                        if (len == 0 || len >= sizeof(name) || i + 2 + len >= n || v[i + 2 + len] != '}')
                                return -EBADMSG;
                        memcpy(name, v + i + 2, len);
                        name[len] = 0;
                        value = lookup(name, userdata);
                        if (value && strlen(value) > ENVIRONMENT_VALUE_MAX - b->len)
                                return -E2BIG;
                        if (value && buffer_append(b, value, strlen(value)) < 0)
                                return -ENOMEM;
                        i += len + 3;
                        continue;
                }
                if (b->len >= ENVIRONMENT_VALUE_MAX)
                        return -E2BIG;
                if (buffer_append_byte(b, (uint8_t) v[i]) < 0)
                        return -ENOMEM;
                i++;
        }
        return buffer_append_byte(b, 0);
}

int environment_parse(const char *text, size_t n, environment_lookup_t lookup, environment_assign_t assign,
                      void *userdata, unsigned *ret_line) {
        unsigned line_no = 0;

        for (size_t pos = 0; pos < n;) {
                const char *line = text + pos, *end = memchr(line, '\n', n - pos);
                size_t len = end ? (size_t) (end - line) : n - pos, name_len;
                _cleanup_buffer_ Buffer value = BUFFER_NULL;
                char name[256];
                int r;

                pos += len + (end ? 1 : 0);
                line_no++;
                if (len > 0 && line[len - 1] == '\r')
                        len--;
                while (len > 0 && (line[0] == ' ' || line[0] == '\t')) {
                        line++;
                        len--;
                }
                if (len == 0 || line[0] == '#')
                        continue;
                name_len = name_length(line, len);
                if (name_len == 0 || name_len >= sizeof(name) || name_len >= len || line[name_len] != '=' ||
                    memchr(line, 0, len)) {
                        *ret_line = line_no;
                        return -EBADMSG;
                }
                memcpy(name, line, name_len);
                name[name_len] = 0;
                r = expand(line + name_len + 1, len - name_len - 1, lookup, userdata, &value);
                if (r == -EBADMSG || r == -E2BIG)
                        *ret_line = line_no;
                if (r < 0)
                        return r;
                r = assign(name, (const char *) buffer_data(&value), userdata);
                if (r < 0)
                        return r;
        }
        return 0;
}

static const char *lookup_env(const char *name, void *userdata) {
        return getenv(name);
}

static int assign_env(const char *name, const char *value, void *userdata) {
        return setenv(name, value, 1) < 0 ? negative_errno() : 0;
}

int environment_file_apply(const char *path) {
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
        _cleanup_free_ char *text = NULL;
        unsigned line = 0;
        struct stat st;
        int r;

        if (fd < 0)
                return negative_errno();
        if (fstat(fd, &st) < 0)
                return negative_errno();
        if (!S_ISREG(st.st_mode) || st.st_size > ENVIRONMENT_FILE_MAX)
                return log_error_errno(EFBIG, "%s: not a regular file of at most 1 MiB", path);
        text = malloc(st.st_size + 1);
        if (!text)
                return -ENOMEM;
        r = loop_read_exact(fd, text, st.st_size);
        if (r < 0)
                return log_error_errno(r, "Failed to read %s: %m", path);
        r = environment_parse(text, st.st_size, lookup_env, assign_env, NULL, &line);
        if (r == -EBADMSG)
                return log_error_errno(r, "%s:%u: expected NAME=VALUE (with ${NAME} for a variable)", path, line);
        if (r == -E2BIG)
                return log_error_errno(r, "%s:%u: the value, expanded, is longer than 128 KiB", path, line);
        if (r < 0)
                return log_error_errno(r, "Failed to apply %s: %m", path);
        log_debug("Environment from %s applied.", path);
        return 0;
}

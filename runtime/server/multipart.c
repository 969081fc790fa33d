/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "multipart.h"

/* RFC 2046's bchars, the characters a boundary may have. */
static bool boundary_char(char c) {
        return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
               strchr("'()+_,-./:=? ", c);
}

int multipart_boundary(const char *content_type, char ret[static MULTIPART_BOUNDARY_MAX + 1]) {
        const char *p = content_type, *b = NULL;
        size_t n;

        if (strncasecmp(p, "multipart/form-data", 19) != 0)
                return -EINVAL;
        for (p += 19; (p = strchr(p, ';')); ) {
                p++;
                p += strspn(p, " \t");
                if (strncasecmp(p, "boundary=", 9) == 0) {
                        b = p + 9;
                        break;
                }
        }
        if (!b)
                return -EINVAL;
        if (*b == '"') {
                const char *end = strchr(++b, '"');
                if (!end)
                        return -EINVAL;
                n = (size_t) (end - b);
        } else
                n = strcspn(b, "; \t");
        if (n == 0 || n > MULTIPART_BOUNDARY_MAX || b[n - 1] == ' ')
                return -EINVAL;
        for (size_t i = 0; i < n; i++)
                if (!boundary_char(b[i]))
                        return -EINVAL;
        memcpy(ret, b, n);
        ret[n] = 0;
        return 0;
}

/* A parameter's value in a Content-Disposition value (name="x" or name=x), into buf. */
static void disposition_param(const char *v, size_t n, const char *param, char *buf, size_t size) {
        size_t k = strlen(param);
        const char *end = v + n;

        buf[0] = 0;
        for (const char *p = v; p < end; p++) {
                const char *q, *val_end;
                size_t len;

                if (!(p == v || p[-1] == ';' || p[-1] == ' ' || p[-1] == '\t') || (size_t) (end - p) <= k ||
                    strncasecmp(p, param, k) != 0 || p[k] != '=')
                        continue;
                q = p + k + 1;
                if (q < end && *q == '"') {
                        q++;
                        val_end = memchr(q, '"', (size_t) (end - q));
                        if (!val_end)
                                return;
                } else {
                        val_end = q;
                        while (val_end < end && *val_end != ';')
                                val_end++;
                }
                len = (size_t) (val_end - q);
                if (len >= size)
                        return; /* too long: as good as none */
                memcpy(buf, q, len);
                buf[len] = 0;
                return;
        }
}

/* The part headers from p (up to the blank line, which must be there): name and filename. */
static int part_headers(const uint8_t *p, const uint8_t *end, MultipartPart *part, const uint8_t **ret_data) {
        const uint8_t *blank = memmem(p, (size_t) (end - p), "\r\n\r\n", 4);

        /* No headers at all: the blank line comes first. */
        if ((size_t) (end - p) >= 2 && memcmp(p, "\r\n", 2) == 0) {
                *ret_data = p + 2;
                return 0;
        }
        if (!blank)
                return -EBADMSG;
        for (const uint8_t *line = p; line < blank + 2;) {
                const uint8_t *eol = memmem(line, (size_t) (blank + 2 - line), "\r\n", 2);
                size_t n = (size_t) (eol - line);

                if (n > 20 && strncasecmp((const char *) line, "Content-Disposition:", 20) == 0) {
                        const char *v = (const char *) line + 20;
                        size_t vn = n - 20;

                        disposition_param(v, vn, "name", part->name, sizeof(part->name));
                        disposition_param(v, vn, "filename", part->filename, sizeof(part->filename));
                }
                line = eol + 2;
        }
        *ret_data = blank + 4;
        return 0;
}

int multipart_parse(const uint8_t *body, size_t size, const char *boundary, MultipartPart **ret, size_t *ret_n) {
        const uint8_t *end = body + size, *p;
        size_t blen = strlen(boundary), n = 0;
        MultipartPart *parts = NULL;
        char delim[MULTIPART_BOUNDARY_MAX + 5];
        size_t dlen;
        int r = -EBADMSG;

        if (blen == 0 || blen > MULTIPART_BOUNDARY_MAX)
                return -EINVAL;
        /* The first delimiter may start the body; every later one follows a CRLF. */
        dlen = (size_t) snprintf(delim, sizeof(delim), "\r\n--%s", boundary);
        if (size >= dlen - 2 && memcmp(body, delim + 2, dlen - 2) == 0)
                p = body + dlen - 2;
        else {
                p = memmem(body, size, delim, dlen);
                if (!p)
                        return -EBADMSG;
                p += dlen;
        }
        for (;;) {
                const uint8_t *data, *next;
                MultipartPart *more;

                /* After a delimiter: "--" closes, else (optional blanks and) CRLF, then a part. */
                if ((size_t) (end - p) >= 2 && memcmp(p, "--", 2) == 0)
                        break;
                while (p < end && (*p == ' ' || *p == '\t'))
                        p++;
                if ((size_t) (end - p) < 2 || memcmp(p, "\r\n", 2) != 0)
                        goto fail;
                p += 2;
                if (n >= MULTIPART_MAX_PARTS) {
                        r = -E2BIG;
                        goto fail;
                }
                more = realloc(parts, (n + 1) * sizeof(MultipartPart));
                if (!more) {
                        r = -ENOMEM;
                        goto fail;
                }
                parts = more;
                parts[n] = (MultipartPart) {};
                if (part_headers(p, end, &parts[n], &data) < 0)
                        goto fail;
                next = memmem(data, (size_t) (end - data), delim, dlen);
                if (!next)
                        goto fail;
                parts[n].data = data;
                parts[n].size = (size_t) (next - data);
                n++;
                p = next + dlen;
        }
        *ret = parts;
        *ret_n = n;
        return 0;
fail:
        free(parts);
        return r;
}

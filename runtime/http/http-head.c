/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <strings.h>

#include "http-head.h"

int http_head_parse(const uint8_t *data, size_t size, HttpHead *ret) {
        const char *s = (const char *) data, *end = memmem(s, size, "\r\n\r\n", 4), *eol, *sp1, *sp2;

        if (!end)
                return -EBADMSG;
        eol = memmem(s, (size_t) (end + 2 - s), "\r\n", 2);
        sp1 = memchr(s, ' ', (size_t) (eol - s));
        sp2 = sp1 ? memchr(sp1 + 1, ' ', (size_t) (eol - sp1 - 1)) : NULL;
        if (!sp1 || !sp2)
                return -EBADMSG;
        *ret = (HttpHead) {
                .method = s, .method_len = (size_t) (sp1 - s),
                .target = sp1 + 1, .target_len = (size_t) (sp2 - sp1 - 1),
                .version = sp2 + 1, .version_len = (size_t) (eol - sp2 - 1),
                .headers = eol + 2, .headers_len = (size_t) (end + 2 - (eol + 2)),
                .size = (size_t) (end + 4 - s),
        };
        return 0;
}

bool http_head_line_is(const char *line, size_t n, const char *name) {
        size_t k = strlen(name);
        return n > k && line[k] == ':' && strncasecmp(line, name, k) == 0;
}

void http_head_line_value(const char *line, size_t n, const char **ret, size_t *ret_len) {
        const char *v = memchr(line, ':', n), *e = line + n;

        v = v ? v + 1 : e;
        while (v < e && (*v == ' ' || *v == '\t'))
                v++;
        while (e > v && (e[-1] == ' ' || e[-1] == '\t'))
                e--;
        *ret = v;
        *ret_len = (size_t) (e - v);
}

bool http_head_find(const HttpHead *h, const char *name, const char **ret, size_t *ret_len) {
        HTTP_HEAD_FOREACH(h, line, n)
                if (http_head_line_is(line, n, name)) {
                        http_head_line_value(line, n, ret, ret_len);
                        return true;
                }
        return false;
}

void http_head_move(HttpHead *h, const uint8_t *from, const uint8_t *to) {
        const char *f = (const char *) from, *t = (const char *) to;

        h->method = t + (h->method - f);
        h->target = t + (h->target - f);
        h->version = t + (h->version - f);
        h->headers = t + (h->headers - f);
}

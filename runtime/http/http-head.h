/* SPDX-License-Identifier: MIT */
#pragma once

/* A request head read again as text, for the code that takes a connection over once
 * http-conn.c has parsed its head (the port proxy, the E2B gateway): its request line, and its
 * header lines, each found by name. Bounds are checked; nothing else is trusted. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef struct HttpHead {
        const char *method;  size_t method_len;
        const char *target;  size_t target_len;
        const char *version; size_t version_len;
        const char *headers; size_t headers_len; /* the header lines, each ending in CRLF */
        size_t size;                             /* the whole head, blank line included */
} HttpHead;

/* data starts with a whole head (request line, headers, blank line). -EBADMSG if not. */
int http_head_parse(const uint8_t *data, size_t size, HttpHead *ret);

/* h, parsed from `from`, as it reads in `to`, a copy of the same bytes: parsed once, kept with
 * the copy. */
void http_head_move(HttpHead *h, const uint8_t *from, const uint8_t *to);

/* Is this header line (without its CRLF) one of header `name` (case-insensitive)? */
bool http_head_line_is(const char *line, size_t n, const char *name);
/* The value of a header line (after "Name:", blanks trimmed). */
void http_head_line_value(const char *line, size_t n, const char **ret, size_t *ret_len);
/* The value of the first header `name`: true when there is one. */
bool http_head_find(const HttpHead *h, const char *name, const char **ret, size_t *ret_len);

/* Walk the header lines: `line` without its CRLF, `n` its length. */
#define HTTP_HEAD_FOREACH(h, line, n)                                                                        \
        for (const char *line = (h)->headers, *_e; line < (h)->headers + (h)->headers_len &&                  \
                                                   (_e = memmem(line, (size_t) ((h)->headers + (h)->headers_len - line), \
                                                                "\r\n", 2));                                     \
             line = _e + 2)                                                                                    \
                for (size_t n = (size_t) (_e - line), _once = 1; _once; _once = 0)

/* SPDX-License-Identifier: MIT */
#pragma once

/* multipart/form-data (RFC 7578) read from a whole body, as E2B's SDK uploads files to envd's
 * POST /files: each part's field name, file name and bytes, pointing into the body (nothing is
 * copied). Only what uploads need: Content-Disposition's name and filename (quoted or not, no
 * RFC 2231 encodings); other part headers are skipped; the preamble and epilogue ignored. */

#include <stddef.h>
#include <stdint.h>

#define MULTIPART_BOUNDARY_MAX 70  /* RFC 2046 */
#define MULTIPART_MAX_PARTS 1000
#define MULTIPART_NAME_MAX 4096

typedef struct MultipartPart {
        char name[256];                    /* the field's name ("" when none) */
        char filename[MULTIPART_NAME_MAX]; /* "" when none */
        const uint8_t *data;
        size_t size;
} MultipartPart;

/* The boundary of a Content-Type "multipart/form-data; boundary=…" in ret. -EINVAL when it is
 * not one, or names no valid boundary. */
int multipart_boundary(const char *content_type, char ret[static MULTIPART_BOUNDARY_MAX + 1]);

/* The parts of body (malloc'ed array in *ret, *ret_n of them). -EBADMSG for a body that is not
 * multipart with that boundary (no closing delimiter, a part without its blank line, …),
 * -E2BIG beyond MULTIPART_MAX_PARTS, -ENOMEM. */
int multipart_parse(const uint8_t *body, size_t size, const char *boundary, MultipartPart **ret, size_t *ret_n);

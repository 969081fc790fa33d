/* SPDX-License-Identifier: MIT */
/* envd's POST /files bodies (runtime/server/multipart.c) with any bytes: the first line is the
 * Content-Type (its boundary), the rest the body. Each part must lie inside the body, in order,
 * its names NUL-terminated; never a crash, a leak or a read out of bounds. */
#include <stdlib.h>
#include <string.h>

#include "fuzz-util.h"
#include "multipart.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        const uint8_t *nl = memchr(data, '\n', size), *body;
        char content_type[256], boundary[MULTIPART_BOUNDARY_MAX + 1];
        MultipartPart *parts = NULL;
        size_t n = 0, len;

        if (!nl || (size_t) (nl - data) >= sizeof(content_type) || size > 1024 * 1024)
                return 0;
        len = (size_t) (nl - data);
        memcpy(content_type, data, len);
        content_type[len] = 0;
        if (memchr(content_type, 0, len) || multipart_boundary(content_type, boundary) < 0)
                return 0;
        CHECK(strlen(boundary) > 0 && strlen(boundary) <= MULTIPART_BOUNDARY_MAX);
        body = nl + 1;
        if (multipart_parse(body, size - len - 1, boundary, &parts, &n) == 0) {
                const uint8_t *last = body;

                CHECK(n <= MULTIPART_MAX_PARTS);
                for (size_t i = 0; i < n; i++) {
                        CHECK(parts[i].data >= last && parts[i].data + parts[i].size <= body + (size - len - 1));
                        CHECK(memchr(parts[i].name, 0, sizeof(parts[i].name)) &&
                              memchr(parts[i].filename, 0, sizeof(parts[i].filename)));
                        last = parts[i].data + parts[i].size;
                }
                free(parts);
        }
        return 0;
}

/* SPDX-License-Identifier: MIT */
#include <stdlib.h>
#include <string.h>

#include "blob.h"

Blob *blob_new_take(void *mem, const uint8_t *data, size_t size) {
        Blob *b = malloc(sizeof(*b));

        if (!b)
                return NULL;
        *b = (Blob) { .n_ref = 1, .mem = mem, .data = data, .size = size };
        return b;
}

Blob *blob_new_copy(const void *data, size_t size) {
        uint8_t *mem;
        Blob *b;

        if (size > SIZE_MAX - BLOB_HEADROOM)
                return NULL;
        mem = malloc(BLOB_HEADROOM + size);
        if (!mem)
                return NULL;
        if (size > 0)
                memcpy(mem + BLOB_HEADROOM, data, size);
        b = blob_new_take(mem, mem + BLOB_HEADROOM, size);
        if (!b)
                free(mem);
        return b;
}

Blob *blob_ref(Blob *b) {
        if (b)
                b->n_ref++;
        return b;
}

Blob *blob_unref(Blob *b) {
        if (!b || --b->n_ref > 0)
                return NULL;
        free(b->mem);
        free(b);
        return NULL;
}

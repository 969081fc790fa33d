/* SPDX-License-Identifier: MIT */
#pragma once

/* An immutable, reference-counted byte string. One result can be queued on a connection and
 * kept for replay at the same time without a copy: a 64 MiB download is never duplicated.
 *
 * Every blob has at least BLOB_HEADROOM writable bytes in front of its data, so a WebSocket
 * frame header (libwebsockets' LWS_PRE) can be written in place. Those bytes are not part of
 * the data and may be scribbled on by any holder. */

#include <stddef.h>
#include <stdint.h>

#define BLOB_HEADROOM 32u

typedef struct Blob {
        unsigned n_ref;
        void *mem;           /* what to free() */
        const uint8_t *data; /* at least BLOB_HEADROOM bytes into mem */
        size_t size;
} Blob;

Blob *blob_new_copy(const void *data, size_t size);
/* Take over a malloc()ed block holding the data at data (data - mem >= BLOB_HEADROOM). */
Blob *blob_new_take(void *mem, const uint8_t *data, size_t size);
Blob *blob_ref(Blob *b);
Blob *blob_unref(Blob *b);

static inline void blob_unrefp(Blob **b) {
        if (*b)
                blob_unref(*b);
}
#define _cleanup_blob_ __attribute__((cleanup(blob_unrefp)))

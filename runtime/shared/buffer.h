/* SPDX-License-Identifier: MIT */
#pragma once

/* A growable byte buffer with optional reserved headroom in front of the data.
 *
 * The headroom lets a writer (e.g. libwebsockets, which needs LWS_PRE bytes before the payload)
 * prepend protocol headers without copying the payload again. */

#include <stdint.h>

#include "macro.h"

typedef struct Buffer {
        uint8_t *mem;      /* allocation start */
        size_t headroom;   /* bytes reserved before data */
        size_t len;        /* bytes of data */
        size_t cap;        /* bytes allocated after headroom */
} Buffer;

#define BUFFER_NULL ((Buffer) {})

static inline uint8_t *buffer_data(const Buffer *b) {
        return b->mem ? b->mem + b->headroom : NULL;
}

/* Make sure `extra` more bytes fit after the data. Returns 0 or -ENOMEM. */
int buffer_reserve(Buffer *b, size_t extra);
int buffer_append(Buffer *b, const void *data, size_t n);
int buffer_append_byte(Buffer *b, uint8_t c);
int buffer_printf(Buffer *b, const char *fmt, ...) _printf_(2, 3);
/* Set the headroom of an empty buffer (call before the first append). */
int buffer_set_headroom(Buffer *b, size_t headroom);
/* Drop the first n bytes of data. */
void buffer_consume(Buffer *b, size_t n);
void buffer_clear(Buffer *b);
void buffer_done(Buffer *b);
/* Hand the data over as a malloc()ed, NUL-terminated block (headroom is stripped by copying
 * only when there is headroom). The buffer is empty afterwards. */
uint8_t *buffer_steal(Buffer *b, size_t *ret_len);

static inline void buffer_donep(Buffer *b) {
        buffer_done(b);
}
#define _cleanup_buffer_ _cleanup_(buffer_donep)

/* SPDX-License-Identifier: MIT */
#pragma once

/* Structural check of untrusted msgpack before msgpack-c unpacks it.
 *
 * msgpack-c allocates room for a container as soon as it reads the container's header, so a
 * six-byte message announcing a 4-billion-element array makes it ask for ~100 GB. This walk
 * allocates nothing: it proves every length and element count fits in the bytes that are
 * actually there (each element takes at least one byte), and bounds the nesting depth. */

#include <stddef.h>
#include <stdint.h>

#define MP_CHECK_MAX_DEPTH 32u /* msgpack-c's own unpack stack is 32 deep */

/* 0 when `data` holds exactly one well-formed msgpack object; -EBADMSG when truncated,
 * malformed or followed by trailing bytes; -ELOOP when nested deeper than MP_CHECK_MAX_DEPTH. */
int mp_check(const uint8_t *data, size_t size);

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

#include <msgpack.h>

#define MP_CHECK_MAX_DEPTH 32u /* msgpack-c's own unpack stack is 32 deep */

/* 0 when `data` holds exactly one well-formed msgpack object; -EBADMSG when truncated,
 * malformed or followed by trailing bytes; -ELOOP when nested deeper than MP_CHECK_MAX_DEPTH. */
int mp_check(const uint8_t *data, size_t size);

/* An integer argument, read by its msgpack type and range-checked: 0 and *ret when `o` is an
 * integer in [min, max]; -ERANGE for an integer outside it; -EINVAL for anything else.
 *
 * msgpack keeps 0…2^64-1 in via.u64 (POSITIVE_INTEGER) and only negative values in via.i64:
 * reading via.i64 of a positive value turns 2^64-1 into -1 and 2^63 into INT64_MIN, which then
 * pass an upper bound. Every integer a caller sends goes through here. */
int mp_get_int(const msgpack_object *o, int64_t min, int64_t max, int64_t *ret);

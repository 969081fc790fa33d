/* SPDX-License-Identifier: MIT */
#pragma once

/* Strict UTF-8 (as Python's decoder: no overlong forms, no surrogates, nothing above
 * U+10FFFF): deciding text vs. binary, and turning arbitrary bytes into valid msgpack str
 * payloads. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buffer.h"

/* Length of the valid sequence starting at p (1..4), or 0 when the bytes there are not a
 * valid sequence; -1 when they are a valid but incomplete start cut off by the end. */
int fs_utf8_sequence_length(const uint8_t *p, size_t n);

/* Whether p[0..n) is valid UTF-8. With final == false, a sequence cut off by the end of
 * the buffer is accepted (the buffer is a prefix of something longer). */
bool fs_utf8_is_valid(const uint8_t *p, size_t n, bool final);

/* Append p[0..n) to b, replacing every byte that is not part of a valid sequence with
 * U+FFFD, so the result is always valid UTF-8. */
int fs_utf8_append_sanitized(Buffer *b, const uint8_t *p, size_t n);

/* The longest prefix of valid UTF-8 text s[0..n) that does not end inside a sequence. */
size_t fs_utf8_cut(const uint8_t *s, size_t n);

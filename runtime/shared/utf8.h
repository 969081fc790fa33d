/* SPDX-License-Identifier: MIT */
#pragma once

/* Turning arbitrary command output into a valid UTF-8 string (msgpack str), the way Python's
 * bytes.decode("utf-8", "replace") does: each maximal ill-formed subsequence (Unicode 15,
 * section 3.9, "U+FFFD substitution of maximal subparts") becomes one U+FFFD. */

#include <stdint.h>

#include "buffer.h"

/* Length of the longest prefix of s that is well-formed UTF-8. */
size_t utf8_valid_prefix(const uint8_t *s, size_t n);

/* Length of s without a trailing sequence that is well-formed so far but cut short. Used when
 * output was truncated mid-character: the cut is ours, not the command's, so drop it rather
 * than show a replacement character. */
size_t utf8_trim_incomplete_tail(const uint8_t *s, size_t n);

/* Append s to out with every ill-formed subsequence replaced by U+FFFD. */
int utf8_append_sanitized(Buffer *out, const uint8_t *s, size_t n);

/* SPDX-License-Identifier: MIT */
#include "utf8.h"

typedef enum Utf8Check {
        UTF8_VALID,      /* a complete well-formed sequence */
        UTF8_INVALID,    /* ill-formed: replace the maximal subpart */
        UTF8_INCOMPLETE, /* well-formed so far, but the input ends inside it */
} Utf8Check;

/* Classify the sequence starting at s[0] (n ≥ 1) per Table 3-7 of the Unicode standard; *ret_len
 * is the length of the sequence (valid) or of the maximal subpart (invalid, incomplete). */
static Utf8Check utf8_check(const uint8_t *s, size_t n, size_t *ret_len) {
        uint8_t c = s[0], lo = 0x80, hi = 0xBF;
        size_t need;

        if (c < 0x80) {
                *ret_len = 1;
                return UTF8_VALID;
        }
        if (c >= 0xC2 && c <= 0xDF)
                need = 1;
        else if (c >= 0xE0 && c <= 0xEF) {
                need = 2;
                if (c == 0xE0)
                        lo = 0xA0; /* no overlong forms */
                else if (c == 0xED)
                        hi = 0x9F; /* no surrogates */
        } else if (c >= 0xF0 && c <= 0xF4) {
                need = 3;
                if (c == 0xF0)
                        lo = 0x90; /* no overlong forms */
                else if (c == 0xF4)
                        hi = 0x8F; /* nothing above U+10FFFF */
        } else {
                *ret_len = 1;
                return UTF8_INVALID;
        }

        for (size_t i = 1; i <= need; i++) {
                if (i >= n) {
                        *ret_len = i;
                        return UTF8_INCOMPLETE;
                }
                if (s[i] < lo || s[i] > hi) {
                        *ret_len = i;
                        return UTF8_INVALID;
                }
                lo = 0x80;
                hi = 0xBF;
        }
        *ret_len = need + 1;
        return UTF8_VALID;
}

size_t utf8_valid_prefix(const uint8_t *s, size_t n) {
        size_t i = 0;

        while (i < n) {
                size_t len;

                /* Fast path: command output is mostly ASCII. */
                if (s[i] < 0x80) {
                        i++;
                        continue;
                }
                if (utf8_check(s + i, n - i, &len) != UTF8_VALID)
                        break;
                i += len;
        }
        return i;
}

size_t utf8_trim_incomplete_tail(const uint8_t *s, size_t n) {
        /* A sequence is at most 4 bytes, so only the last 3 bytes can start a cut one. */
        for (size_t back = 1; back <= 3 && back <= n; back++) {
                size_t start = n - back, len;

                if ((s[start] & 0xC0) == 0x80)
                        continue; /* continuation byte: look further back */
                if (utf8_check(s + start, back, &len) == UTF8_INCOMPLETE && len == back)
                        return start;
                break;
        }
        return n;
}

int utf8_append_sanitized(Buffer *out, const uint8_t *s, size_t n) {
        static const uint8_t replacement[] = { 0xEF, 0xBF, 0xBD }; /* U+FFFD */
        size_t i = 0;
        int r;

        while (i < n) {
                size_t good = utf8_valid_prefix(s + i, n - i), len;

                if (good > 0) {
                        r = buffer_append(out, s + i, good);
                        if (r < 0)
                                return r;
                        i += good;
                        if (i >= n)
                                break;
                }
                (void) utf8_check(s + i, n - i, &len); /* invalid or incomplete */
                r = buffer_append(out, replacement, sizeof(replacement));
                if (r < 0)
                        return r;
                i += len;
        }
        return 0;
}

/* SPDX-License-Identifier: MIT */
#include <string.h>

#include "fs-utf8.h"

int fs_utf8_sequence_length(const uint8_t *p, size_t n) {
        uint8_t c = p[0];
        uint8_t lo = 0x80, hi = 0xBF;
        int len;

        if (c < 0x80)
                return 1;
        if (c < 0xC2)
                return 0; /* continuation byte or overlong 2-byte lead */
        if (c < 0xE0)
                len = 2;
        else if (c < 0xF0) {
                len = 3;
                if (c == 0xE0)
                        lo = 0xA0; /* overlong */
                else if (c == 0xED)
                        hi = 0x9F; /* surrogates */
        } else if (c < 0xF5) {
                len = 4;
                if (c == 0xF0)
                        lo = 0x90; /* overlong */
                else if (c == 0xF4)
                        hi = 0x8F; /* above U+10FFFF */
        } else
                return 0;

        for (int i = 1; i < len; i++) {
                if ((size_t) i >= n)
                        return -1;
                uint8_t b = p[i];
                if (i == 1 ? (b < lo || b > hi) : (b < 0x80 || b > 0xBF))
                        return 0;
        }
        return len;
}

/* Bytes of pure ASCII at the start of p, eight at a time where possible. */
static size_t ascii_prefix(const uint8_t *p, size_t n) {
        size_t i = 0;

        for (; i + 8 <= n; i += 8) {
                uint64_t w;
                memcpy(&w, p + i, 8);
                if (w & UINT64_C(0x8080808080808080))
                        break;
        }
        while (i < n && p[i] < 0x80)
                i++;
        return i;
}

bool fs_utf8_is_valid(const uint8_t *p, size_t n, bool final) {
        size_t i = 0;

        while (i < n) {
                i += ascii_prefix(p + i, n - i);
                if (i >= n)
                        break;
                int k = fs_utf8_sequence_length(p + i, n - i);
                if (k == 0)
                        return false;
                if (k < 0)
                        return !final;
                i += (size_t) k;
        }
        return true;
}

int fs_utf8_append_sanitized(Buffer *b, const uint8_t *p, size_t n) {
        static const uint8_t replacement[3] = { 0xEF, 0xBF, 0xBD };
        size_t i = 0;
        int r;

        while (i < n) {
                size_t start = i;

                /* Copy the longest valid run in one go. */
                for (;;) {
                        i += ascii_prefix(p + i, n - i);
                        if (i >= n)
                                break;
                        int k = fs_utf8_sequence_length(p + i, n - i);
                        if (k <= 0)
                                break;
                        i += (size_t) k;
                }
                r = buffer_append(b, p + start, i - start);
                if (r < 0)
                        return r;
                if (i < n) {
                        r = buffer_append(b, replacement, sizeof(replacement));
                        if (r < 0)
                                return r;
                        i++;
                }
        }
        return 0;
}

size_t fs_utf8_cut(const uint8_t *s, size_t n) {
        size_t i = n;

        if (n == 0)
                return 0;
        /* Back up over continuation bytes to the lead byte of the last sequence. */
        while (i > 0 && (s[i - 1] & 0xC0) == 0x80)
                i--;
        if (i == 0)
                return 0;
        size_t lead = i - 1;
        int k = fs_utf8_sequence_length(s + lead, n - lead);
        return k > 0 && lead + (size_t) k == n ? n : lead;
}

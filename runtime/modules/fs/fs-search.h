/* SPDX-License-Identifier: MIT */
#pragma once

/* Literal substring search for grep: memchr() (vectorised in glibc) for the needle's
 * rarest byte, then memcmp() at the candidate. On text where that byte turns out to be
 * common the prefilter switches itself off and memmem() takes over, so the worst case is
 * memmem()'s. Several times faster than memmem() alone on source code. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct FsSearch {
        const uint8_t *needle;
        size_t n;
        size_t rare_offset;  /* position of the rarest byte in the needle */
        uint8_t rare;
        bool prefilter;      /* still worth it */
        uint64_t candidates; /* prefilter statistics, to decide when to stop using it */
        uint64_t skipped;
} FsSearch;

void fs_search_init(FsSearch *s, const void *needle, size_t n);

/* First occurrence of the needle in [p, end), or NULL. */
const uint8_t *fs_search_find(FsSearch *s, const uint8_t *p, const uint8_t *end);

/* SPDX-License-Identifier: MIT */
#include <string.h>

#include "fs-search.h"

/* How common a byte is in text and source code, higher is more common. A rough order is
 * all the prefilter needs: spaces and frequent lowercase letters are poor anchors,
 * uppercase letters, rare letters, digits and most punctuation are good ones. */
static unsigned byte_commonness(uint8_t c) {
        static const char frequent[] = " etaoinsrlhdc\n\tu";
        const char *f;

        if (c != 0 && (f = strchr(frequent, c)))
                return 255 - (unsigned) (f - frequent);
        if (c >= 'a' && c <= 'z')
                return strchr("qzjxkv", c) ? 120 : 200;
        if (c == '_' || c == '.' || c == ',' || c == '(' || c == ')' || c == ';' || c == '=' || c == '"' ||
            c == '-' || c == '/' || c == '*' || c == ':' || c == '\'' || c == '{' || c == '}' || c == '#')
                return 180;
        if (c >= 'A' && c <= 'Z')
                return 150;
        if (c >= '0' && c <= '9')
                return 160;
        if (c >= 0x80)
                return 100; /* UTF-8: a lead byte is rarer than a continuation byte, both rare */
        return 80;
}

void fs_search_init(FsSearch *s, const void *needle, size_t n) {
        const uint8_t *p = needle;

        *s = (FsSearch) { .needle = p, .n = n, .prefilter = n > 1 };
        for (size_t i = 0; i < n; i++)
                if (byte_commonness(p[i]) < byte_commonness(p[s->rare_offset]))
                        s->rare_offset = i;
        if (n > 0)
                s->rare = p[s->rare_offset];
}

const uint8_t *fs_search_find(FsSearch *s, const uint8_t *p, const uint8_t *end) {
        size_t n = s->n;

        if ((size_t) (end - p) < n)
                return NULL;
        if (n == 0)
                return p;
        if (n == 1)
                return memchr(p, s->needle[0], (size_t) (end - p));

        while (s->prefilter) {
                /* The rare byte of a match starting at or after p lies in [from, last]. */
                const uint8_t *from = p + s->rare_offset, *last = end - n + s->rare_offset;
                if (from > last)
                        return NULL;
                const uint8_t *q = memchr(from, s->rare, (size_t) (last - from) + 1);
                if (!q)
                        return NULL;
                const uint8_t *cand = q - s->rare_offset;
                if (memcmp(cand, s->needle, n) == 0)
                        return cand;

                /* A false candidate. memchr() pays off while candidates are far apart;
                 * when they come every few bytes, memmem() is the better tool. */
                s->candidates++;
                s->skipped += (uint64_t) (q - from) + 1;
                if (s->candidates >= 256 && s->skipped < s->candidates * 32)
                        s->prefilter = false;
                p = cand + 1;
        }

        return memmem(p, (size_t) (end - p), s->needle, n);
}

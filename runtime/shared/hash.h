/* SPDX-License-Identifier: MIT */
#pragma once

/* A seeded 64-bit hash of a byte string for the server's tables (FNV-1a, then murmur3's
 * finalizer so the low bits used for bucket selection are well mixed). Seed it at random per
 * table: peers choose the keys (call_ids, sids). */

#include <stddef.h>
#include <stdint.h>

static inline uint64_t hash64_bytes(uint64_t seed, const void *data, size_t len) {
        const uint8_t *p = data;
        uint64_t h = 0xcbf29ce484222325ULL ^ seed;

        for (size_t i = 0; i < len; i++) {
                h ^= p[i];
                h *= 0x100000001b3ULL;
        }
        h ^= h >> 33;
        h *= 0xff51afd7ed558ccdULL;
        h ^= h >> 33;
        h *= 0xc4ceb9fe1a85ec53ULL;
        h ^= h >> 33;
        return h;
}

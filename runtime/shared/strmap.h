/* SPDX-License-Identifier: MIT */
#pragma once

/* A hash map from byte-string keys to pointers. Keys are borrowed: they must stay valid and
 * unchanged while the entry exists (store the key inside the value). Open addressing with
 * linear probing and backward-shift deletion; the hash is seeded at random per map so peers
 * cannot precompute colliding ids. */

#include <stddef.h>

typedef struct StrMap StrMap;

StrMap *strmap_new(void);
StrMap *strmap_free(StrMap *m);

void *strmap_get(const StrMap *m, const char *key, size_t len);
/* -EEXIST when the key is present, -ENOMEM. */
int strmap_put(StrMap *m, const char *key, size_t len, void *value);
/* Returns the removed value or NULL. */
void *strmap_remove(StrMap *m, const char *key, size_t len);
size_t strmap_size(const StrMap *m);

/* Iterate: *state starts at 0; returns the next value or NULL at the end. The map must not be
 * modified during iteration. */
void *strmap_iterate(const StrMap *m, size_t *state);

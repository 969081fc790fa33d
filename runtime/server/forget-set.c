/* SPDX-License-Identifier: MIT */
#include <stdlib.h>
#include <sys/random.h>

#include "forget-set.h"
#include "hash.h"
#include "macro.h"

struct ForgetSet {
        uint64_t seed;
        uint64_t *ring; /* insertion order, for evicting the oldest */
        size_t window, next, count;
        uint64_t *slots; /* open addressing; 0 marks an empty slot */
        size_t n_slots;  /* power of two, at least twice the window */
};

static uint64_t hash_id(const ForgetSet *f, const char *id, size_t len) {
        return hash64_bytes(f->seed, id, len) ?: 1;
}

ForgetSet *forget_set_new(size_t window) {
        ForgetSet *f = calloc(1, sizeof(*f));

        if (!f)
                return NULL;
        f->window = MAX(window, (size_t) 1);
        for (f->n_slots = 16; f->n_slots < 2 * f->window; f->n_slots *= 2)
                ;
        f->ring = calloc(f->window, sizeof(uint64_t));
        f->slots = calloc(f->n_slots, sizeof(uint64_t));
        if (!f->ring || !f->slots)
                return forget_set_free(f);
        if (getrandom(&f->seed, sizeof(f->seed), GRND_NONBLOCK) != sizeof(f->seed))
                f->seed = now_usec() * 0x9e3779b97f4a7c15ULL;
        return f;
}

ForgetSet *forget_set_free(ForgetSet *f) {
        if (f) {
                free(f->ring);
                free(f->slots);
                free(f);
        }
        return NULL;
}

static size_t find_slot(const ForgetSet *f, uint64_t h) {
        size_t mask = f->n_slots - 1;

        for (size_t i = h & mask;; i = (i + 1) & mask)
                if (f->slots[i] == h || f->slots[i] == 0)
                        return i;
}

static void remove_hash(ForgetSet *f, uint64_t h) {
        size_t mask = f->n_slots - 1, i = find_slot(f, h), j;

        if (f->slots[i] != h)
                return;
        /* Backward-shift deletion keeps probe chains intact without tombstones. */
        for (j = (i + 1) & mask; f->slots[j]; j = (j + 1) & mask) {
                size_t home = f->slots[j] & mask;
                if ((i <= j) ? (home <= i || home > j) : (home <= i && home > j)) {
                        f->slots[i] = f->slots[j];
                        i = j;
                }
        }
        f->slots[i] = 0;
}

void forget_set_add(ForgetSet *f, const char *id, size_t len) {
        uint64_t h = hash_id(f, id, len);
        size_t i = find_slot(f, h);

        if (f->slots[i] == h)
                return;
        if (f->count == f->window) {
                remove_hash(f, f->ring[f->next]);
                f->count--;
                i = find_slot(f, h);
        }
        f->slots[i] = h;
        f->ring[f->next] = h;
        f->next = (f->next + 1) % f->window;
        f->count++;
}

bool forget_set_contains(const ForgetSet *f, const char *id, size_t len) {
        uint64_t h = hash_id(f, id, len);
        return f->slots[find_slot(f, h)] == h;
}

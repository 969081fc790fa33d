/* SPDX-License-Identifier: MIT */
#include <stdint.h>
#include <sys/random.h>

#include "macro.h"
#include "hash.h"
#include "strmap.h"

typedef struct Slot {
        const char *key;
        size_t len;
        uint64_t hash;
        void *value;
} Slot;

struct StrMap {
        Slot *slots;
        size_t n_slots; /* power of two, or 0 */
        size_t n_items;
        uint64_t seed;
};

StrMap *strmap_new(void) {
        StrMap *m = calloc(1, sizeof(*m));

        if (!m)
                return NULL;
        if (getrandom(&m->seed, sizeof(m->seed), GRND_NONBLOCK) != sizeof(m->seed))
                m->seed = (uint64_t) now_usec() * 0x9e3779b97f4a7c15ULL;
        return m;
}

StrMap *strmap_free(StrMap *m) {
        if (m) {
                free(m->slots);
                free(m);
        }
        return NULL;
}

static Slot *find(const StrMap *m, const char *key, size_t len, uint64_t h) {
        size_t mask = m->n_slots - 1;

        if (m->n_slots == 0)
                return NULL;
        for (size_t i = h & mask;; i = (i + 1) & mask) {
                Slot *s = &m->slots[i];
                if (!s->key)
                        return NULL;
                if (s->hash == h && s->len == len && memcmp(s->key, key, len) == 0)
                        return s;
        }
}

void *strmap_get(const StrMap *m, const char *key, size_t len) {
        Slot *s = find(m, key, len, hash64_bytes(m->seed, key, len));
        return s ? s->value : NULL;
}

static void insert_slot(Slot *slots, size_t n_slots, const Slot *src) {
        size_t mask = n_slots - 1;

        for (size_t i = src->hash & mask;; i = (i + 1) & mask)
                if (!slots[i].key) {
                        slots[i] = *src;
                        return;
                }
}

static int grow(StrMap *m) {
        size_t n = m->n_slots ? m->n_slots * 2 : 16;
        Slot *slots = calloc(n, sizeof(Slot));

        if (!slots)
                return -ENOMEM;
        for (size_t i = 0; i < m->n_slots; i++)
                if (m->slots[i].key)
                        insert_slot(slots, n, &m->slots[i]);
        free(m->slots);
        m->slots = slots;
        m->n_slots = n;
        return 0;
}

int strmap_put(StrMap *m, const char *key, size_t len, void *value) {
        uint64_t h = hash64_bytes(m->seed, key, len);
        int r;

        if (find(m, key, len, h))
                return -EEXIST;
        /* Keep the load factor under 3/4 so probe chains stay short. */
        if ((m->n_items + 1) * 4 > m->n_slots * 3) {
                r = grow(m);
                if (r < 0)
                        return r;
        }
        insert_slot(m->slots, m->n_slots, &(Slot) { .key = key, .len = len, .hash = h, .value = value });
        m->n_items++;
        return 0;
}

void *strmap_remove(StrMap *m, const char *key, size_t len) {
        Slot *s = find(m, key, len, hash64_bytes(m->seed, key, len));
        size_t mask, i, j;
        void *value;

        if (!s)
                return NULL;
        value = s->value;
        mask = m->n_slots - 1;
        i = (size_t) (s - m->slots);
        /* Backward-shift deletion: move later members of the probe chain into the hole. */
        for (j = (i + 1) & mask; m->slots[j].key; j = (j + 1) & mask) {
                size_t home = m->slots[j].hash & mask;
                /* Can slot j move to i? Only if its home is not in (i, j] cyclically. */
                bool movable = (i <= j) ? (home <= i || home > j) : (home <= i && home > j);
                if (movable) {
                        m->slots[i] = m->slots[j];
                        i = j;
                }
        }
        m->slots[i] = (Slot) {};
        m->n_items--;
        return value;
}

size_t strmap_size(const StrMap *m) {
        return m->n_items;
}

void *strmap_iterate(const StrMap *m, size_t *state) {
        while (*state < m->n_slots) {
                Slot *s = &m->slots[(*state)++];
                if (s->key)
                        return s->value;
        }
        return NULL;
}

/* SPDX-License-Identifier: MIT */
#include <time.h>

#include "call-table.h"
#include "call.h"

static size_t hash_id(const char *id, size_t len) {
        uint64_t h = 14695981039346656037ULL; /* FNV-1a */

        for (size_t i = 0; i < len; i++) {
                h ^= (uint8_t) id[i];
                h *= 1099511628211ULL;
        }
        return (size_t) h;
}

int call_table_init(CallTable *t, size_t expected_calls) {
        pthread_condattr_t attr;
        size_t n = 16;
        int r;

        while (n < expected_calls * 2 && n < (1u << 20))
                n <<= 1;

        *t = (CallTable) { .n_buckets = n };
        t->buckets = calloc(n, sizeof(agentix_call *));
        if (!t->buckets)
                return -ENOMEM;

        r = -pthread_condattr_init(&attr);
        if (r == 0) {
                r = -pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
                if (r == 0)
                        r = -pthread_cond_init(&t->emptied, &attr);
                pthread_condattr_destroy(&attr);
        }
        if (r == 0) {
                r = -pthread_mutex_init(&t->lock, NULL);
                if (r < 0)
                        pthread_cond_destroy(&t->emptied);
        }
        if (r < 0)
                free(t->buckets);
        return r;
}

void call_table_done(CallTable *t) {
        free(t->buckets);
        pthread_cond_destroy(&t->emptied);
        pthread_mutex_destroy(&t->lock);
}

void call_table_lock(CallTable *t) {
        pthread_mutex_lock(&t->lock);
}

void call_table_unlock(CallTable *t) {
        pthread_mutex_unlock(&t->lock);
}

agentix_call *call_table_find_locked(CallTable *t, const char *id, size_t id_len) {
        for (agentix_call *c = t->buckets[hash_id(id, id_len) & (t->n_buckets - 1)]; c; c = c->table_next)
                if (c->id_len == id_len && memcmp(c->id, id, id_len) == 0)
                        return c;
        return NULL;
}

void call_table_add_locked(CallTable *t, agentix_call *c) {
        agentix_call **b = &t->buckets[hash_id(c->id, c->id_len) & (t->n_buckets - 1)];

        c->table_next = *b;
        *b = c;
        t->n_calls++;
}

void call_table_remove(CallTable *t, agentix_call *c) {
        pthread_mutex_lock(&t->lock);
        for (agentix_call **i = &t->buckets[hash_id(c->id, c->id_len) & (t->n_buckets - 1)]; *i;
             i = &(*i)->table_next)
                if (*i == c) {
                        *i = c->table_next;
                        c->table_next = NULL;
                        if (--t->n_calls == 0)
                                pthread_cond_broadcast(&t->emptied);
                        break;
                }
        pthread_mutex_unlock(&t->lock);
}

void call_table_foreach(CallTable *t, void (*fn)(agentix_call *c, void *userdata), void *userdata) {
        pthread_mutex_lock(&t->lock);
        for (size_t i = 0; i < t->n_buckets; i++)
                for (agentix_call *c = t->buckets[i]; c; c = c->table_next)
                        fn(c, userdata);
        pthread_mutex_unlock(&t->lock);
}

bool call_table_wait_empty(CallTable *t, unsigned timeout_ms) {
        struct timespec ts;
        int r = 0;
        bool empty;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        ts.tv_sec += timeout_ms / 1000;
        ts.tv_nsec += (long) (timeout_ms % 1000) * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
                ts.tv_sec++;
                ts.tv_nsec -= 1000000000L;
        }

        pthread_mutex_lock(&t->lock);
        while (t->n_calls > 0 && r != ETIMEDOUT)
                r = pthread_cond_timedwait(&t->emptied, &t->lock, &ts);
        empty = t->n_calls == 0;
        pthread_mutex_unlock(&t->lock);
        return empty;
}

/* SPDX-License-Identifier: MIT */
#pragma once

/* The calls running in this worker, by call_id: the reader thread adds calls and routes
 * IN/END_IN/CANCEL frames to them; a call's thread removes its call just before it sends the
 * terminal frame. One mutex guards the table; whoever holds it may touch the calls in it. */

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

typedef struct agentix_call agentix_call;

typedef struct CallTable {
        pthread_mutex_t lock;
        pthread_cond_t emptied;  /* broadcast when the last call leaves */
        agentix_call **buckets;
        size_t n_buckets;        /* power of two */
        size_t n_calls;
} CallTable;

int call_table_init(CallTable *t, size_t expected_calls);
void call_table_done(CallTable *t);

void call_table_lock(CallTable *t);
void call_table_unlock(CallTable *t);

/* With the lock held. */
agentix_call *call_table_find_locked(CallTable *t, const char *id, size_t id_len);
void call_table_add_locked(CallTable *t, agentix_call *c);

/* Takes the lock. */
void call_table_remove(CallTable *t, agentix_call *c);
/* Call fn on every call, with the lock held. */
void call_table_foreach(CallTable *t, void (*fn)(agentix_call *c, void *userdata), void *userdata);
/* Wait until the table is empty; false on timeout. */
bool call_table_wait_empty(CallTable *t, unsigned timeout_ms);

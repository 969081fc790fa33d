/* SPDX-License-Identifier: MIT */
#pragma once

/* The order in which calls of AGENTIX_FUNCTION_ORDERED functions start: the order they arrived.
 * The reader thread hands out tickets as calls arrive; each call's thread waits until the call
 * before it has passed (it took its place, with agentix_call_let_next_start(), or returned),
 * then runs. Without this, calls handed to pool threads an instant apart reach a module's
 * queue in whatever order the scheduler picks. */

#include <pthread.h>
#include <stdint.h>

typedef struct StartOrder {
        pthread_mutex_t lock;
        pthread_cond_t passed;
        uint64_t next_ticket; /* the next call's (reader thread only) */
        uint64_t serving;     /* the ticket whose call may start now */
} StartOrder;

#define START_ORDER_INIT                                                                              \
        { .lock = PTHREAD_MUTEX_INITIALIZER, .passed = PTHREAD_COND_INITIALIZER, .next_ticket = 0, \
          .serving = 0 }

/* On the reader thread, as a call arrives. */
uint64_t start_order_take(StartOrder *o);
/* The ticket just taken goes unused (its call never started): only before the next take. */
void start_order_return(StartOrder *o, uint64_t ticket);
/* On the call's thread: wait for its turn. */
void start_order_wait(StartOrder *o, uint64_t ticket);
/* The call has its place: the next may start. Once per ticket, after start_order_wait(). */
void start_order_pass(StartOrder *o, uint64_t ticket);

/* SPDX-License-Identifier: MIT */
#include <assert.h>

#include "start-order.h"

uint64_t start_order_take(StartOrder *o) {
        uint64_t t;

        pthread_mutex_lock(&o->lock);
        t = o->next_ticket++;
        pthread_mutex_unlock(&o->lock);
        return t;
}

void start_order_return(StartOrder *o, uint64_t ticket) {
        pthread_mutex_lock(&o->lock);
        assert(o->next_ticket == ticket + 1);
        o->next_ticket = ticket;
        pthread_mutex_unlock(&o->lock);
}

void start_order_wait(StartOrder *o, uint64_t ticket) {
        pthread_mutex_lock(&o->lock);
        while (o->serving != ticket)
                pthread_cond_wait(&o->passed, &o->lock);
        pthread_mutex_unlock(&o->lock);
}

void start_order_pass(StartOrder *o, uint64_t ticket) {
        pthread_mutex_lock(&o->lock);
        assert(o->serving == ticket);
        o->serving = ticket + 1;
        pthread_cond_broadcast(&o->passed);
        pthread_mutex_unlock(&o->lock);
}

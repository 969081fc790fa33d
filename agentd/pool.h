/* SPDX-License-Identifier: MIT */
#pragma once

/* Warm pools: for each pools.d/NAME.pool, agentd keeps Size= sandboxes made and answering
 * /health, owned by no one and seen by no one (no object, not listed; counted against
 * MaxSandboxes=). A create whose configuration the pool could have made in advance takes one
 * (lifecycle.c claims it); the pool makes another behind, at most POOL_MAKING_MAX at once over
 * all pools, backing off while the backend fails. A reload resizes a pool, or replaces its
 * members when its file changed; claimed sandboxes are never touched. */

#include "manager.h"

#define POOL_MAKING_MAX 2
#define POOL_BACKOFF_MIN_USEC (1ULL * 1000 * 1000)
#define POOL_BACKOFF_MAX_USEC (60ULL * 1000 * 1000)

typedef struct Pool {
        Manager *manager;
        char *name;                /* its file's NAME */
        const PoolConfig *config;  /* in m->config (re-pointed at each reload); NULL: its file went */
        SandboxConfig *template;   /* what its members are made with (the backend and runtime resolved) */
        Sandbox **ready;           /* made, answering, unclaimed; oldest first */
        size_t n_ready;
        Sandbox **making;          /* being made */
        size_t n_making;
        unsigned failures;         /* in a row: how long to back off */
        sd_event_source *retry;
        char *error;               /* the last failure (ListPools, and the log once) */
} Pool;

/* A create naming `pool` (c->pool): fill in what the pool's file fixes, as its members are made
 * with, so that the create claims a ready member or is made cold from the same spec. No such
 * pool: InvalidConfig naming it, -ENOENT. */
int pool_config_apply(Manager *m, SandboxConfig *c, sd_bus_error *error);

/* Make the pools agentd.conf's pools.d names (empty: pools_refill() fills them). */
int pools_start(Manager *m);
/* Is id one of the pools' members (ready or being made)? */
bool pools_has_member(Manager *m, const char *id);
/* Right after a reload put a new m->config in place (the pools' config pointers may point into
 * the old one, freed; nothing may look at them before): resize, replace or drop pools as their
 * files now say. */
void pools_sync(Manager *m);
/* Stop making, free the records (the containers stay: the next agentd adopts or removes them). */
void pools_free(Manager *m);

/* The pool a create with config could be answered from, and a ready member taken out of it
 * (NULL: none matches, or the one that does is empty). The caller claims it, or gives it back
 * to pool_member_discard(). Starts a refill either way. */
Sandbox *pools_take(Manager *m, const SandboxConfig *config, Pool **ret_pool);
/* A member that cannot be used (its claim failed): remove its container. */
void pool_member_discard(Pool *p, Sandbox *s);
/* A member found at adoption (no claim recorded for it): keep it when its pool still makes
 * sandboxes like it, else remove it. Takes s. */
void pools_adopt_member(Manager *m, Sandbox *s, const char *pool_name);
/* The backend says a container changed (die, destroy, …): a member it names that is no longer
 * running leaves its pool (and its container goes). False when id is no member. */
bool pools_member_event(Manager *m, const char *id, const char *action);
/* Remove every ready member (agentd stops with DeleteOnStop=yes); returns how many. */
size_t pools_drain(Manager *m);
/* How many sandboxes the pools hold or are making (MaxSandboxes= counts them). */
size_t pools_count(Manager *m);
/* Make what is missing (after a claim, a failure's backoff, a sandbox deleted). */
void pools_refill(Manager *m);

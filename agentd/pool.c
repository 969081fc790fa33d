/* SPDX-License-Identifier: MIT */
#include "agentd-errors.h"
#include "backend.h"
#include "log.h"
#include "pool.h"
#include "sandbox-tls.h"
#include "strv.h"

/* Pool members carry no expiry of their own: a claim sets the claimer's. Docker's label needs
 * a number; this one is far enough. */
#define POOL_MEMBER_TTL_SEC (100ULL * 365 * 24 * 3600)

/* ---- what a member is made with ---------------------------------------------------------- */

static const char *network_name(const char *n) {
        return n && !streq(n, "isolated") ? n : "isolated";
}

/* A template's default user in a configuration's env (NULL: none). */
static const char *default_user_of(const SandboxConfig *c) {
        for (char **e = c->env; e && *e; e++) {
                const char *v = startswith(*e, POOL_DEFAULT_USER_ENV "=");

                if (v)
                        return v;
        }
        return NULL;
}

/* Could a member made with pool's configuration serve a create asking for want? Only what a
 * pool fixes in advance counts; env, workdir, labels, ttl, setup and bind_to_caller are the
 * claim's to apply, but for the default user, which the runtime took at its start. */
static bool config_served_by(const SandboxConfig *pool, const SandboxConfig *want) {
        return streq_ptr(default_user_of(pool), default_user_of(want)) && streq(pool->image, want->image) && streq(pool->bundle, want->bundle) &&
               streq_ptr(pool->platform, want->platform) && streq_ptr(pool->backend, want->backend) &&
               streq(network_name(pool->network), network_name(want->network)) &&
               streq_ptr(pool->runtime, want->runtime) && pool->limits.cpus == want->limits.cpus &&
               pool->limits.memory == want->limits.memory && pool->limits.pids == want->limits.pids && !want->user &&
               !want->read_only && !want->egress;
}

static int strdup_or_null(char **field, const char *v) {
        if (v && !(*field = strdup(v)))
                return -ENOMEM;
        return 0;
}

/* A configuration as a pool file says it, with the backend and runtime a create naming neither
 * would get. */
static SandboxConfig *resolve(const PoolConfig *pc, const AgentdConfig *c) {
        const SandboxConfig *t = pc->sandbox;
        SandboxConfig *m = calloc(1, sizeof(*m));

        if (!m)
                return NULL;
        m->limits = t->limits;
        if (strdup_or_null(&m->image, t->image) < 0 || strdup_or_null(&m->bundle, t->bundle) < 0 ||
            strdup_or_null(&m->platform, t->platform) < 0 || strdup_or_null(&m->network, t->network) < 0 ||
            strdup_or_null(&m->runtime, t->runtime ?: c->default_runtime) < 0 ||
            strdup_or_null(&m->backend, c->default_backend) < 0)
                return sandbox_config_free(m);
        if (pc->default_user) {
                char *e;

                if (asprintf(&e, "%s=%s", POOL_DEFAULT_USER_ENV, pc->default_user) < 0 || strv_consume(&m->env, e) < 0)
                        return sandbox_config_free(m);
        }
        return m;
}

static void take_string(char **to, char **from) {
        free(*to);
        *to = *from;
        *from = NULL;
}

int pool_config_apply(Manager *m, SandboxConfig *c, sd_bus_error *error) {
        _cleanup_(sandbox_config_freep) SandboxConfig *t = NULL;

        for (size_t i = 0; i < m->config->n_pools; i++) {
                if (!streq(m->config->pools[i]->name, c->pool))
                        continue;
                t = resolve(m->config->pools[i], m->config);
                if (!t)
                        return -ENOMEM;
                c->limits = t->limits;
                take_string(&c->image, &t->image);
                take_string(&c->bundle, &t->bundle);
                take_string(&c->platform, &t->platform);
                take_string(&c->network, &t->network);
                take_string(&c->runtime, &t->runtime);
                take_string(&c->backend, &t->backend);
                /* A template's default user, in the environment the runtime reads at start: a
                 * cold create has it from here, a warm member from its own making. */
                for (char **e = t->env; e && *e; e++)
                        if (strv_extend(&c->env, *e) < 0)
                                return -ENOMEM;
                return 0;
        }
        (void) sd_bus_error_setf(error, AGENTD_ERROR_INVALID_CONFIG,
                                 "config key 'pool': there is no pool '%s' (no pools.d/%s.pool beside agentd.conf)", c->pool,
                                 c->pool);
        return -ENOENT;
}

static SandboxConfig *member_config(const Pool *p) {
        return resolve(p->config, p->manager->config);
}

/* ---- the lists --------------------------------------------------------------------------- */

static int list_add(Sandbox ***l, size_t *n, Sandbox *s) {
        Sandbox **nl = realloc(*l, (*n + 1) * sizeof(Sandbox *));

        if (!nl)
                return -ENOMEM;
        *l = nl;
        nl[(*n)++] = s;
        return 0;
}

static bool list_remove(Sandbox **l, size_t *n, Sandbox *s) {
        for (size_t i = 0; i < *n; i++)
                if (l[i] == s) {
                        memmove(l + i, l + i + 1, (*n - i - 1) * sizeof(Sandbox *));
                        (*n)--;
                        return true;
                }
        return false;
}

static size_t making_total(Manager *m) {
        size_t n = 0;

        for (size_t i = 0; i < m->n_pools; i++)
                n += m->pools[i]->n_making;
        return n;
}

size_t pools_count(Manager *m) {
        size_t n = 0;

        for (size_t i = 0; i < m->n_pools; i++)
                n += m->pools[i]->n_ready + m->pools[i]->n_making;
        return n;
}

static Pool *pool_find(Manager *m, const char *name) {
        for (size_t i = 0; i < m->n_pools; i++)
                if (m->pools[i]->config && streq(m->pools[i]->name, name))
                        return m->pools[i];
        return NULL;
}

/* The record only: its members are the caller's to have dealt with. */
static void pool_free(Pool *p) {
        sd_event_source_disable_unref(p->retry);
        sandbox_config_free(p->template);
        free(p->name);
        free(p->ready);
        free(p->making);
        free(p->error);
        free(p);
}

/* A pool whose file went, once its last member is settled. */
static void pool_free_if_done(Pool *p) {
        Manager *m = p->manager;

        if (p->config || p->n_making > 0 || p->n_ready > 0)
                return;
        for (size_t i = 0; i < m->n_pools; i++)
                if (m->pools[i] == p) {
                        memmove(m->pools + i, m->pools + i + 1, (m->n_pools - i - 1) * sizeof(Pool *));
                        m->n_pools--;
                        break;
                }
        pool_free(p);
}

/* ---- members ----------------------------------------------------------------------------- */

static void on_member_removed(void *userdata, const char *error_name, const char *message) {
        Sandbox *s = userdata;

        s->manager->pool_removing--;
        if (error_name)
                log_sandbox_warning(s, "Pool member %s: removing its container failed: %s", s->id, message);
        sandbox_free(s);
}

void pool_member_discard(Pool *p, Sandbox *s) {
        int r;

        s->pool = NULL;
        s->manager->pool_removing++;
        r = s->backend->ops->remove(s->backend->state, s->id, on_member_removed, s);
        if (r < 0) {
                log_sandbox_warning(s, "Pool member %s: cannot remove its container (%s); the next agentd will.", s->id,
                                    strerror(-r));
                s->manager->pool_removing--;
                sandbox_free(s);
        }
        if (p)
                pool_free_if_done(p);
}

static void schedule_retry(Pool *p);

static void member_failed(Pool *p, const char *message) {
        /* Said once per cause, not once per attempt. */
        if (!p->error || !streq(p->error, message)) {
                log_warning("Pool %s cannot make sandboxes (trying again, backing off): %s",
                            p->name, message);
                free(p->error);
                p->error = strdup(message);
        }
        p->failures++;
        schedule_retry(p);
}

static void member_ready(Sandbox *s, const char *error) {
        Pool *p = s->pool;
        Manager *m = p->manager;

        list_remove(p->making, &p->n_making, s);
        if (error) {
                _cleanup_free_ char *msg = NULL;

                if (asprintf(&msg, "cannot give a sandbox's runtime its TLS certificate: %s", error) < 0)
                        msg = NULL;
                member_failed(p, msg ?: "cannot give a sandbox's runtime its TLS certificate");
                pool_member_discard(p, s);
                pools_refill(m);
                return;
        }
        s->state = SANDBOX_RUNNING;
        /* Its pool's file changed or went while it was being made: not what a create would get. */
        if (!p->config || !config_served_by(p->template, s->config) || p->n_ready >= p->config->size ||
            list_add(&p->ready, &p->n_ready, s) < 0) {
                /* Made for a file that changed since: the next is made as it says now. Anything
                 * else would repeat: back off as from a failure. */
                bool changed = !p->config || !config_served_by(p->template, s->config);
                if (!changed)
                        member_failed(p, "a sandbox it made could not join it");
                pool_member_discard(p, s);
                pools_refill(m);
                return;
        }
        p->failures = 0;
        if (p->error) {
                log_info("Pool %s makes sandboxes again.", p->name);
                p->error = mfree(p->error);
        }
        log_sandbox_info(s, "Pool %s: sandbox %s is ready (%zu of %llu).", p->name, s->id, p->n_ready,
                         (unsigned long long) p->config->size);
        pools_refill(m);
}

static void on_member_made(void *userdata, const AgentdSandboxPlace *place, const char *error_name,
                           const char *message) {
        Sandbox *s = userdata;
        Pool *p = s->pool;
        Manager *m = p->manager;

        s->create_job = NULL;
        if (!error_name && sandbox_set_place(s, place) < 0) {
                error_name = "oom";
                message = "Out of memory";
        }
        if (error_name) {
                /* The backend removed what it made. */
                list_remove(p->making, &p->n_making, s);
                member_failed(p, message ?: "the backend gave no reason");
                sandbox_free(s);
                pool_free_if_done(p);
                pools_refill(m);
                return;
        }
        /* Still "making" while its runtime gets its certificate. */
        if (sandbox_tls_secure(s, false, member_ready) < 0)
                member_ready(s, "agentd has no runtime CA");
}

static int member_make(Pool *p) {
        Manager *m = p->manager;
        SandboxConfig *config = member_config(p);
        Backend *b;
        Sandbox *s;
        int r;

        if (!config)
                return -ENOMEM;
        b = manager_get_backend(m, config->backend, NULL);
        if (!b) {
                sandbox_config_free(config);
                return -ENXIO;
        }
        r = sandbox_new(config, 0, POOL_MEMBER_TTL_SEC, &s);
        if (r < 0) {
                sandbox_config_free(config);
                return r;
        }
        s->manager = m;
        s->backend = b;
        s->pool = p;
        s->pool_name = strdup(p->name);
        if (!s->pool_name || list_add(&p->making, &p->n_making, s) < 0) {
                sandbox_free(s);
                return -ENOMEM;
        }
        sandbox_fill_spec(s);
        log_sandbox_full(s, LOG_DEBUG, "Pool %s: making sandbox %s.", p->name, s->id);
        r = b->ops->create(b->state, &s->spec, on_member_made, s, &s->create_job);
        if (r < 0) {
                s->create_job = NULL;
                list_remove(p->making, &p->n_making, s);
                sandbox_free(s);
                return r;
        }
        return 0;
}

/* ---- filling ----------------------------------------------------------------------------- */

static int on_retry(sd_event_source *es, uint64_t usec, void *userdata) {
        Pool *p = userdata;

        p->retry = sd_event_source_disable_unref(p->retry);
        pools_refill(p->manager);
        return 0;
}

static void schedule_retry(Pool *p) {
        uint64_t delay = POOL_BACKOFF_MIN_USEC;

        for (unsigned i = 1; i < p->failures && delay < POOL_BACKOFF_MAX_USEC; i++)
                delay *= 2;
        delay = MIN(delay, POOL_BACKOFF_MAX_USEC);
        p->retry = sd_event_source_disable_unref(p->retry);
        if (sd_event_add_time(p->manager->event, &p->retry, CLOCK_MONOTONIC, now_usec() + delay,
                              100 * 1000, on_retry, p) < 0)
                log_warning("Pool %s: cannot arm its retry timer.", p->name);
}

/* The work itself, on its own turn of the loop: pools_refill() is called from the backend's
 * callbacks, where the backend cannot start another request (curl refuses recursive calls). */
static int on_refill(sd_event_source *es, void *userdata) {
        Manager *m = userdata;

        m->pool_refill = sd_event_source_disable_unref(m->pool_refill);
        for (size_t i = 0; i < m->n_pools; i++) {
                Pool *p = m->pools[i];

                /* Members that stopped while they waited (pools_member_event()) go first. */
                for (size_t j = p->n_ready; j > 0; j--) {
                        Sandbox *s = p->ready[j - 1];
                        if (s->state == SANDBOX_RUNNING)
                                continue;
                        list_remove(p->ready, &p->n_ready, s);
                        pool_member_discard(NULL, s);
                }

                /* A create may fail before it returns (and back the pool off): look again each time. */
                while (p->config && !p->retry && !m->stopping && p->n_ready + p->n_making < p->config->size &&
                       making_total(m) < POOL_MAKING_MAX &&
                       strmap_size(m->sandboxes) + pools_count(m) < m->config->max_sandboxes) {
                        int r = member_make(p);
                        if (r < 0) {
                                member_failed(p, strerror(-r));
                                break;
                        }
                }
        }
        for (size_t i = m->n_pools; i > 0; i--)
                pool_free_if_done(m->pools[i - 1]);
        return 0;
}

void pools_refill(Manager *m) {
        if (m->pool_refill || m->n_pools == 0)
                return;
        if (sd_event_add_defer(m->event, &m->pool_refill, on_refill, m) < 0)
                log_warning("Cannot schedule the pools' refill.");
}

/* ---- taking ------------------------------------------------------------------------------ */

Sandbox *pools_take(Manager *m, const SandboxConfig *config, Pool **ret_pool) {
        for (size_t i = 0; i < m->n_pools; i++) {
                Pool *p = m->pools[i];
                Sandbox *s;

                s = NULL;
                for (size_t j = 0; p->config && j < p->n_ready && !s; j++)
                        if (p->ready[j]->state == SANDBOX_RUNNING && config_served_by(p->ready[j]->config, config))
                                s = p->ready[j];
                if (!s)
                        continue;
                list_remove(p->ready, &p->n_ready, s);
                s->pool = NULL;
                *ret_pool = p;
                pools_refill(m);
                return s;
        }
        return NULL;
}

void pools_adopt_member(Manager *m, Sandbox *s, const char *pool_name) {
        Pool *p = pool_find(m, pool_name);

        s->manager = m;
        if (!p || !config_served_by(p->template, s->config) || p->n_ready >= p->config->size ||
            list_add(&p->ready, &p->n_ready, s) < 0) {
                log_sandbox_info(s, "Pool member %s of %s is not what the pool makes now: removing it.", s->id,
                                 pool_name);
                pool_member_discard(NULL, s);
                return;
        }
        s->pool = p;
        log_sandbox_info(s, "Pool %s: sandbox %s adopted (%zu of %llu ready).", pool_name, s->id, p->n_ready,
                         (unsigned long long) p->config->size);
}

/* ---- the pools themselves ---------------------------------------------------------------- */

static int pool_add(Manager *m, const PoolConfig *config) {
        Pool *p = calloc(1, sizeof(*p)), **l;

        if (!p)
                return -ENOMEM;
        l = realloc(m->pools, (m->n_pools + 1) * sizeof(Pool *));
        if (!l) {
                free(p);
                return -ENOMEM;
        }
        m->pools = l;
        *p = (Pool) { .manager = m, .config = config, .template = resolve(config, m->config),
                      .name = strdup(config->name) };
        if (!p->template || !p->name) {
                sandbox_config_free(p->template);
                free(p->name);
                free(p);
                return -ENOMEM;
        }
        m->pools[m->n_pools++] = p;
        log_info("Pool %s: keeping %llu sandbox(es) of %s with bundle %s ready.", config->name,
                 (unsigned long long) config->size, config->sandbox->image, config->sandbox->bundle);
        return 0;
}

int pools_start(Manager *m) {
        for (size_t i = 0; i < m->config->n_pools; i++) {
                int r = pool_add(m, m->config->pools[i]);
                if (r < 0)
                        return r;
        }
        return 0;
}

bool pools_has_member(Manager *m, const char *id) {
        for (size_t i = 0; i < m->n_pools; i++) {
                Pool *p = m->pools[i];
                for (size_t j = 0; j < p->n_ready; j++)
                        if (streq(p->ready[j]->id, id))
                                return true;
                for (size_t j = 0; j < p->n_making; j++)
                        if (streq(p->making[j]->id, id))
                                return true;
        }
        return false;
}

/* Its members beyond keep (the newest first: the oldest have waited longest and are as good). */
static void pool_shrink(Pool *p, size_t keep) {
        while (p->n_ready > keep) {
                Sandbox *s = p->ready[p->n_ready - 1];
                p->n_ready--;
                pool_member_discard(NULL, s);
        }
}

void pools_sync(Manager *m) {
        /* Pools whose file changed or went: their ready members go; those being made go when made. */
        for (size_t i = 0; i < m->n_pools; i++) {
                Pool *p = m->pools[i];
                const PoolConfig *now = NULL;

                /* p->config may point into the configuration a reload just freed: match by name. */
                for (size_t j = 0; p->config && j < m->config->n_pools; j++)
                        if (streq(m->config->pools[j]->name, p->name))
                                now = m->config->pools[j];
                if (!now) {
                        if (p->config) /* (only its truth value is looked at) */
                                log_info("Pool %s: its file is gone; removing its %zu ready sandbox(es).",
                                         p->name, p->n_ready);
                        p->config = NULL;
                        pool_shrink(p, 0);
                        continue;
                }
                SandboxConfig *t = resolve(now, m->config);
                if (!t) {
                        log_oom();
                        continue;
                }
                sandbox_config_free(p->template);
                p->template = t;
                p->config = now;
                if (p->n_ready > 0 && !config_served_by(t, p->ready[0]->config)) {
                        log_info("Pool %s: its configuration changed; replacing its sandboxes.", now->name);
                        pool_shrink(p, 0);
                } else if (p->n_ready > now->size)
                        pool_shrink(p, now->size);
                p->failures = 0;
                p->retry = sd_event_source_disable_unref(p->retry);
                p->error = mfree(p->error);
        }
        for (size_t j = 0; j < m->config->n_pools; j++)
                if (!pool_find(m, m->config->pools[j]->name))
                        (void) pool_add(m, m->config->pools[j]);
        /* Settled pools without a file go now. */
        for (size_t i = m->n_pools; i > 0; i--)
                pool_free_if_done(m->pools[i - 1]);
        pools_refill(m);
}

void pools_free(Manager *m) {
        for (size_t i = 0; i < m->n_pools; i++) {
                Pool *p = m->pools[i];

                for (size_t j = 0; j < p->n_making; j++) {
                        Sandbox *s = p->making[j];
                        if (s->create_job)
                                s->backend->ops->cancel(s->create_job);
                        sandbox_free(s);
                }
                for (size_t j = 0; j < p->n_ready; j++)
                        sandbox_free(p->ready[j]);
                pool_free(p);
        }
        free(m->pools);
        m->pools = NULL;
        m->n_pools = 0;
        m->pool_refill = sd_event_source_disable_unref(m->pool_refill);
}

bool pools_member_event(Manager *m, const char *id, const char *action) {
        for (size_t i = 0; i < m->n_pools; i++) {
                Pool *p = m->pools[i];
                for (size_t j = 0; j < p->n_ready; j++) {
                        Sandbox *s = p->ready[j];
                        if (!streq(s->id, id))
                                continue;
                        if ((streq(action, "die") || streq(action, "fail") || streq(action, "destroy")) &&
                            s->state == SANDBOX_RUNNING) {
                                log_sandbox_warning(s, "Pool %s: sandbox %s stopped (%s) while it waited: replacing it.",
                                                    p->name, s->id, action);
                                s->state = SANDBOX_EXITED; /* the refill removes it */
                                pools_refill(m);
                        }
                        return true;
                }
                for (size_t j = 0; j < p->n_making; j++)
                        if (streq(p->making[j]->id, id))
                                return true; /* its create sees it */
        }
        return false;
}

size_t pools_drain(Manager *m) {
        size_t n = 0;

        for (size_t i = m->n_pools; i > 0; i--) {
                Pool *p = m->pools[i - 1];
                n += p->n_ready;
                p->config = NULL; /* and no refill */
                pool_shrink(p, 0);
        }
        return n;
}

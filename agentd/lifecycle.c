/* SPDX-License-Identifier: MIT */
#include <malloc.h>
#include <systemd/sd-daemon.h>
#include <time.h>

#include "agentd-errors.h"
#include "backend.h"
#include "lifecycle.h"
#include "quota.h"
#include "log.h"
#include "claim-state.h"
#include "pool.h"
#include "sandbox-claim.h"
#include "sandbox-setup.h"
#include "hibernate.h"
#include "sandbox-state.h"
#include "sandbox-tls.h"
#include "runtime-tls.h"
#include "strv.h"

/* ---- signals ----------------------------------------------------------------------------- */

static void emit_new(Manager *m, Sandbox *s) {
        (void) sd_bus_emit_signal(m->bus, MANAGER_PATH, MANAGER_INTERFACE, "SandboxNew", "so", s->id, s->path);
}

static void set_state(Manager *m, Sandbox *s, SandboxState state) {
        sandbox_set_state(s, state);
}

/* Stop making s (the backend's job, its setup command), if that is still going on. */
static void stop_making(Sandbox *s) {
        if (s->create_job)
                s->backend->ops->cancel(s->create_job);
        s->create_job = NULL;
        s->setup = sandbox_setup_free(s->setup);
        s->tls_handover = runtime_tls_free(s->tls_handover);
        s->tls_done = NULL;
}

/* A burst of creates leaves the heap as large as its peak (each Docker request and /health
 * probe holds curl's buffers while in flight), and glibc keeps what it cannot return from the
 * top. Once nothing is in flight, give the free pages back, as sd_event_trim_memory() does in
 * newer systemd. */
static void trim_when_idle(Manager *m) {
        size_t state = 0;
        Sandbox *s;

        while ((s = strmap_iterate(m->sandboxes, &state)))
                if (s->state == SANDBOX_CREATING || s->state == SANDBOX_REMOVING)
                        return;
        (void) malloc_trim(0);
}

/* The sandbox is gone: unregister it, say so, free it. */
static void drop(Manager *m, Sandbox *s) {
        stop_making(s);
        hibernate_drop(s);
        s->claim = sandbox_claim_free(s->claim);
        if (s->pool_name)
                (void) claim_state_remove(s->id);
        manager_remove_sandbox(m, s);
        (void) sd_bus_emit_signal(m->bus, MANAGER_PATH, MANAGER_INTERFACE, "SandboxRemoved", "so", s->id, s->path);
        sandbox_free(s);
}

/* ---- expiry ------------------------------------------------------------------------------ */

static uint64_t now_realtime_usec(void) {
        struct timespec ts;

        clock_gettime(CLOCK_REALTIME, &ts);
        return (uint64_t) ts.tv_sec * 1000000ULL + (uint64_t) ts.tv_nsec / 1000ULL;
}

static void schedule_reaper(Manager *m);

static bool is_expired(Sandbox *s, void *userdata) {
        return s->expires_at <= *(uint64_t *) userdata && s->state != SANDBOX_REMOVING;
}

/* An expired sandbox whose hibernation (OnExpiry=hibernate) failed. */
static void delete_expired(Manager *m, Sandbox *s) {
        (void) lifecycle_delete(m, s, NULL);
}

static int on_reaper(sd_event_source *es, uint64_t usec, void *userdata) {
        Manager *m = userdata;
        uint64_t now = now_realtime_usec();
        Sandbox *s;

        while ((s = manager_find_sandbox(m, is_expired, &now))) {
                char id[32];

                if (hibernate_on_expiry(m, s, now, delete_expired))
                        continue; /* it expires again later */
                log_sandbox_info(s, "Sandbox %s expired: deleting it.", s->id);
                snprintf(id, sizeof(id), "%s", s->id);
                (void) lifecycle_delete(m, s, NULL);
                s = manager_get_sandbox(m, id);
                if (s && s->state != SANDBOX_REMOVING)
                        /* The backend would not remove it now: try again in a minute. */
                        s->expires_at = now + 60 * 1000000ULL;
        }
        schedule_reaper(m);
        return 0;
}

static void schedule_reaper(Manager *m) {
        uint64_t next = UINT64_MAX;
        size_t state = 0;
        Sandbox *s;

        while ((s = strmap_iterate(m->sandboxes, &state)))
                if (s->state != SANDBOX_REMOVING && s->expires_at < next)
                        next = s->expires_at;
        if (next == UINT64_MAX) {
                if (m->reaper)
                        (void) sd_event_source_set_enabled(m->reaper, SD_EVENT_OFF);
                return;
        }
        if (!m->reaper) {
                if (sd_event_add_time(m->event, &m->reaper, CLOCK_REALTIME, next, 100 * 1000, on_reaper, m) < 0)
                        log_warning("Cannot arm the reaper of expired sandboxes.");
                return;
        }
        (void) sd_event_source_set_time(m->reaper, next);
        (void) sd_event_source_set_enabled(m->reaper, SD_EVENT_ONESHOT);
}

int lifecycle_extend(Manager *m, Sandbox *s, uint64_t seconds, sd_bus_error *error) {
        uint64_t max = m->config->max_ttl_sec, now = now_realtime_usec();

        if (max != AGENTD_UNLIMITED && s->expires_at + seconds * 1000000ULL > now + max * 1000000ULL)
                return sd_bus_error_setf(error, AGENTD_ERROR_INVALID_CONFIG,
                                         "Extend(%llu) would set the expiry %llu s from now; this host allows at most "
                                         "%llu s (MaxTTL= in agentd.conf).", (unsigned long long) seconds,
                                         (unsigned long long) ((s->expires_at > now ? s->expires_at - now : 0) / 1000000 +
                                                               seconds), (unsigned long long) max);
        s->expires_at += seconds * 1000000ULL;
        (void) sd_bus_emit_properties_changed(m->bus, s->path, SANDBOX_INTERFACE, "ExpiresAt", NULL);
        schedule_reaper(m);
        sandbox_tls_renew(s); /* its certificate ends with it */
        return 0;
}

int lifecycle_set_ttl(Manager *m, Sandbox *s, uint64_t seconds, sd_bus_error *error) {
        uint64_t max = m->config->max_ttl_sec;

        if (max != AGENTD_UNLIMITED && seconds > max)
                return sd_bus_error_setf(error, AGENTD_ERROR_INVALID_CONFIG,
                                         "SetTTL(%llu): this host allows at most %llu s (MaxTTL= in agentd.conf).",
                                         (unsigned long long) seconds, (unsigned long long) max);
        s->expires_at = now_realtime_usec() + seconds * 1000000ULL;
        (void) sd_bus_emit_properties_changed(m->bus, s->path, SANDBOX_INTERFACE, "ExpiresAt", NULL);
        schedule_reaper(m);
        sandbox_tls_renew(s); /* its certificate ends with it */
        return 0;
}

/* ---- create ------------------------------------------------------------------------------ */

static void create_done(Sandbox *s, const char *error_name, const char *message);

/* A create answered (a member made for a warm pool is no create of anyone's): its source,
 * result and, when it worked, how long it took from the call. */
static void count_create(Manager *m, Sandbox *s, bool ok) {
        if (s->pool)
                return;
        if (!ok)
                metrics_backend_error(&m->metrics, s->backend->name);
        metrics_create_done(&m->metrics, s->pool_name ? METRICS_POOL : METRICS_COLD, ok,
                            (double) (now_realtime_usec() - s->created_at) / 1e6);
}

/* The container of a failed create is gone: answer with the failure. */
static void on_failed_removed(void *userdata, const char *error_name, const char *message) {
        Sandbox *s = userdata;
        sd_bus_message *call = TAKE_PTR(s->create_call);

        count_create(s->manager, s, false);

        if (call)
                (void) sd_bus_reply_method_errorf(call, s->failure_name, "%s", s->failure_message);
        sd_bus_message_unref(call);
        drop(s->manager, s);
}

static int backend_remove(Sandbox *s, agentd_removed_t removed) {
        return s->backend->ops->remove(s->backend->state, s->id, removed, s);
}

/* Its container runs but it cannot be used: remove it, then answer the create with error. */
static void start_failed(Sandbox *s, const char *error) {
        Manager *m = s->manager;

        log_sandbox_warning(s, "Sandbox %s: %s", s->id, error);
        s->failure_name = strdup(AGENTD_ERROR_START_FAILED);
        s->failure_message = strdup(error);
        set_state(m, s, SANDBOX_REMOVING);
        if (!s->failure_name || !s->failure_message || backend_remove(s, on_failed_removed) < 0)
                create_done(s, AGENTD_ERROR_START_FAILED, error);
}

static void on_setup_done(SandboxSetup *setup, const char *error, void *userdata) {
        Manager *m = userdata;
        Sandbox *s = NULL;
        size_t state = 0;

        /* Find the sandbox whose setup this is. */
        while ((s = strmap_iterate(m->sandboxes, &state)) && s->setup != setup)
                ;
        if (!s)
                return;
        s->setup = sandbox_setup_free(s->setup);
        s->setup_done = true;
        if (!error) {
                create_done(s, NULL, NULL);
                return;
        }
        start_failed(s, error);
}

static void create_done(Sandbox *s, const char *error_name, const char *message) {
        Manager *m = s->manager;
        sd_bus_message *call;

        if (!error_name && s->config->setup && !s->setup_done) {
                /* Ready: run the setup command before the caller hears of it. */
                if (sandbox_setup_run(m->event, s->runtime_url, s->id, manager_runtime_ca_pem(m), s->token, s->config->setup, on_setup_done, m,
                                      &s->setup) >= 0)
                        return;
                error_name = AGENTD_ERROR_START_FAILED;
                message = "Cannot start the setup command";
        }
        call = TAKE_PTR(s->create_call);
        count_create(m, s, !error_name);
        if (error_name) {
                log_sandbox_warning(s, "Sandbox %s: create failed: %s", s->id, message);
                if (call)
                        (void) sd_bus_reply_method_errorf(call, error_name, "%s", message);
                sd_bus_message_unref(call);
                drop(m, s);
                return;
        }
        set_state(m, s, SANDBOX_RUNNING);
        schedule_reaper(m);
        if (call)
                (void) sd_bus_reply_method_return(call, "os", s->path, s->id);
        sd_bus_message_unref(call);
        trim_when_idle(m);
}

/* Its runtime has its TLS certificate (or needs none). */
static void on_secured(Sandbox *s, const char *error) {
        _cleanup_free_ char *msg = NULL;

        if (!error) {
                create_done(s, NULL, NULL);
                return;
        }
        if (asprintf(&msg, "Cannot give the sandbox's runtime its TLS certificate: %s", error) < 0)
                msg = NULL;
        start_failed(s, msg ?: "Cannot give the sandbox's runtime its TLS certificate");
}

/* The backend made it (its runtime answers /health), or failed and removed what it made. */
static void on_made(void *userdata, const AgentdSandboxPlace *place, const char *error_name, const char *message) {
        Sandbox *s = userdata;

        s->create_job = NULL;
        if (!error_name && sandbox_set_place(s, place) < 0) {
                error_name = AGENTD_ERROR_START_FAILED;
                message = "Out of memory";
        }
        if (error_name) {
                create_done(s, error_name, message ?: "The backend gave no reason");
                return;
        }
        (void) sd_bus_emit_properties_changed(s->manager->bus, s->path, SANDBOX_INTERFACE, "RuntimeUrl", "ContainerId",
                                              NULL);
        if (sandbox_tls_secure(s, false, on_secured) < 0)
                start_failed(s, "Cannot give the sandbox's runtime its TLS certificate: agentd has no runtime CA");
}

static int on_caller_gone(sd_bus_track *track, void *userdata) {
        Manager *m = userdata;
        size_t state = 0;
        Sandbox *s;

        while ((s = strmap_iterate(m->sandboxes, &state)) && s->track != track)
                ;
        if (!s)
                return 0;
        log_sandbox_info(s, "Sandbox %s: its creator left the bus (bind_to_caller): deleting it.", s->id);
        s->track = sd_bus_track_unref(s->track);
        (void) lifecycle_delete(m, s, NULL);
        return 0;
}

/* bind_to_caller: follow the creator of call on the bus. */
static int bind_to_creator(Manager *m, Sandbox *s, sd_bus_message *call) {
        int r = sd_bus_track_new(m->bus, &s->track, on_caller_gone, m);

        if (r >= 0)
                r = sd_bus_track_add_sender(s->track, call);
        if (r >= 0 && !(s->bound_to = strdup(sd_bus_message_get_sender(call))))
                r = -ENOMEM;
        return r;
}

static int create_cold(Manager *m, Backend *backend, SandboxConfig *config, uid_t owner, sd_bus_message *call,
                       sd_bus_error *error);
static void on_removed(void *userdata, const char *error_name, const char *message);

static void on_claimed(SandboxClaim *claim, const char *error, bool already_claimed, void *userdata) {
        Sandbox *s = userdata;
        Manager *m = s->manager;

        s->claim = sandbox_claim_free(s->claim);
        if (error) {
                /* Its runtime went in the moment between the pool and the claim: the caller
                 * should not pay for that. Make one as if no pool had had one; this one goes. */
                _cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;
                _cleanup_(sd_bus_message_unrefp) sd_bus_message *call = TAKE_PTR(s->create_call);
                SandboxConfig *config = sandbox_config_dup(s->config);
                Backend *backend = s->backend;
                uid_t owner = s->owner;

                log_sandbox_warning(s, "Sandbox %s: claiming it from pool %s failed (%s): making one for the create "
                                    "instead.", s->id, s->pool_name, error);
                set_state(m, s, SANDBOX_REMOVING);
                if (backend_remove(s, on_removed) < 0)
                        drop(m, s);
                if (!config) {
                        if (call)
                                (void) sd_bus_reply_method_errorf(call, AGENTD_ERROR_START_FAILED, "%s", error);
                        return;
                }
                if (!call) { /* (no caller: nothing to make it for) */
                        sandbox_config_free(config);
                        return;
                }
                if (create_cold(m, backend, config, owner, call, &e) < 0)
                        (void) sd_bus_reply_method_error(call, sd_bus_error_is_set(&e) ? &e :
                                                         &SD_BUS_ERROR_MAKE_CONST(AGENTD_ERROR_START_FAILED, "Out of memory"));
                return;
        }
        log_sandbox_info(s, "Sandbox %s: claimed from pool %s for uid %u.", s->id, s->pool_name, (unsigned) s->owner);
        sandbox_tls_renew(s); /* a member's certificate ends long after the claimer's TTL */
        create_done(s, NULL, NULL);
}

/* A ready member of pool p serves the create: it becomes the caller's, with a token minted now
 * (the start token goes to the runtime once, in the claim, and nowhere else), its TTL from now,
 * and the create's env, workdir, labels, setup and bind_to_caller. What the claim decides is
 * written down before the runtime hears of it (claim-state.h). */
static int claim(Manager *m, Sandbox *s, SandboxConfig *config, uid_t owner, sd_bus_message *call,
                 sd_bus_error *error) {
        _cleanup_free_ char *start_token = TAKE_PTR(s->token);
        uint64_t now = now_realtime_usec();
        ClaimState st;
        int r;

        sandbox_config_free(s->config);
        s->config = config;
        s->owner = owner;
        s->created_at = now;
        s->expires_at = now + (config->ttl_sec ?: m->config->default_ttl_sec) * 1000000ULL;
        s->state = SANDBOX_CREATING;
        r = sandbox_new_token(&s->token);
        if (r >= 0 && config->bind_to_caller)
                r = bind_to_creator(m, s, call);
        if (r >= 0) {
                st = (ClaimState) { .id = s->id, .owner = owner, .token = s->token, .created_at = s->created_at,
                                    .expires_at = s->expires_at, .pool = s->pool_name, .bound_to = s->bound_to,
                                    .env = config->env, .workdir = config->workdir, .labels = config->labels };
                r = claim_state_save(&st);
                if (r < 0)
                        log_sandbox_warning(s, "Sandbox %s: cannot record its claim in %s: %s", s->id,
                                            claim_state_dir(), strerror(-r));
        }
        if (r >= 0)
                r = manager_add_sandbox(m, s);
        if (r < 0) {
                if (start_token)
                        explicit_bzero(start_token, strlen(start_token));
                pool_member_discard(NULL, s);
                return sd_bus_error_setf(error, AGENTD_ERROR_START_FAILED, "Cannot claim a pooled sandbox: %s",
                                         strerror(-r));
        }
        sandbox_fill_spec(s);
        emit_new(m, s);
        s->create_call = sd_bus_message_ref(call);
        r = sandbox_claim_run(m->event, s->runtime_url, s->id, manager_runtime_ca_pem(m), start_token, s->token, config->env, config->workdir, on_claimed,
                              s, &s->claim);
        explicit_bzero(start_token, strlen(start_token));
        if (r < 0)
                on_claimed(NULL, "Cannot start the claim", false, s);
        return 0;
}

int lifecycle_create(Manager *m, SandboxConfig *config, uid_t owner, sd_bus_message *call, sd_bus_error *error) {
        Backend *backend;

        backend = manager_get_backend(m, config->backend, error);
        if (!backend) {
                sandbox_config_free(config);
                return -ENXIO;
        }
        if (manager_count_sandboxes_of(m, owner) >= m->config->max_sandboxes_per_user) {
                sandbox_config_free(config);
                return sd_bus_error_setf(error, AGENTD_ERROR_TOO_MANY_SANDBOXES,
                                         "uid %u has %llu sandboxes, the most one user may have (MaxSandboxesPerUser= in "
                                         "agentd.conf): delete one first.", (unsigned) owner,
                                         (unsigned long long) m->config->max_sandboxes_per_user);
        }
        /* The owner's quotas count a claim from a pool as any create. */
        if (quota_check_create(m, owner, config, error) < 0) {
                sandbox_config_free(config);
                return -EDQUOT;
        }
        {
                Pool *pool = NULL;
                Sandbox *member = pools_take(m, config, &pool);
                if (member)
                        return claim(m, member, config, owner, call, error);
        }
        return create_cold(m, backend, config, owner, call, error);
}

/* Made for this create (no pool had one ready, or a claim failed). */
static int create_cold(Manager *m, Backend *backend, SandboxConfig *config, uid_t owner, sd_bus_message *call,
                       sd_bus_error *error) {
        Sandbox *s;
        int r;

        /* The pools' sandboxes count: they are made and hold their resources. */
        if (strmap_size(m->sandboxes) + pools_count(m) >= m->config->max_sandboxes) {
                sandbox_config_free(config);
                return sd_bus_error_setf(error, AGENTD_ERROR_TOO_MANY_SANDBOXES,
                                         "agentd runs %llu sandboxes, the most it may (MaxSandboxes= in agentd.conf, "
                                         "warm pools included): delete one first.",
                                         (unsigned long long) m->config->max_sandboxes);
        }
        r = sandbox_new(config, owner, m->config->default_ttl_sec, &s);
        if (r < 0) {
                sandbox_config_free(config);
                return r;
        }
        while ((r = manager_add_sandbox(m, s)) == -EEXIST) {
                /* 64 random bits met a live id: draw again (keeping the config). */
                s->config = NULL;
                sandbox_free(s);
                r = sandbox_new(config, owner, m->config->default_ttl_sec, &s);
                if (r < 0) {
                        sandbox_config_free(config);
                        return r;
                }
        }
        if (r < 0) {
                sandbox_free(s);
                return r;
        }
        if (config->bind_to_caller) {
                r = bind_to_creator(m, s, call);
                if (r < 0) {
                        manager_remove_sandbox(m, s);
                        sandbox_free(s);
                        return r;
                }
        }
        s->manager = m;
        s->backend = backend;
        log_sandbox_info(s, "Sandbox %s: creating for uid %u on %s (image %s, bundle %s).", s->id, (unsigned) owner,
                         backend->name, config->image, config->bundle);
        sandbox_fill_spec(s);
        emit_new(m, s);
        /* Answered by create_done(), which may run before this returns (and free s). */
        s->create_call = sd_bus_message_ref(call);
        r = backend->ops->create(backend->state, &s->spec, on_made, s, &s->create_job);
        if (r < 0) {
                s->create_job = NULL;
                s->create_call = sd_bus_message_unref(s->create_call); /* the caller gets r */
                drop(m, s);
                return r;
        }
        return 0;
}

/* ---- delete ------------------------------------------------------------------------------ */

static bool bundle_in_use(const char *bundle_id, void *userdata) {
        Manager *m = userdata;
        size_t state = 0;
        Sandbox *s;

        while ((s = strmap_iterate(m->sandboxes, &state)))
                if (s->bundle_id && streq(s->bundle_id, bundle_id) && s->state != SANDBOX_REMOVING)
                        return true;
        return false;
}

static void prune(Manager *m, Backend *b) {
        if (b->state && b->ops->prune)
                b->ops->prune(b->state, bundle_in_use, m);
}

static void on_removed(void *userdata, const char *error_name, const char *message) {
        Sandbox *s = userdata;
        Manager *m = s->manager;
        Backend *b = s->backend;

        if (error_name) {
                metrics_backend_error(&m->metrics, b->name);
                log_sandbox_warning(s, "Sandbox %s: removing its container failed: %s", s->id, message);
                for (size_t i = 0; i < s->n_delete_calls; i++) {
                        (void) sd_bus_reply_method_errorf(s->delete_calls[i], error_name, "%s", message);
                        sd_bus_message_unref(s->delete_calls[i]);
                }
                s->n_delete_calls = 0;
                set_state(m, s, SANDBOX_FAILED);
                return;
        }
        drop(m, s);
        /* A carrier whose bundle was rebuilt (its image has no tag left) and that no sandbox
         * uses any more goes too. */
        prune(m, b);
        trim_when_idle(m);
}

/* A create stopped in the middle may have a request the backend's service still carries out
 * after the remove (Docker finishes a container create whose client went away): remove once
 * more, a little later. */
#define LATE_REMOVE_USEC (5ULL * 1000 * 1000)

typedef struct LateRemove {
        Backend *backend;
        char id[32];
} LateRemove;

static int on_late_remove(sd_event_source *es, uint64_t usec, void *userdata) {
        LateRemove *l = userdata;

        (void) l->backend->ops->remove(l->backend->state, l->id, NULL, NULL);
        /* No longer floating, the source has no reference left: it and l go after this call. */
        (void) sd_event_source_set_floating(es, false);
        return 0;
}

static void remove_again_later(Manager *m, Sandbox *s) {
        sd_event_source *es = NULL;
        LateRemove *l = calloc(1, sizeof(*l));

        if (!l)
                return;
        l->backend = s->backend;
        snprintf(l->id, sizeof(l->id), "%s", s->id);
        if (sd_event_add_time_relative(m->event, &es, CLOCK_MONOTONIC, LATE_REMOVE_USEC, 0, on_late_remove, l) < 0) {
                free(l);
                return;
        }
        /* Floating: freed after it fired, or with the loop when agentd stops first. */
        (void) sd_event_source_set_destroy_callback(es, free);
        (void) sd_event_source_set_floating(es, true);
        sd_event_source_unref(es);
}

int lifecycle_delete(Manager *m, Sandbox *s, sd_bus_message *call) {
        bool first = s->state != SANDBOX_REMOVING;

        if (call) {
                sd_bus_message **l = realloc(s->delete_calls, (s->n_delete_calls + 1) * sizeof(*l));
                if (!l)
                        return -ENOMEM;
                s->delete_calls = l;
                s->delete_calls[s->n_delete_calls++] = sd_bus_message_ref(call);
        }
        if (!first)
                return 0; /* already on its way: answered with the others */
        if (s->create_job || s->setup) {
                /* Still being made: stop that, and remove whatever it made. */
                if (s->create_job)
                        remove_again_later(m, s);
                stop_making(s);
                if (s->create_call) {
                        (void) sd_bus_reply_method_errorf(s->create_call, AGENTD_ERROR_START_FAILED,
                                                          "Sandbox %s was deleted while it was being created.", s->id);
                        s->create_call = sd_bus_message_unref(s->create_call);
                }
        }
        hibernate_drop(s); /* its caller is told; what the backend still does finds no sandbox */
        set_state(m, s, SANDBOX_REMOVING);
        if (backend_remove(s, on_removed) < 0)
                on_removed(s, AGENTD_ERROR_BACKEND_UNAVAILABLE, "Cannot reach the backend to remove the sandbox.");
        return 0;
}

/* ---- the backends' events ---------------------------------------------------------------- */

static void reconcile(Backend *b);

/* A sandbox's container changed outside agentd's own calls. */
static void on_backend_event(void *userdata, const char *id, const char *action) {
        Backend *b = userdata;
        Manager *m = b->owner;
        Sandbox *s;

        if (!id) {
                if (streq(action, "resync"))
                        reconcile(b);
                return;
        }
        s = manager_get_sandbox(m, id);
        if (!s && pools_member_event(m, id, action))
                return;
        if (!s && b->adopting) {
                /* The walk's listing may not have it yet, or may say what was true before. */
                char *e;

                if (b->n_walk_events >= BACKEND_WALK_EVENTS_MAX) {
                        b->adopt_again = true; /* too many to keep: look again after this walk */
                        return;
                }
                if (asprintf(&e, "%s %s", id, action) < 0 || strv_consume_n(&b->walk_events, &b->n_walk_events, e) < 0)
                        b->adopt_again = true;
                return;
        }
        if (!s || s->backend != b || s->state == SANDBOX_CREATING || s->state == SANDBOX_REMOVING)
                return; /* not ours, or our own doing */
        if ((sandbox_live_in_progress(s) || s->state == SANDBOX_HIBERNATED) && !streq(action, "destroy"))
                return; /* a checkpoint stops it, a wake starts it: agentd's own doing */
        if (streq(action, "die"))
                set_state(m, s, SANDBOX_EXITED);
        else if (streq(action, "fail")) {
                log_sandbox_warning(s, "Sandbox %s failed: its backend lost it (%s backend).", s->id, b->name);
                set_state(m, s, SANDBOX_FAILED);
        } else if (streq(action, "start") || streq(action, "unpause"))
                set_state(m, s, SANDBOX_RUNNING);
        else if (streq(action, "pause"))
                set_state(m, s, SANDBOX_PAUSED);
        else if (streq(action, "oom"))
                log_sandbox_warning(s, "Sandbox %s ran out of memory (its limit is %llu bytes).", s->id,
                            (unsigned long long) s->config->limits.memory);
        else if (streq(action, "destroy")) {
                log_sandbox_info(s, "Sandbox %s: its container was removed outside agentd.", s->id);
                drop(m, s);
        }
}

/* ---- pause and resume -------------------------------------------------------------------- */

typedef struct PauseCall {
        Manager *manager;
        char *id;
        bool pause;
        sd_bus_message *call;
} PauseCall;

static void on_paused(void *userdata, const char *error_name, const char *message) {
        PauseCall *p = userdata;
        Sandbox *s = manager_get_sandbox(p->manager, p->id);

        if (error_name)
                (void) sd_bus_reply_method_errorf(p->call, error_name, "%s", message ?: "The backend gave no reason");
        else {
                /* Docker's event may have said so first; a delete since then is left alone. */
                if (s && sandbox_state_is_settled(s->state))
                        set_state(p->manager, s, p->pause ? SANDBOX_PAUSED : SANDBOX_RUNNING);
                (void) sd_bus_reply_method_return(p->call, NULL);
        }
        sd_bus_message_unref(p->call);
        free(p->id);
        free(p);
}

int lifecycle_pause(Manager *m, Sandbox *s, bool pause, sd_bus_message *call, sd_bus_error *error) {
        PauseCall *p;
        int r;

        if (sandbox_live_in_progress(s))
                return sd_bus_error_setf(error, AGENTD_ERROR_IN_USE, "Sandbox %s is being hibernated or resumed.",
                                         s->id);
        if (!pause && s->state == SANDBOX_HIBERNATED)
                return hibernate_wake(m, s, call, error);

        if (s->state != SANDBOX_RUNNING && s->state != SANDBOX_PAUSED)
                return sd_bus_error_setf(error, AGENTD_ERROR_NOT_RUNNING,
                                         "Sandbox %s is %s: only a running sandbox is paused, only a paused or "
                                         "hibernated one resumed.", s->id,
                                         sandbox_state_to_string(s->state));
        if (!s->backend->ops->pause)
                return sd_bus_error_setf(error, AGENTD_ERROR_BACKEND_UNAVAILABLE, "The %s backend cannot pause sandboxes.",
                                         s->backend->name);
        p = calloc(1, sizeof(*p));
        if (!p || !(p->id = strdup(s->id))) {
                free(p);
                return -ENOMEM;
        }
        p->manager = m;
        p->pause = pause;
        p->call = sd_bus_message_ref(call);
        r = s->backend->ops->pause(s->backend->state, s->id, pause, on_paused, p);
        if (r < 0) {
                sd_bus_message_unref(p->call);
                free(p->id);
                free(p);
                return r;
        }
        log_sandbox_info(s, "Sandbox %s: %s.", s->id, pause ? "pausing" : "resuming");
        return 1;
}

/* ---- adoption ---------------------------------------------------------------------------- */

static SandboxState state_found(AgentdFoundState state) {
        return state == AGENTD_FOUND_RUNNING    ? SANDBOX_RUNNING :
               state == AGENTD_FOUND_PAUSED     ? SANDBOX_PAUSED :
               state == AGENTD_FOUND_HIBERNATED ? SANDBOX_HIBERNATED :
                                                  SANDBOX_EXITED;
}

static SandboxConfig *config_from_spec(const AgentdSandboxSpec *spec, const char *backend) {
        SandboxConfig *c = calloc(1, sizeof(*c));

        if (!c)
                return NULL;
        c->image = strdup(spec->image ?: "");
        c->bundle = strdup(spec->bundle ?: "");
        c->backend = strdup(backend);
        c->limits = (SandboxLimits) { .cpus = spec->cpus, .memory = spec->memory, .pids = spec->pids };
        if (!c->image || !c->bundle || !c->backend || (spec->runtime && !(c->runtime = strdup(spec->runtime))) ||
            (spec->network && !(c->network = strdup(spec->network))) ||
            (spec->platform && !(c->platform = strdup(spec->platform))) ||
            strv_copy((char *const *) spec->labels, &c->labels) < 0)
                return sandbox_config_free(c);
        return c;
}

static void bind_again(Manager *m, Sandbox *s);

static void on_claim_finished(SandboxClaim *claim, const char *error, bool already_claimed, void *userdata) {
        Sandbox *s = userdata;

        s->claim = sandbox_claim_free(s->claim);
        if (!error)
                log_sandbox_info(s, "Sandbox %s: its claim is made (agentd had stopped before the runtime had it).",
                                 s->id);
        else if (!already_claimed)
                log_sandbox_warning(s, "Sandbox %s: cannot check that its runtime has its claim: %s", s->id, error);
}

static void on_adopted_secured(Sandbox *s, const char *error) {
        if (error)
                log_sandbox_warning(s, "Sandbox %s: its runtime has no TLS certificate that verifies, and cannot be "
                                    "given one: %s", s->id, error);
}

/* A sandbox found at start whose runtime serves TLS: its URL is https://, and its certificate
 * is checked (and issued again when it does not verify: agentd's CA changed, or agentd
 * stopped before the runtime had one). */
static int adopt_tls(Sandbox *s, const AgentdSandboxSpec *spec) {
        char *url;

        s->spec.tls = spec->tls;
        /* As its container was made, and only if a sandbox so made could be (an image's env
         * could have said so for a container of an agentd before AGENTIX_CHECKPOINT=0 was set). */
        s->spec.checkpointable = spec->checkpointable && sandbox_spec_checkpointable(spec);
        if (!spec->tls || !s->runtime_url)
                return 0;
        url = runtime_url_https(s->runtime_url);
        if (!url)
                return -ENOMEM;
        free(s->runtime_url);
        s->runtime_url = url;
        if (s->state == SANDBOX_RUNNING && sandbox_tls_secure(s, true, on_adopted_secured) < 0)
                log_sandbox_warning(s, "Sandbox %s: its runtime serves TLS, but agentd's [Runtime] TLS= is off now: "
                                    "clients verify it against the CA agentd had.", s->id);
        return 0;
}

/* A pool's sandbox found at start. With a claim recorded it is the claimer's (owner, token,
 * expiry from the record; the claim is made again, in case agentd died before the runtime
 * had it: a runtime claimed already says so). Without, it goes back to its pool, or away. */
static void adopt_pool_sandbox(Manager *m, Backend *b, const AgentdSandboxSpec *spec, const AgentdSandboxPlace *place,
                               AgentdFoundState state) {
        ClaimState *st = NULL;
        SandboxConfig *c = config_from_spec(spec, b->name);
        Sandbox *s = NULL;
        int r;

        r = claim_state_load(spec->id, &st);
        if (r < 0 && r != -ENOENT)
                log_sandbox_id_full(spec->id, spec->owner, b->name, LOG_WARNING,
                                    "Sandbox %s: its claim record cannot be read (%s): removing it.", spec->id,
                                    strerror(-r));
        /* A member nobody claimed that stopped is of no use; a claimed one that stopped is its
         * owner's, exited, as any sandbox would be. */
        if (!c || (r < 0 && r != -ENOENT) || (!st && state != AGENTD_FOUND_RUNNING)) {
                sandbox_config_free(c);
                claim_state_free(st);
                (void) claim_state_remove(spec->id);
                (void) b->ops->remove(b->state, spec->id, NULL, NULL);
                return;
        }
        if (st) {
                c->env = TAKE_PTR(st->env);
                c->labels = TAKE_PTR(st->labels);
                c->workdir = TAKE_PTR(st->workdir);
        }
        r = sandbox_restore(c, st ? st->owner : 0, spec->id, st ? st->token : spec->token,
                            st ? st->created_at : spec->created_at * 1000000ULL,
                            st ? st->expires_at : spec->expires_at * 1000000ULL, &s);
        if (r < 0) {
                sandbox_config_free(c);
                claim_state_free(st);
                return;
        }
        s->manager = m;
        s->backend = b;
        s->state = state_found(state);
        if (sandbox_set_place(s, place) < 0 || !(s->pool_name = strdup(spec->pool)) ||
            (st && st->bound_to && !(s->bound_to = strdup(st->bound_to)))) {
                claim_state_free(st);
                sandbox_free(s);
                return;
        }
        sandbox_fill_spec(s);
        if (adopt_tls(s, spec) < 0) {
                claim_state_free(st);
                sandbox_free(s);
                return;
        }
        if (!st) {
                pools_adopt_member(m, s, spec->pool);
                return;
        }
        claim_state_free(st);
        if (manager_add_sandbox(m, s) < 0) {
                sandbox_free(s);
                return;
        }
        log_sandbox_info(s, "Sandbox %s of uid %u (claimed from pool %s) adopted from %s.", s->id, (unsigned) s->owner,
                         s->pool_name, b->name);
        emit_new(m, s);
        if (s->bound_to)
                bind_again(m, s);
        if (s->state == SANDBOX_RUNNING &&
            sandbox_claim_run(m->event, s->runtime_url, s->id, manager_runtime_ca_pem(m), spec->token, s->token, s->config->env, s->config->workdir,
                              on_claim_finished, s, &s->claim) < 0)
                log_sandbox_warning(s, "Sandbox %s: cannot check that its runtime has its claim.", s->id);
}

/* Adopted with bind_to_caller: delete it if its creator left the bus while agentd was away. */
static int on_name_has_owner(sd_bus_message *reply, void *userdata, sd_bus_error *ret_error) {
        Sandbox *s = userdata;
        int has = 1;

        s->owner_check = sd_bus_slot_unref(s->owner_check);
        if (!sd_bus_message_is_method_error(reply, NULL))
                (void) sd_bus_message_read(reply, "b", &has);
        if (!has && s->state != SANDBOX_REMOVING) {
                log_sandbox_info(s, "Sandbox %s: its creator %s left the bus while agentd was away (bind_to_caller): deleting it.",
                         s->id, s->bound_to);
                s->track = sd_bus_track_unref(s->track);
                (void) lifecycle_delete(s->manager, s, NULL);
        }
        return 0;
}

static void bind_again(Manager *m, Sandbox *s) {
        int r;

        r = sd_bus_track_new(m->bus, &s->track, on_caller_gone, m);
        if (r >= 0)
                r = sd_bus_track_add_name(s->track, s->bound_to);
        /* Asked after the track watches the name: a creator leaving in between is seen too. */
        if (r >= 0)
                r = sd_bus_call_method_async(m->bus, &s->owner_check, "org.freedesktop.DBus", "/org/freedesktop/DBus",
                                             "org.freedesktop.DBus", "NameHasOwner", on_name_has_owner, s, "s",
                                             s->bound_to);
        if (r < 0)
                log_sandbox_warning(s, "Sandbox %s: cannot watch its creator %s on the bus: it stays until it expires.", s->id,
                            s->bound_to);
}

/* The backend has a sandbox agentd knows: it is still there; is its state what agentd thinks? */
static void confirm(Manager *m, Sandbox *s, AgentdFoundState state) {
        s->unconfirmed = false;
        if (!sandbox_state_is_settled(s->state) || sandbox_live_in_progress(s))
                return; /* agentd's own doing in progress */
        if (state != AGENTD_FOUND_HALF_MADE)
                set_state(m, s, state_found(state));
}

/* What happened to sandbox id while the walk that found it was under way, in order. */
static void replay_walk_events(Backend *b, const char *id) {
        size_t n = strlen(id);
        bool adopting = b->adopting;

        /* Applied as events from now on: not put back on the list (a destroy drops the
         * sandbox, and what follows about it is then about no sandbox). */
        b->adopting = false;
        for (size_t i = 0; i < b->n_walk_events; i++) {
                char *e = b->walk_events[i];

                if (e[0] && strneq(e, id, n) && e[n] == ' ') {
                        e[0] = 0; /* applied */
                        on_backend_event(b, id, e + n + 1);
                }
        }
        b->adopting = adopting;
}

/* A sandbox agentd made in this backend: its own, or an earlier agentd's. */
static void on_found(void *userdata, const AgentdSandboxSpec *spec, const AgentdSandboxPlace *place,
                     AgentdFoundState state) {
        Backend *b = userdata;
        Manager *m = b->owner;
        SandboxConfig *c;
        Sandbox *s;

        if (!spec->id)
                return;
        s = manager_get_sandbox(m, spec->id);
        if (s) {
                if (s->backend == b)
                        confirm(m, s, state);
                return;
        }
        if (spec->pool && pools_has_member(m, spec->id))
                return; /* a resync: it is in its pool already */
        if (spec->pool && state != AGENTD_FOUND_HALF_MADE) {
                adopt_pool_sandbox(m, b, spec, place, state);
                return;
        }
        /* Half-made (a create that never started it), expired, or without what a sandbox needs. */
        if (state == AGENTD_FOUND_HALF_MADE || spec->expires_at * 1000000ULL <= now_realtime_usec()) {
                log_sandbox_id_full(spec->id, spec->owner, b->name, LOG_INFO, "Removing %s's container of sandbox %s: %s.",
                                    b->name, spec->id, state == AGENTD_FOUND_HALF_MADE ? "its create never finished" : "expired");
                (void) b->ops->remove(b->state, spec->id, NULL, NULL);
                if (spec->pool)
                        (void) claim_state_remove(spec->id);
                return;
        }
        c = config_from_spec(spec, b->name);
        if (!c || sandbox_restore(c, spec->owner, spec->id, spec->token, spec->created_at * 1000000ULL,
                                  spec->expires_at * 1000000ULL, &s) < 0) {
                sandbox_config_free(c);
                return;
        }
        s->manager = m;
        s->backend = b;
        s->state = state_found(state);
        if (sandbox_set_place(s, place) < 0 || (spec->bound_to && !(s->bound_to = strdup(spec->bound_to))) ||
            adopt_tls(s, spec) < 0 || manager_add_sandbox(m, s) < 0) {
                sandbox_free(s);
                return;
        }
        log_sandbox_info(s, "Sandbox %s of uid %u adopted from %s (%s).", s->id, (unsigned) s->owner, b->name,
                 sandbox_state_to_string(s->state));
        emit_new(m, s);
        if (s->bound_to)
                bind_again(m, s);
        replay_walk_events(b, spec->id);
}

/* Every backend looked at once: ready (once). */
static void check_ready(Manager *m) {
        void (*ready)(Manager *m) = m->on_ready;

        for (size_t i = 0; i < m->n_backends; i++)
                if (m->backends[i]->state && !m->backends[i]->looked)
                        return;
        if (ready) {
                m->on_ready = NULL;
                pools_refill(m); /* what adoption did not bring back */
                ready(m);
        }
}

static bool is_unconfirmed(Sandbox *s, void *userdata) {
        return s->backend == userdata && s->unconfirmed;
}

static void on_adopted(void *userdata, int error) {
        Backend *b = userdata;
        Manager *m = b->owner;
        Sandbox *s;

        /* What agentd had and the backend no longer has went outside agentd (while the service
         * was down, say). Not when the backend could not say what it has. */
        while ((s = manager_find_sandbox(m, is_unconfirmed, b))) {
                s->unconfirmed = false;
                if (error < 0 || !sandbox_state_is_settled(s->state))
                        continue;
                log_sandbox_info(s, "Sandbox %s: its container is gone from %s.", s->id, b->name);
                drop(m, s);
        }
        b->adopting = false;
        b->walk_events = strv_free(b->walk_events); /* about sandboxes the walk did not find */
        b->n_walk_events = 0;
        if (b->adopt_again) {
                b->adopt_again = false;
                reconcile(b);
                return;
        }
        schedule_reaper(m);
        prune(m, b);
        b->looked = true;
        check_ready(m);
}

/* Look at everything the backend holds: adopt, confirm, remove (one walk at a time). */
static void reconcile(Backend *b) {
        Manager *m = b->owner;
        size_t state = 0;
        Sandbox *s;
        int r;

        if (!b->state || !b->ops->adopt) {
                b->looked = true;
                return;
        }
        if (b->adopting) {
                b->adopt_again = true;
                return;
        }
        while ((s = strmap_iterate(m->sandboxes, &state)))
                s->unconfirmed = s->backend == b && sandbox_state_is_settled(s->state);
        b->adopting = true;
        r = b->ops->adopt(b->state, on_found, on_adopted, b);
        if (r < 0) {
                b->adopting = false;
                b->looked = true;
                log_warning("Backend %s: cannot look at its sandboxes: %s", b->name, strerror(-r));
        }
}

int lifecycle_start(Manager *m) {
        int r = pools_start(m); /* before adoption: the members found go back into them */

        if (r < 0)
                return r;
        for (size_t i = 0; i < m->n_backends; i++) {
                Backend *b = m->backends[i];

                if (!b->state)
                        continue;
                reconcile(b);
                if (b->ops->watch) {
                        r = b->ops->watch(b->state, on_backend_event, b);
                        if (r < 0)
                                log_warning("Backend %s: cannot follow its events: %s", b->name, strerror(-r));
                }
        }
        check_ready(m);
        return 0;
}

static bool is_removing(Sandbox *s, void *userdata) {
        return s->state == SANDBOX_REMOVING;
}

static int on_deleted_all(sd_event_source *es, void *userdata) {
        Manager *m = userdata;

        if (manager_find_sandbox(m, is_removing, NULL) || m->pool_removing > 0)
                return 0;
        if (strmap_size(m->sandboxes) == 0)
                log_info("Every sandbox is deleted (DeleteOnStop=yes): stopping.");
        else
                log_warning("%zu sandbox(es) could not be deleted (see above); stopping all the same.",
                            strmap_size(m->sandboxes));
        return sd_event_exit(m->event, 0);
}

static int on_delete_all_timeout(sd_event_source *es, uint64_t usec, void *userdata) {
        Manager *m = userdata;

        log_warning("%zu sandbox(es) still being deleted when agentd stops; their containers stay (the next agentd "
                    "deletes the expired ones).", strmap_size(m->sandboxes));
        return sd_event_exit(m->event, 0);
}

int lifecycle_delete_all_then_exit(Manager *m, uint64_t timeout_usec) {
        _cleanup_strv_free_ char **ids = NULL;
        size_t state = 0, n;
        Sandbox *s;
        int r;

        n = pools_drain(m);
        if (n > 0)
                log_info("Removing the pools' %zu ready sandbox(es) (DeleteOnStop=yes).", n);
        if (strmap_size(m->sandboxes) == 0 && n == 0)
                return 0;
        log_info("Deleting %zu sandbox(es) before agentd stops (DeleteOnStop=yes).", strmap_size(m->sandboxes));
        (void) sd_notify(false, "STOPPING=1\nSTATUS=Deleting every sandbox (DeleteOnStop=yes)");
        /* Each once, by id: a delete may end (and free the record) before lifecycle_delete()
         * returns, and one the backend refused stays (failed) until the timeout. */
        while ((s = strmap_iterate(m->sandboxes, &state)))
                if (s->state != SANDBOX_REMOVING && strv_extend(&ids, s->id) < 0)
                        return -ENOMEM;
        for (char **id = ids; id && *id; id++)
                if ((s = manager_get_sandbox(m, *id)))
                        (void) lifecycle_delete(m, s, NULL);
        if (!manager_find_sandbox(m, is_removing, NULL) && m->pool_removing == 0)
                return 0;
        r = sd_event_add_post(m->event, NULL, on_deleted_all, m);
        if (r < 0)
                return r;
        r = sd_event_add_time_relative(m->event, NULL, CLOCK_MONOTONIC, timeout_usec, 0, on_delete_all_timeout, m);
        return r < 0 ? r : 1;
}

void lifecycle_stop(Manager *m) {
        size_t state = 0;
        Sandbox *s;

        while ((s = strmap_iterate(m->sandboxes, &state)))
                stop_making(s);
        pools_free(m);
}

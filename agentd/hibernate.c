/* SPDX-License-Identifier: MIT */
#include "agentd-errors.h"
#include "backend.h"
#include "hibernate.h"
#include "log.h"
#include "macro.h"
#include "quota.h"
#include "runtime-hold.h"
#include "sandbox-state.h"

/* Between the runtime's answer to the hold and the checkpoint: the hold's connection, reset by
 * agentd, is gone on the runtime's side too (gVisor saves no connected endpoint). */
#define SETTLE_USEC (50ULL * 1000)
/* The longest TIME_WAIT of its own a runtime is waited for (gVisor's is a minute). */
#define HOLD_RETRY_MAX_SEC 70

/* Calls that need its runtime (GetRuntimeAccess, GetPortUrl) waiting for it to run again. */
#define WAITERS_MAX 64

typedef struct Waiter {
        sd_bus_message *call;
        hibernate_answer_t answer;
} Waiter;

typedef struct LiveOp {
        Manager *manager;
        Sandbox *sandbox;         /* NULL once it went (hibernate_drop()) */
        char *id;
        sd_bus_message *call;
        RuntimeHold *hold;
        sd_event_source *settle;
        bool in_backend;          /* a hibernate() or wake() of the backend's is on its way */
        bool waking;              /* Resume(); else Hibernate() */
        hibernate_delete_t expiring; /* OnExpiry=hibernate: what deletes it when it cannot hibernate */
        char *failure;            /* a failed save, said once the sandbox runs again */
        const char *failure_name; /* and its error (AGENTD_ERROR_*) */
        uint64_t started;         /* CLOCK_MONOTONIC, µs */
        unsigned hold_tries;      /* holds asked for: a runtime waiting out a TIME_WAIT is asked again */
        Waiter waiters[WAITERS_MAX];
        size_t n_waiters;
} LiveOp;

/* s's operation (NULL: none), and whether it is a save (what MaxHibernated= counts). */
static void set_live(Sandbox *s, LiveOp *op) {
        s->live = op;
        s->live_saving = op && !op->waking;
}

/* Counted for /metrics (a call refused before it reached the runtime or the backend is not). */
static uint64_t elapsed_usec(LiveOp *op) {
        uint64_t now = 0;

        (void) sd_event_now(op->manager->event, CLOCK_MONOTONIC, &now);
        return now - op->started;
}

static void count(LiveOp *op, bool ok) {
        metrics_live_done(&op->manager->metrics, op->waking ? METRICS_RESUME : METRICS_HIBERNATE, ok,
                          (double) elapsed_usec(op) / 1e6);
}

/* Every waiter told error_name (with message), or answered (error_name NULL: the sandbox runs). */
static void answer_waiters(LiveOp *op, const char *error_name, const char *message) {
        for (size_t i = 0; i < op->n_waiters; i++) {
                Waiter *w = &op->waiters[i];

                if (error_name || !op->sandbox)
                        (void) sd_bus_reply_method_errorf(w->call, error_name ?: AGENTD_ERROR_NO_SUCH_SANDBOX, "%s",
                                                          message ?: "The sandbox was deleted.");
                else if (w->answer(op->sandbox, w->call) < 0)
                        (void) sd_bus_reply_method_errorf(w->call, AGENTD_ERROR_START_FAILED, "Out of memory");
                sd_bus_message_unref(w->call);
        }
        op->n_waiters = 0;
}

static LiveOp *op_free(LiveOp *op) {
        if (!op)
                return NULL;
        answer_waiters(op, AGENTD_ERROR_NO_SUCH_SANDBOX, "The sandbox was deleted while it was being hibernated or resumed.");
        runtime_hold_free(op->hold);
        sd_event_source_disable_unref(op->settle);
        sd_bus_message_unref(op->call);
        free(op->failure);
        free(op->id);
        return mfree(op);
}

static int backend_wake(LiveOp *op, bool from_checkpoint);
static int op_new(Manager *m, Sandbox *s, sd_bus_message *call, bool waking, LiveOp **ret);

/* The operation is over: those who wait for its runtime get it; or, when it just hibernated,
 * it runs again for them at once (a call that needs it came meanwhile: auto-resume); else
 * they hear why not. */
static void finish_waiters(LiveOp *op, const char *error_name, const char *error_message) {
        Sandbox *s = op->sandbox;
        LiveOp *next = NULL;
        char message[256];

        if (op->n_waiters == 0 || !s)
                return;
        if (s->state == SANDBOX_RUNNING) {
                answer_waiters(op, NULL, NULL);
                return;
        }
        if (s->state == SANDBOX_HIBERNATED && !op->waking) {
                _cleanup_(sd_bus_error_free) sd_bus_error quota = SD_BUS_ERROR_NULL;

                if (quota_check_wake(op->manager, s, &quota) < 0) {
                        answer_waiters(op, quota.name, quota.message);
                        return;
                }
        }
        if (s->state == SANDBOX_HIBERNATED && !op->waking && op_new(op->manager, s, NULL, true, &next) >= 0) {
                memcpy(next->waiters, op->waiters, op->n_waiters * sizeof(Waiter));
                next->n_waiters = op->n_waiters;
                op->n_waiters = 0;
                set_live(s, next);
                if (backend_wake(next, true) >= 0) {
                        log_sandbox_info(s, "Sandbox %s: resuming from its checkpoint for a call that needs it.", s->id);
                        return;
                }
                set_live(s, NULL);
                op_free(next); /* its waiters are told */
                return;
        }
        snprintf(message, sizeof(message), "Sandbox %s is %s, not running.", s->id, sandbox_state_to_string(s->state));
        answer_waiters(op, error_name ?: AGENTD_ERROR_START_FAILED, error_message ?: message);
}

/* The operation is over: the sandbox is free for the next, the caller is answered (error_name
 * NULL: success). */
static void op_finish(LiveOp *op, const char *error_name, const char *fmt, ...) _printf_(3, 4);
static void op_finish(LiveOp *op, const char *error_name, const char *fmt, ...) {
        _cleanup_free_ char *message = NULL;

        if (error_name) {
                va_list ap;

                va_start(ap, fmt);
                if (vasprintf(&message, fmt, ap) < 0)
                        message = NULL;
                va_end(ap);
        }
        count(op, !error_name);
        if (op->sandbox)
                set_live(op->sandbox, NULL);
        finish_waiters(op, error_name, message);
        if (op->call && error_name)
                (void) sd_bus_reply_method_errorf(op->call, error_name, "%s", message ?: "out of memory");
        else if (op->call)
                (void) sd_bus_reply_method_return(op->call, NULL);
        op_free(op);
}

/* ---- running again ----------------------------------------------------------------------- */

static void on_woken(void *userdata, const AgentdSandboxPlace *place, const char *error_name, const char *message) {
        LiveOp *op = userdata;
        Sandbox *s = op->sandbox;
        bool url_changed;

        op->in_backend = false;
        if (!s) {
                op_free(op);
                return;
        }
        if (error_name) {
                if (op->failure) {
                        log_sandbox_warning(s, "Sandbox %s: %s, and it could not be started again: %s", s->id,
                                            op->failure, strna(message));
                        sandbox_set_state(s, SANDBOX_EXITED);
                        op_finish(op, op->failure_name, "Sandbox %s: %s, and it could not be started "
                                  "again: %s", s->id, op->failure, strna(message));
                        return;
                }
                log_sandbox_warning(s, "Sandbox %s: cannot run it from its checkpoint: %s", s->id, strna(message));
                op_finish(op, error_name, "Sandbox %s could not be run from its checkpoint (it stays hibernated): %s",
                          s->id, strna(message));
                return;
        }
        url_changed = !streq_ptr(s->runtime_url, place->runtime_url);
        if (sandbox_set_place(s, place) < 0) {
                op_finish(op, AGENTD_ERROR_START_FAILED, "Out of memory");
                return;
        }
        sandbox_set_state(s, SANDBOX_RUNNING);
        if (url_changed)
                (void) sd_bus_emit_properties_changed(op->manager->bus, s->path, SANDBOX_INTERFACE, "RuntimeUrl", NULL);
        if (op->failure) {
                log_sandbox_warning(s, "Sandbox %s: %s; it runs again.", s->id, op->failure);
                op_finish(op, op->failure_name, "Sandbox %s: %s. It runs again: as it was if the "
                          "checkpoint had not stopped it yet, else started afresh from its files (its processes "
                          "and memory lost).", s->id, op->failure);
                return;
        }
        log_sandbox_info(s, "Sandbox %s runs again from its checkpoint (%llu ms).", s->id,
                         (unsigned long long) (elapsed_usec(op) / 1000));
        op_finish(op, NULL, NULL);
}

static int backend_wake(LiveOp *op, bool from_checkpoint) {
        Sandbox *s = op->sandbox;
        int r;

        op->in_backend = true; /* before: the backend may answer before it returns */
        r = s->backend->ops->wake(s->backend->state, s->id, from_checkpoint, on_woken, op);
        if (r < 0)
                op->in_backend = false;
        return r;
}

/* ---- saving ------------------------------------------------------------------------------ */

static void on_hibernated(void *userdata, const char *error_name, const char *message) {
        LiveOp *op = userdata;
        Sandbox *s = op->sandbox;

        op->in_backend = false;
        if (!s) {
                op_free(op);
                return;
        }
        if (!error_name) {
                sandbox_set_state(s, SANDBOX_HIBERNATED);
                log_sandbox_info(s, "Sandbox %s hibernated (%llu ms).", s->id, (unsigned long long) (elapsed_usec(op) / 1000));
                op_finish(op, NULL, NULL);
                return;
        }
        if (op->expiring) {
                log_sandbox_warning(s, "Sandbox %s expired and could not hibernate (%s): deleting it.", s->id,
                                    strna(message));
                hibernate_delete_t delete = op->expiring;
                Manager *m = op->manager;

                op_finish(op, error_name, "%s", strna(message));
                delete(m, s);
                return;
        }
        /* Held, and perhaps stopped: run it again either way before answering. */
        op->failure_name = error_name;
        if (asprintf(&op->failure, "its checkpoint failed (%s)", strna(message)) < 0)
                op->failure = NULL;
        if (!op->failure || backend_wake(op, false) < 0) {
                sandbox_set_state(s, SANDBOX_EXITED);
                op_finish(op, error_name, "Sandbox %s: its checkpoint failed (%s), and it cannot be started again.", s->id,
                          strna(message));
        }
}

static int on_settled(sd_event_source *es, uint64_t usec, void *userdata) {
        LiveOp *op = userdata;
        Sandbox *s = op->sandbox;
        int r;

        op->settle = sd_event_source_disable_unref(op->settle);
        op->in_backend = true; /* before: the backend may answer before it returns */
        r = s->backend->ops->hibernate(s->backend->state, s->id, on_hibernated, op);
        if (r < 0)
                on_hibernated(op, AGENTD_ERROR_BACKEND_UNAVAILABLE, "cannot ask the backend to save it");
        return 0;
}

static int ask_hold(LiveOp *op);

static int on_hold_again(sd_event_source *es, uint64_t usec, void *userdata) {
        LiveOp *op = userdata;

        op->settle = sd_event_source_disable_unref(op->settle);
        if (ask_hold(op) < 0)
                op_finish(op, AGENTD_ERROR_CHECKPOINT_FAILED, "Sandbox %s: its runtime could not be asked to hold "
                          "still again.", op->id);
        return 0;
}

static void on_held(bool held, const char *error, unsigned retry_after, void *userdata) {
        LiveOp *op = userdata;
        Sandbox *s = op->sandbox;

        op->hold = NULL; /* freed after this returns */
        /* A connection its runtime ended lately may still be in TIME_WAIT (it says for how long):
         * waited out once, the call waiting meanwhile. */
        if (!held && retry_after > 0 && retry_after <= HOLD_RETRY_MAX_SEC && op->hold_tries < 2 &&
            sd_event_add_time_relative(op->manager->event, &op->settle, CLOCK_MONOTONIC,
                                       retry_after * 1000000ULL, 100000, on_hold_again, op) >= 0) {
                log_sandbox_info(s, "Sandbox %s: waiting %u s for its runtime to be able to hold still (%s).", s->id,
                                 retry_after, strna(error));
                return;
        }
        if (!held && op->expiring) {
                log_sandbox_info(s, "Sandbox %s expired and cannot hibernate (%s): deleting it.", s->id, strna(error));
                hibernate_delete_t delete = op->expiring;
                Manager *m = op->manager;

                op_finish(op, AGENTD_ERROR_CHECKPOINT_FAILED, "%s", strna(error));
                delete(m, s);
                return;
        }
        if (!held) {
                log_sandbox_info(s, "Sandbox %s does not hibernate: %s", s->id, strna(error));
                op_finish(op, AGENTD_ERROR_CHECKPOINT_FAILED, "Sandbox %s cannot hibernate now (it runs on "
                          "untouched): %s", s->id, strna(error));
                return;
        }
        if (sd_event_add_time_relative(op->manager->event, &op->settle, CLOCK_MONOTONIC, SETTLE_USEC, 1000,
                                       on_settled, op) < 0)
                on_settled(NULL, 0, op);
}

/* ---- the calls --------------------------------------------------------------------------- */

static int op_new(Manager *m, Sandbox *s, sd_bus_message *call, bool waking, LiveOp **ret) {
        LiveOp *op = calloc(1, sizeof(*op));

        if (!op || !(op->id = strdup(s->id))) {
                free(op);
                return -ENOMEM;
        }
        op->manager = m;
        op->sandbox = s;
        op->call = call ? sd_bus_message_ref(call) : NULL;
        op->waking = waking;
        (void) sd_event_now(m->event, CLOCK_MONOTONIC, &op->started);
        *ret = op;
        return 0;
}

static int check_backend(Sandbox *s, sd_bus_error *error) {
        if (!s->backend->ops->hibernate || !s->backend->ops->wake)
                return sd_bus_error_setf(error, AGENTD_ERROR_NOT_SUPPORTED, "The %s backend cannot hibernate "
                                         "sandboxes.", s->backend->name);
        return 0;
}

/* Whether s may hibernate now (error set, < 0, when not). */
static int check_hibernate(Manager *m, Sandbox *s, sd_bus_error *error) {
        int r;

        if (s->live)
                return sd_bus_error_setf(error, AGENTD_ERROR_IN_USE, "Sandbox %s is being hibernated or resumed.",
                                         s->id);
        if (s->state != SANDBOX_RUNNING)
                return sd_bus_error_setf(error, AGENTD_ERROR_NOT_RUNNING, "Sandbox %s is %s: only a running sandbox "
                                         "hibernates.", s->id, sandbox_state_to_string(s->state));
        r = check_backend(s, error);
        if (r < 0)
                return r;
        if (!streq_ptr(s->config->runtime, "runsc"))
                return sd_bus_error_setf(error, AGENTD_ERROR_NOT_SUPPORTED, "Sandbox %s runs on %s: only gVisor's "
                                         "runsc saves a sandbox's processes and memory here (create it with "
                                         "runtime=runsc; CRIU, which %s would need, does not run on this host).",
                                         s->id, s->config->runtime ?: "runc", s->config->runtime ?: "runc");
        if (!s->spec.checkpointable)
                return sd_bus_error_setf(error, AGENTD_ERROR_NOT_SUPPORTED, "Sandbox %s cannot hibernate: %s.", s->id,
                                         s->spec.egress || s->config->egress ? "a sandbox with an egress list keeps the "
                                         "host's network stack, which gVisor cannot save" :
                                         s->spec.tls ? "its runtime serves TLS, which cannot hold still for a "
                                         "checkpoint yet" : "it was not made to (made before agentd could, or on the "
                                         "host's network)");
        return quota_check_hibernate(m, s, error);
}

static int ask_hold(LiveOp *op) {
        Sandbox *s = op->sandbox;

        op->hold_tries++;
        return runtime_hold_start(op->manager->curl, s->runtime_url, s->token, on_held, op, &op->hold);
}

/* Ask its runtime to hold still; the rest follows (on_held()). call may be NULL. */
static int begin_hibernate(Manager *m, Sandbox *s, sd_bus_message *call, hibernate_delete_t expiring) {
        LiveOp *op;
        int r;

        if (!m->curl && (r = curl_event_new(m->event, &m->curl)) < 0)
                return r;
        r = op_new(m, s, call, false, &op);
        if (r < 0)
                return r;
        op->expiring = expiring;
        r = ask_hold(op);
        if (r < 0) {
                op_free(op);
                return r;
        }
        set_live(s, op);
        log_sandbox_info(s, "Sandbox %s: hibernating%s.", s->id, expiring ? " (it expired: OnExpiry=hibernate)" : "");
        return 1;
}

int hibernate_start(Manager *m, Sandbox *s, sd_bus_message *call, sd_bus_error *error) {
        int r;

        r = check_hibernate(m, s, error);
        if (r < 0)
                return r;
        return begin_hibernate(m, s, call, NULL);
}

bool hibernate_on_expiry(Manager *m, Sandbox *s, uint64_t now, hibernate_delete_t delete) {
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        uint64_t retention = m->config->hibernated_retention_sec;

        if (!m->config->hibernate_on_expiry)
                return false; /* deleted: a Delete wins over what is on its way (hibernate_drop()) */
        if (s->live) {
                /* Being hibernated or resumed: what it is then decides, a minute from now. */
                s->expires_at = now + 60 * 1000000ULL;
                return true;
        }
        if (check_hibernate(m, s, &error) < 0)
                return false;
        /* Kept that long from now (and no longer than MaxTTL=), then deleted as any other. */
        if (m->config->max_ttl_sec != AGENTD_UNLIMITED)
                retention = MIN(retention, m->config->max_ttl_sec);
        s->expires_at = now + (retention == AGENTD_UNLIMITED ? 100ULL * 365 * 24 * 3600 : retention) * 1000000ULL;
        if (begin_hibernate(m, s, NULL, delete) < 0)
                return false;
        (void) sd_bus_emit_properties_changed(m->bus, s->path, SANDBOX_INTERFACE, "ExpiresAt", NULL);
        return true;
}

/* A wake of hibernated s from its checkpoint for call (NULL: for waiter only), within its
 * owner's quotas; s->live the operation. waiter (may be NULL) waits on it for answer(): added
 * before the backend is asked, which may answer (and end the operation) before it returns. */
static int start_wake(Manager *m, Sandbox *s, sd_bus_message *call, const char *why, sd_bus_message *waiter,
                      hibernate_answer_t answer, sd_bus_error *error) {
        LiveOp *op;
        int r;

        r = quota_check_wake(m, s, error);
        if (r < 0)
                return r;
        r = op_new(m, s, call, true, &op);
        if (r < 0)
                return r;
        if (waiter)
                op->waiters[op->n_waiters++] = (Waiter) { .call = sd_bus_message_ref(waiter), .answer = answer };
        set_live(s, op);
        log_sandbox_info(s, "Sandbox %s: resuming from its checkpoint%s.", s->id, why);
        r = backend_wake(op, true);
        if (r < 0) {
                set_live(s, NULL);
                op->call = sd_bus_message_unref(op->call); /* answered by the caller's error */
                if (waiter) {
                        sd_bus_message_unref(op->waiters[0].call);
                        op->n_waiters = 0;
                }
                op_free(op);
                return r;
        }
        return 1;
}

int hibernate_wake(Manager *m, Sandbox *s, sd_bus_message *call, sd_bus_error *error) {
        int r;

        if (s->live)
                return sd_bus_error_setf(error, AGENTD_ERROR_IN_USE, "Sandbox %s is being hibernated or resumed.",
                                         s->id);
        r = check_backend(s, error);
        if (r < 0)
                return r;
        return start_wake(m, s, call, "", NULL, NULL, error);
}

int hibernate_wait_running(Manager *m, Sandbox *s, sd_bus_message *call, hibernate_answer_t answer,
                           sd_bus_error *error) {
        LiveOp *op = s->live;

        if (!op && (s->state != SANDBOX_HIBERNATED || !s->backend->ops->wake))
                return 0;
        if (!op)
                return start_wake(m, s, NULL, " for a call that needs it", call, answer, error);
        if (op->n_waiters >= WAITERS_MAX)
                return sd_bus_error_setf(error, AGENTD_ERROR_IN_USE, "Sandbox %s is being resumed, and %d calls wait "
                                         "for it already.", s->id, WAITERS_MAX);
        op->waiters[op->n_waiters++] = (Waiter) { .call = sd_bus_message_ref(call), .answer = answer };
        return 1;
}

void hibernate_drop(Sandbox *s) {
        LiveOp *op = s->live;

        if (!op)
                return;
        set_live(s, NULL);
        op->sandbox = NULL;
        if (op->call) {
                (void) sd_bus_reply_method_errorf(op->call, AGENTD_ERROR_NO_SUCH_SANDBOX, "Sandbox %s was deleted "
                                                  "while it was being %s.", s->id, op->waking ? "resumed" : "hibernated");
                op->call = sd_bus_message_unref(op->call);
        }
        answer_waiters(op, AGENTD_ERROR_NO_SUCH_SANDBOX, "The sandbox was deleted while it was being hibernated or "
                       "resumed.");
        if (!op->in_backend)
                op_free(op);
}

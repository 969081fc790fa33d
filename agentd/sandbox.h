/* SPDX-License-Identifier: MIT */
#pragma once

/* A sandbox: one task container with a bundle's runtime, created for one caller. This is its
 * record; what happens to it (create, setup, delete, expiry) is lifecycle.c, its D-Bus face
 * sandbox-dbus.c, and the backend that makes it one of backend.c's. */

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <systemd/sd-bus.h>
#include <systemd/sd-event.h>

#include "agentix/agentd-backend.h"
#include "log.h"
#include "sandbox-config.h"

typedef struct Backend Backend;
typedef struct Manager Manager;
typedef struct SandboxSetup SandboxSetup;

typedef enum SandboxState {
        SANDBOX_CREATING,
        SANDBOX_RUNNING,
        SANDBOX_EXITED,
        SANDBOX_FAILED,
        SANDBOX_REMOVING,
        SANDBOX_PAUSED,           /* its processes frozen (Pause()); its runtime answers after Resume() */
        SANDBOX_HIBERNATED,       /* stopped, its processes and memory in a checkpoint (Hibernate()) */
        _SANDBOX_STATE_MAX,
} SandboxState;

/* A sandbox's last usage reading, for the next one's cpu_percent (sandbox-stats.c). */
typedef struct SandboxStatsSample {
        uint64_t time;     /* µs since the epoch; 0: none yet */
        uint64_t cpu_usec;
} SandboxStatsSample;

typedef struct Sandbox {
        char *id;                 /* 16 hex digits, a letter first */
        char *path;               /* /org/agentix/Agentd1/sandbox/<id> */
        SandboxConfig *config;
        Manager *manager;         /* whose it is (the backend's callbacks get the sandbox) */
        Backend *backend;         /* where it runs */
        AgentdSandboxSpec spec;   /* what the backend was asked for: points into this record */
        uid_t owner;
        uint64_t created_at;      /* CLOCK_REALTIME, µs */
        uint64_t expires_at;
        SandboxState state;
        char *container_id;
        char *bundle_id;          /* the bundle image's id (sha256:…): which carrier it uses */
        char *runtime_url;        /* http://127.0.0.1:PORT once running */
        char *token;
        AgentdJob *create_job;    /* while the backend makes it */
        SandboxSetup *setup;      /* while its setup command runs */
        bool setup_done;
        sd_bus_message *create_call; /* CreateSandbox, answered when the runtime answers /health */
        sd_bus_message **delete_calls; /* Delete()/DeleteSandbox() waiting for the container to go */
        size_t n_delete_calls;
        char *failure_name, *failure_message; /* a create that failed after the container started */
        sd_bus_track *track;      /* bind_to_caller: the creator on the bus */
        char *bound_to;           /* its unique name, kept by the backend for a restarted agentd */
        sd_bus_slot *owner_check; /* adopted: is that creator still on the bus? */
        bool unconfirmed;         /* a resync has not seen it in the backend yet */
        struct Pool *pool;        /* a warm pool's member (owned by no one, not registered), or NULL */
        char *pool_name;          /* the pool it was made for (kept once claimed: the Pool property) */
        struct SandboxClaim *claim; /* runtime::claim on its way */
        SandboxStatsSample stats_sample;
        struct RuntimeStats *runtime_stats; /* its runtime's reading on its way (runtime-stats.h) */
        struct StatsAsk *stats_asks; /* its backend's readings on their way (sandbox_read_stats()) */
        struct RuntimeTls *tls_handover; /* its runtime's TLS certificate on its way (sandbox-tls.h) */
        void (*tls_done)(struct Sandbox *s, const char *error);
        uint64_t tls_not_after;   /* its runtime's certificate ends then (unix seconds), 0: unknown */
        sd_event_source *tls_renew; /* a new certificate due (sandbox-tls.h) */
        struct LiveOp *live;      /* a Hibernate() or its Resume() on its way (hibernate.h) */
        bool live_saving;         /* and it is a Hibernate() */
} Sandbox;

const char *sandbox_state_to_string(SandboxState s);

/* s's usage, to done() (once, never before this returns): from its backend's stats(), else
 * from its runtime (runtime-stats.h); from its runtime too when the backend says it cannot
 * read (BackendUnavailable) while s runs. A negative errno when it cannot be asked (done() is not
 * called): -ENOTCONN not running, -EAGAIN paused with only its runtime to ask, -EBUSY too many
 * askers waiting. A runtime that serves TLS is verified against its backend's runtime_ca_pem. */
int sandbox_read_stats(sd_event *event, Sandbox *s, agentd_stats_t done, void *userdata);

/* A Hibernate() or a Resume() of a hibernated sandbox on its way (hibernate.h). */
static inline bool sandbox_live_in_progress(const Sandbox *s) {
        return s->live != NULL;
}

/* Hibernated, or being hibernated: what MaxHibernated= counts. */
static inline bool sandbox_hibernate_counted(const Sandbox *s) {
        return s->state == SANDBOX_HIBERNATED || s->live_saving;
}

/* Not in the middle of agentd's own doing (a create or a delete). */
static inline bool sandbox_state_is_settled(SandboxState s) {
        return s == SANDBOX_RUNNING || s == SANDBOX_EXITED || s == SANDBOX_FAILED || s == SANDBOX_PAUSED ||
               s == SANDBOX_HIBERNATED;
}

/* A new record in state creating, taking config; id and token are fresh and random. */
int sandbox_new(SandboxConfig *config, uid_t owner, uint64_t default_ttl_sec, Sandbox **ret);
/* A record for a sandbox found in Docker (agentd restarted): its id, token and times as they
 * were; state running. Takes config; copies the strings. */
int sandbox_restore(SandboxConfig *config, uid_t owner, const char *id, const char *token, uint64_t created_at,
                    uint64_t expires_at, Sandbox **ret);
/* A fresh runtime token (64 hex digits), as a new sandbox gets. */
int sandbox_new_token(char **ret);
/* Fill s->spec from the record (before the backend's create). */
void sandbox_fill_spec(Sandbox *s);
/* Whether a sandbox made so can hibernate (its backend willing): gVisor, its own network stack. */
bool sandbox_spec_checkpointable(const AgentdSandboxSpec *spec);
/* Take the backend's place of s (its runtime URL, container and bundle ids). */
int sandbox_set_place(Sandbox *s, const AgentdSandboxPlace *place);

/* Free the record. Calls still waiting are answered: a create with StartFailed, deletes with
 * success. (Jobs, setup and tracking are the lifecycle's to stop first.) */
Sandbox *sandbox_free(Sandbox *s);

/* The effective uid of the sender of m. */
int sender_uid(sd_bus_message *m, uid_t *ret);
/* Who sees a sandbox: its owner and root. */
static inline bool sandbox_visible_to(const Sandbox *s, uid_t uid) {
        return uid == 0 || uid == s->owner;
}

/* A log line about one sandbox. In the journal it carries SANDBOX_ID=, OWNER_UID= and BACKEND=
 * (backend may be NULL), so `journalctl SANDBOX_ID=…` tells one sandbox's story. */
int sandbox_log_internal(const char *id, uid_t owner, const char *backend, int level, int error, const char *file,
                         int line, const char *fmt, ...) _printf_(8, 9);
#define log_sandbox_id_full(id, owner, backend, level, ...)                                              \
        ((level) <= log_get_max_level()                                                                  \
                 ? (void) sandbox_log_internal(id, owner, backend, level, 0, __FILE__, __LINE__, __VA_ARGS__) \
                 : (void) 0)
#define log_sandbox_full(s, level, ...) \
        log_sandbox_id_full((s)->id, (s)->owner, (s)->backend ? (s)->backend->name : NULL, level, __VA_ARGS__)
#define log_sandbox_info(s, ...) log_sandbox_full(s, LOG_INFO, __VA_ARGS__)
#define log_sandbox_warning(s, ...) log_sandbox_full(s, LOG_WARNING, __VA_ARGS__)

/* Has the caller (sender of m) the right to act on s: its owner, or root? Sets NotOwner. */
int sandbox_check_caller(Sandbox *s, sd_bus_message *m, sd_bus_error *error);

/* SPDX-License-Identifier: MIT */
#pragma once

/* agentd backends: where sandboxes run.
 *
 * A backend is a shared object NAME.so in agentd's backend directory ([Backends] Directory= in
 * agentd.conf(5)), loaded when [Backends] Load= names it. It exports one symbol,
 * `agentd_backend`, an AgentdBackendOps with abi == AGENTD_BACKEND_ABI. Build one with
 * `pkg-config --cflags agentd-backend` and install it to `pkg-config --variable=backenddir
 * agentd-backend`; see agentd-backend(3).
 *
 * Every call happens on agentd's one thread, from its sd-event loop, which is that thread's
 * sd_event_default(): a backend adds its sources (sockets, timers) there and never blocks.
 * Callbacks may run before the call that started them returns. */

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#define AGENTD_BACKEND_ABI 7 /* 2: runtimes(); 3: logs(); 4: pause(), snapshots, AGENTD_FOUND_PAUSED; 5: stats();
                              * 6: AgentdSandboxSpec.tls, AgentdBackendOps.remote_runtimes;
                              * 7: hibernate(), wake(), AGENTD_FOUND_HIBERNATED, AgentdSandboxSpec.checkpointable */

/* The errors a backend reports (error_name arguments): agentd answers the caller with them. */
#define AGENTD_ERROR_PREFIX "org.agentix.Agentd1."
#define AGENTD_ERROR_NO_SUCH_SANDBOX AGENTD_ERROR_PREFIX "NoSuchSandbox"
#define AGENTD_ERROR_INVALID_CONFIG AGENTD_ERROR_PREFIX "InvalidConfig"
#define AGENTD_ERROR_IMAGE_NOT_FOUND AGENTD_ERROR_PREFIX "ImageNotFound"
#define AGENTD_ERROR_BUNDLE_NOT_FOUND AGENTD_ERROR_PREFIX "BundleNotFound"
#define AGENTD_ERROR_BACKEND_UNAVAILABLE AGENTD_ERROR_PREFIX "BackendUnavailable"
#define AGENTD_ERROR_START_FAILED AGENTD_ERROR_PREFIX "StartFailed"
#define AGENTD_ERROR_TOO_MANY_SANDBOXES AGENTD_ERROR_PREFIX "TooManySandboxes"
#define AGENTD_ERROR_NOT_OWNER AGENTD_ERROR_PREFIX "NotOwner"
#define AGENTD_ERROR_NO_SUCH_SNAPSHOT AGENTD_ERROR_PREFIX "NoSuchSnapshot"
#define AGENTD_ERROR_TOO_MANY_SNAPSHOTS AGENTD_ERROR_PREFIX "TooManySnapshots"
#define AGENTD_ERROR_IN_USE AGENTD_ERROR_PREFIX "InUse"
#define AGENTD_ERROR_NOT_RUNNING AGENTD_ERROR_PREFIX "NotRunning"
#define AGENTD_ERROR_NOT_SUPPORTED AGENTD_ERROR_PREFIX "NotSupported"
#define AGENTD_ERROR_CHECKPOINT_FAILED AGENTD_ERROR_PREFIX "CheckpointFailed"

/* The environment variable agentd sets to [Backends] Timeout= (seconds, fractions allowed):
 * how long a backend waits for its service before it fails a request. */
#define AGENTD_BACKEND_TIMEOUT_ENV "AGENTD_BACKEND_TIMEOUT"

/* A sandbox to make, as agentd checked it. A backend records what it needs to give it back
 * from adopt() after agentd restarts (Docker: container labels). */
typedef struct AgentdSandboxSpec {
        const char *id;                 /* 16 hex digits, a letter first: unique on the host */
        const char *token;              /* the runtime's AGENTIX_TOKEN */
        uid_t owner;
        uint64_t created_at;            /* unix time, seconds */
        uint64_t expires_at;
        const char *image;              /* the task image */
        const char *bundle;             /* the bundle image (agentixctl build) */
        const char *platform;           /* os/arch, or NULL */
        const char *network;            /* or NULL: the backend's default */
        const char *workdir;            /* or NULL */
        const char *const *env;         /* KEY=VALUE, NULL-terminated, or NULL */
        const char *const *labels;      /* key=value, the caller's own, or NULL */
        const char *bound_to;           /* bind_to_caller: the creator's unique bus name, or NULL */
        double cpus;                    /* never unlimited */
        uint64_t memory;                /* bytes */
        uint64_t pids;
        /* Fields are only ever added here, at the end. */
        const char *runtime;            /* the OCI runtime (runc, runsc), or NULL: the backend's default */
        bool read_only;                 /* a read-only root filesystem; /tmp and workdir writable */
        const char *user;               /* USER[:GROUP] the runtime and its commands run as, or NULL: root */
        const char *const *egress;      /* CIDRs it may reach, NULL-terminated (empty: none, no network at
                                         * all); NULL: no egress list, the network's own rules */
        const char *pool;               /* made for agentd's warm pool of this name (the runtime gets
                                         * AGENTIX_CLAIMABLE=1), or NULL; given back by adopt() */
        bool tls;                       /* ABI 6: the runtime serves TLS with a certificate agentd
                                         * hands it once it answers /health: it gets AGENTIX_TLS=1
                                         * (agentix-server(8)), and the backend keeps the flag where
                                         * adopt() gives it back (not where a snapshot takes it) */
        bool checkpointable;            /* ABI 7: its runtime can hold still for a checkpoint (gVisor
                                         * with its own network stack): it gets AGENTIX_CHECKPOINT=1,
                                         * every other sandbox AGENTIX_CHECKPOINT=0; adopt() gives it back */
} AgentdSandboxSpec;

/* Where a made (or found) sandbox's runtime is. */
typedef struct AgentdSandboxPlace {
        const char *runtime_url;        /* http://HOST:PORT of agentix-server */
        const char *container_id;       /* the backend's id for it (the ContainerId property), or NULL */
        const char *bundle_id;          /* the bundle image's id, what prune() is asked about, or NULL */
        const char *token;              /* the runtime's own token when it was not started with
                                         * spec->token (a runtime the backend did not start), or NULL */
} AgentdSandboxPlace;

typedef enum AgentdFoundState {
        AGENTD_FOUND_RUNNING,
        AGENTD_FOUND_EXITED,
        AGENTD_FOUND_HALF_MADE,         /* never started, or missing what a sandbox needs: agentd removes it */
        AGENTD_FOUND_PAUSED,            /* running, its processes frozen (pause()) */
        AGENTD_FOUND_HIBERNATED,        /* ABI 7: stopped with its checkpoint kept (hibernate()): wake() */
} AgentdFoundState;

typedef struct AgentdBackend AgentdBackend; /* the backend's own state */
typedef struct AgentdJob AgentdJob;         /* a create in progress */

/* error_name NULL: done; else an AGENTD_ERROR_* and a message a person can act on. */
typedef void (*agentd_made_t)(void *userdata, const AgentdSandboxPlace *place, const char *error_name,
                              const char *message);
typedef void (*agentd_removed_t)(void *userdata, const char *error_name, const char *message);
/* spec->token, ->owner, ->created_at and ->expires_at must be set; NULL strings are "". */
typedef void (*agentd_found_t)(void *userdata, const AgentdSandboxSpec *spec, const AgentdSandboxPlace *place,
                               AgentdFoundState state);
/* action: "start", "die", "oom", "pause", "unpause", "destroy" (gone outside agentd) or "fail" (it died
 * of a fault, not an exit: a swarm task failed or its node went down; state `failed`) for that sandbox; or, with
 * sandbox_id NULL, "resync": events may have been missed (the service restarted), and agentd
 * calls adopt() again to bring its state in line. */
typedef void (*agentd_event_t)(void *userdata, const char *sandbox_id, const char *action);

/* A sandbox's log: its runtime's standard output and error as they came (text: size bytes,
 * borrowed, not NUL-terminated), or error_name and message. */
typedef void (*agentd_logs_t)(void *userdata, const char *text, size_t size, const char *error_name,
                              const char *message);

/* An operation without a result: error_name NULL when done, else an AGENTD_ERROR_* and a message. */
typedef void (*agentd_done_t)(void *userdata, const char *error_name, const char *message);

/* A snapshot: a sandbox's filesystem (never the bundle at /nix, never its token) as an image a
 * create can name. The backend records owner and sandbox with the image. */
typedef struct AgentdSnapshot {
        const char *image;              /* the name a create gives as `image` (REPOSITORY:TAG) */
        const char *sandbox_id;         /* the sandbox it was taken of */
        uid_t owner;
        uint64_t created_at;            /* unix time, seconds */
        uint64_t size;                  /* bytes, the image's own and its base's */
} AgentdSnapshot;

/* snapshot(): the image's name; or error_name and message. */
/* What a sandbox uses now (stats()). AGENTD_STATS_UNKNOWN where the backend cannot tell. */
#define AGENTD_STATS_UNKNOWN UINT64_MAX
typedef struct AgentdSandboxStats {
        uint64_t time;                  /* when read: µs since the epoch */
        uint64_t cpu_usec;              /* CPU time of all its processes, since it started */
        uint64_t memory_current;        /* bytes charged to it now (page cache included) */
        uint64_t memory_peak;           /* the most it was charged */
        uint64_t memory_limit;          /* AGENTD_STATS_UNKNOWN also when unlimited */
        uint64_t pids_current;
        uint64_t pids_limit;
        uint64_t net_rx_bytes;          /* its network namespace's interfaces, loopback aside */
        uint64_t net_tx_bytes;
        uint64_t io_read_bytes;         /* block devices, since it started */
        uint64_t io_write_bytes;
} AgentdSandboxStats;
typedef void (*agentd_stats_t)(void *userdata, const AgentdSandboxStats *stats, const char *error_name,
                               const char *message);

typedef void (*agentd_snapshot_t)(void *userdata, const char *image, const char *error_name, const char *message);
/* snapshots(): every snapshot the backend holds (borrowed), or error_name and message. */
typedef void (*agentd_snapshots_t)(void *userdata, const AgentdSnapshot *snapshots, size_t n, const char *error_name,
                                   const char *message);

typedef struct AgentdBackendOps {
        unsigned abi;                   /* AGENTD_BACKEND_ABI */
        const char *name;               /* as in Load= and the `backend` config key */

        /* No arguments: a backend reads its settings from the environment (as the CLI of its
         * service would). A missing or bad setting fails here, before anything is made: return
         * a negative errno and set *ret_error (malloc'ed) to a message naming the variable. */
        int (*new)(AgentdBackend **ret, char **ret_error);
        void (*free)(AgentdBackend *b);

        /* Make the sandbox and wait until its runtime answers GET /health; then made() with its
         * place. On failure, remove what was made, then made() with the error. spec and its
         * strings stay valid until made() or cancel(). Set *ret_job before made() can run (it
         * may run before create() returns); return an error only if made() will not run. An image
         * that is a snapshot of another owner than spec->owner (unless root) is NotOwner. */
        int (*create)(AgentdBackend *b, const AgentdSandboxSpec *spec, agentd_made_t made, void *userdata,
                      AgentdJob **ret_job);
        /* Stop a create: made() is never called; what it made is left for remove(). */
        void (*cancel)(AgentdJob *job);
        /* Remove the sandbox with this id and everything it holds; removed() (may be NULL) once it is
         * gone. Removing what is not there is success. */
        int (*remove)(AgentdBackend *b, const char *sandbox_id, agentd_removed_t removed, void *userdata);

        /* Optional (NULL: nothing to do). */
        /* found() for each sandbox agentd made here (at start: an earlier agentd's too; after a
         * "resync": all of them), then done() with 0, or a negative errno when the service could
         * not say what it holds (found() may then have missed some: agentd drops none). */
        int (*adopt)(AgentdBackend *b, agentd_found_t found, void (*done)(void *userdata, int error),
                     void *userdata);
        /* Report changes made outside agentd until free(), across restarts of the service. */
        int (*watch)(AgentdBackend *b, agentd_event_t on_event, void *userdata);
        /* A sandbox went: drop shared things (bundle carriers) no longer wanted and not in_use(). */
        void (*prune)(AgentdBackend *b, bool (*in_use)(const char *bundle_id, void *userdata), void *userdata);
        /* The OCI runtimes the service offers (the `runtime` key's values), as a NULL-terminated
         * malloc'ed list in *ret; -EAGAIN while not known yet (it asks at watch() and after a
         * resync). */
        int (*runtimes)(AgentdBackend *b, char ***ret);
        /* The last `lines` lines of what the sandbox's runtime wrote (its container's log), then
         * done() once (not before logs() returns 0). */
        int (*logs)(AgentdBackend *b, const char *sandbox_id, uint64_t lines, agentd_logs_t done, void *userdata);
        /* Freeze (pause true) or thaw every process of the sandbox, then done() once. Pausing a
         * paused sandbox, or resuming a running one, is success. */
        int (*pause)(AgentdBackend *b, const char *sandbox_id, bool pause, agentd_done_t done, void *userdata);
        /* Commit the sandbox's filesystem as image `image` (REPOSITORY[:TAG]; NULL: the backend
         * names it agentix-snapshot/<id>:<n>, n one more than the last), consistent for files
         * written before the call, then done() with its name. An image of that name that is not
         * a snapshot of `owner` (root: of anyone) is not replaced (NotOwner). */
        int (*snapshot)(AgentdBackend *b, const char *sandbox_id, uid_t owner, const char *image,
                        agentd_snapshot_t done, void *userdata);
        /* Every snapshot, of every owner (agentd filters). */
        int (*snapshots)(AgentdBackend *b, agentd_snapshots_t done, void *userdata);
        /* Remove snapshot `image` of `owner` (root: of anyone; else NotOwner), then done():
         * NoSuchSnapshot when it is no snapshot, InUse while a sandbox runs from it. */
        int (*delete_snapshot)(AgentdBackend *b, const char *image, uid_t owner, agentd_done_t done, void *userdata);
        /* ABI 5. What the sandbox uses now, then done() once: possibly before stats() returns 0
         * (numbers the backend can read at once), never when it returns an error. Cheap enough
         * to be asked for every sandbox every second. */
        int (*stats)(AgentdBackend *b, const char *sandbox_id, agentd_stats_t done, void *userdata);
        /* ABI 6. Its runtime URLs name addresses other machines reach (a swarm node's): agentd's
         * [Runtime] TLS=auto turns TLS on for it. */
        bool remote_runtimes;
        /* ABI 7. Save the sandbox's processes, memory and files as a checkpoint the backend keeps
         * with it, and stop it; then done(). agentd has asked its runtime to hold still first
         * (POST /runtime/hold: no listener watched, no connection open). NotSupported when its
         * OCI runtime cannot (the message names what can); CheckpointFailed when the save failed:
         * the sandbox may then be stopped or still running, and wake(from_checkpoint false)
         * brings it back either way. */
        int (*hibernate)(AgentdBackend *b, const char *sandbox_id, agentd_done_t done, void *userdata);
        /* ABI 7. Run the sandbox again: from its checkpoint (from_checkpoint), or as it is (still
         * running: its runtime is told to listen again) or afresh from its files (stopped); then
         * tell its runtime to listen again (SIGUSR2, agentix-server(8)), wait until it answers
         * /health and made() with its place (its runtime URL may have changed). The checkpoint
         * is removed once the sandbox runs from it. */
        int (*wake)(AgentdBackend *b, const char *sandbox_id, bool from_checkpoint, agentd_made_t made,
                    void *userdata);
} AgentdBackendOps;

#define AGENTD_BACKEND_SYMBOL "agentd_backend"
#define AGENTD_BACKEND_DEFINE(...) \
        __attribute__((visibility("default"))) const AgentdBackendOps agentd_backend = { __VA_ARGS__ }

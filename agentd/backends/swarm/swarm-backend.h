/* SPDX-License-Identifier: MIT */
#pragma once

/* Sandboxes as Docker Swarm services, through the Engine API of a swarm manager
 * (agentd-swarm(7) is the operator's guide).
 *
 * One service per sandbox, named agentix-<id>: one replica, never restarted (a sandbox that dies
 * stays dead), the create's limits as its reservations and limits, agentd's labels, the
 * runtime's port 8000 published in host mode on the node that runs it (the routing mesh needs
 * IPVS, which these kernels may lack; a host-mode port needs nothing but the node's address).
 *
 * The bundle: services cannot take a carrier's volume with VolumesFrom. The bundle image is in
 * a registry every node pulls from; a global job fills a named volume agentix-bundle-<digest12>
 * from it on every node (swarm-bundle.c) and labels the nodes that have it, and each service
 * mounts that volume at /nix with a placement constraint on the label, so no task lands on a
 * node whose volume would be empty.
 *
 * What the swarm says about tasks comes as state, not events (the manager sends events for
 * services and nodes only): swarm-look.c reads services, tasks and nodes in one look; adoption
 * is one look, and the watch looks every second and whenever the manager sends an event. */

#include <systemd/sd-event.h>

#include "agentix/agentd-backend.h"
#include "curl-event.h"
#include "docker-client.h"
#include "engine-util.h"

typedef struct AgentdBackend SwarmBackend;
typedef struct AgentdJob SwarmCreate;
typedef struct SwarmFill SwarmFill;
typedef struct SwarmLook SwarmLook;

#define SWARM_HOST_ENV "SWARM_HOST"           /* the manager's Engine API: unix://PATH or tcp://HOST:PORT */
#define SWARM_CERT_PATH_ENV "SWARM_CERT_PATH" /* a directory with ca.pem, cert.pem, key.pem: TLS to it */
#define SWARM_REGISTRY_ENV "SWARM_REGISTRY"   /* HOST:PORT: where image names without a registry are */

#define SWARM_SERVICE_PREFIX "agentix-"
#define SWARM_RUNTIME_PORT 8000

/* What a look found a sandbox's service doing. */
typedef enum SwarmCondition {
        SWARM_STARTING,   /* no task yet, or one on its way to running */
        SWARM_RUNNING,    /* its task runs on a node that is up */
        SWARM_EXITED,     /* its task ended (complete, shut down) */
        SWARM_FAILED,     /* its task failed or was rejected, or its node is down */
        _SWARM_CONDITION_MAX,
} SwarmCondition;

/* A sandbox as one look saw it (borrowed from the look's JSON). */
typedef struct SwarmSandbox {
        const char *id;           /* the sandbox's id (its org.agentix.sandbox label) */
        json_t *service;          /* GET /services entry */
        json_t *task;             /* its newest task, or NULL */
        json_t *node;             /* the node of that task, or NULL */
        SwarmCondition condition;
        char runtime_url[96];     /* http://NODE:PORT once the task runs, else "" */
} SwarmSandbox;

/* error < 0: the manager could not be asked (message says why); sandboxes then empty. */
typedef void (*swarm_look_t)(SwarmBackend *b, int error, const char *message, const SwarmSandbox *sandboxes, size_t n,
                             void *userdata);

struct AgentdBackend {
        sd_event *event;
        DockerClient *manager;
        CurlEvent *probes;        /* /health of the runtimes being made */
        char *host;               /* $SWARM_HOST, for messages */
        char *registry;           /* $SWARM_REGISTRY, or NULL */
        char *default_runtime;    /* the manager's DefaultRuntime: the only one services get */
        SwarmFill *fills;         /* bundles being (or lately) put on the nodes */
        struct SwarmDigest {      /* registry digests lately asked for (swarm-registry.c) */
                char *ref, *digest;
                uint64_t at;      /* CLOCK_MONOTONIC µs; 0: never fresh */
        } *digests;
        size_t n_digests;
        /* the watch */
        agentd_event_t on_event;
        void *event_userdata;
        sd_event_source *look_timer;
        SwarmLook *look;          /* the watch's look in progress */
        bool look_again;          /* an event came while it ran */
        DockerRequest *events;    /* the manager's node and service events */
        sd_event_source *events_retry;
        bool lost;                /* the last look failed: a resync follows the next one that works */
        /* what the watch last told agentd, per sandbox */
        struct SwarmKnown {
                char id[32];
                SwarmCondition condition;
                bool seen;        /* in the latest look */
        } *known;
        size_t n_known;
};

/* swarm-look.c: one look at services, tasks and nodes. */
int swarm_look(SwarmBackend *b, swarm_look_t done, void *userdata, SwarmLook **ret);
void swarm_look_cancel(SwarmLook *l);
const char *swarm_condition_to_string(SwarmCondition c);
/* Of tasks (GET /tasks), the newest of service_id's (NULL: of any), or NULL. */
json_t *swarm_newest_task(json_t *tasks, const char *service_id);
/* A task state from which a task never runs again (complete, shutdown, remove, failed,
 * rejected, orphaned). */
bool swarm_task_ended(const char *state);

/* swarm-bundle.c: the bundle whose registry digest is `digest` (sha256:…), pulled as `ref`, in
 * volume agentix-bundle-<digest12> on the nodes. ready() once at least one ready node has it
 * (error_name NULL), or with the error. Nodes that do not have it yet get it in the background.
 * *slot holds the look at the nodes until it is answered (cancel it, then forget, to stop). */
typedef void (*swarm_bundle_ready_t)(void *userdata, const char *error_name, const char *message);
int swarm_bundle_ensure(SwarmBackend *b, const char *ref, const char *digest, swarm_bundle_ready_t ready,
                        void *userdata, DockerRequest **slot);
/* Forget a waiter (its create was cancelled); the fill goes on. */
void swarm_bundle_forget(SwarmBackend *b, void *userdata);
void swarm_bundle_free_all(SwarmBackend *b);
/* The node label a bundle's nodes carry, and the volume (buffers of 64). */
void swarm_bundle_names(const char *digest, char label[static 64], char volume[static 64]);

/* swarm-create.c */
int swarm_create(SwarmBackend *b, const AgentdSandboxSpec *spec, agentd_made_t made, void *userdata,
                 SwarmCreate **ret_job);
void swarm_cancel(SwarmCreate *j);

/* swarm-registry.c: an image name as the nodes pull it, with $SWARM_REGISTRY/ in front when it
 * names no registry (malloc'ed). */
char *swarm_image_ref(SwarmBackend *b, const char *name);
/* REF's digest (sha256:…) or an error (status: HTTP, or a negative errno). done() may run
 * before swarm_resolve() returns (a digest asked for within the last 2 s; *ret is then NULL). */
typedef void (*swarm_resolved_t)(SwarmBackend *b, int status, const char *digest, const char *message,
                                 void *userdata);
int swarm_resolve(SwarmBackend *b, const char *ref, swarm_resolved_t done, void *userdata, DockerRequest **ret);
void swarm_digests_free(SwarmBackend *b);

/* swarm-watch.c */
int swarm_adopt(SwarmBackend *b, agentd_found_t found, void (*done)(void *userdata, int error), void *userdata);
int swarm_watch(SwarmBackend *b, agentd_event_t on_event, void *userdata);
void swarm_watch_stop(SwarmBackend *b);

/* swarm-backend.c: remove, logs, runtimes. */
int swarm_remove(SwarmBackend *b, const char *sandbox_id, agentd_removed_t removed, void *userdata);
int swarm_logs(SwarmBackend *b, const char *sandbox_id, uint64_t lines, agentd_logs_t done, void *userdata);
int swarm_runtimes(SwarmBackend *b, char ***ret);

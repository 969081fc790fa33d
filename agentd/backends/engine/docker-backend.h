/* SPDX-License-Identifier: MIT */
#pragma once

/* Sandboxes as containers through the Docker Engine API, which dockerd serves and Podman's
 * `podman system service` serves too: the docker and podman backends (docker-plugin.c,
 * podman-plugin.c) are this code with their own socket and settings.
 *
 * One carrier per bundle image (created, never started: its /nix volume is what task
 * containers take with VolumesFrom), and one task container per sandbox, named agentix-<id>,
 * with agentix-server from the bundle as its entrypoint, port 8000 published on 127.0.0.1
 * only, labels, and cpu/memory/pids limits. A create is ready when the runtime answers
 * /health; any failure on the way removes what it made. */

#include <systemd/sd-event.h>

#include "agentix/agentd-backend.h"
#include "buffer.h"
#include "curl-event.h"
#include "docker-client.h"
#include "engine-util.h"
#include "docker-network.h"
#include "docker-shards.h"
#include "strmap.h"

typedef struct AgentdBackend DockerBackend;
typedef struct AgentdJob CreateJob;

/* service: what messages call it ("Docker", "Podman"); socket: its API's unix socket. */
int docker_backend_new(sd_event *event, const char *service, const char *socket, DockerBackend **ret);
DockerBackend *docker_backend_free(DockerBackend *b);
/* Extra HostConfig for every task container (Podman: Ulimits), taken. */
void docker_backend_set_host_config(DockerBackend *b, json_t *extra);

/* The AgentdBackendOps calls (agentix/agentd-backend.h). */
int docker_backend_create(DockerBackend *b, const AgentdSandboxSpec *spec, agentd_made_t made, void *userdata,
                          CreateJob **ret_job);
void docker_backend_cancel(CreateJob *j);
int docker_backend_remove(DockerBackend *b, const char *sandbox_id, agentd_removed_t removed, void *userdata);
int docker_backend_adopt(DockerBackend *b, agentd_found_t found, void (*done)(void *userdata, int error),
                         void *userdata);
int docker_backend_watch(DockerBackend *b, agentd_event_t on_event, void *userdata);
void docker_backend_prune_carriers(DockerBackend *b, bool (*in_use)(const char *bundle_id, void *userdata),
                                   void *userdata);
int docker_backend_runtimes(DockerBackend *b, char ***ret);
int docker_backend_logs(DockerBackend *b, const char *sandbox_id, uint64_t lines, agentd_logs_t done, void *userdata);
int docker_backend_pause(DockerBackend *b, const char *sandbox_id, bool pause, agentd_done_t done, void *userdata);
/* docker-checkpoint.c: the checkpoint a hibernated sandbox's container keeps, under this name. */
#define DOCKER_CHECKPOINT_NAME "agentix-hibernate"
int docker_backend_hibernate(DockerBackend *b, const char *sandbox_id, agentd_done_t done, void *userdata);
int docker_backend_wake(DockerBackend *b, const char *sandbox_id, bool from_checkpoint, agentd_made_t made,
                        void *userdata);
int docker_backend_stats(DockerBackend *b, const char *sandbox_id, agentd_stats_t done, void *userdata);
/* docker-stats.c's kept pids: one sandbox's (it went), or all (the backend goes). */
void docker_stats_forget(DockerBackend *b, const char *sandbox_id);
void docker_stats_free_all(DockerBackend *b);
int docker_backend_snapshot(DockerBackend *b, const char *sandbox_id, uid_t owner, const char *image,
                            agentd_snapshot_t done, void *userdata);
int docker_backend_snapshots(DockerBackend *b, agentd_snapshots_t done, void *userdata);
int docker_backend_delete_snapshot(DockerBackend *b, const char *image, uid_t owner, agentd_done_t done,
                                   void *userdata);
/* Ask the service which runtimes it has (GET /info), unless known or being asked; on a
 * cgroup v1 host, also which disk holds its data (counting_disk). */
void docker_backend_ask_runtimes(DockerBackend *b);
/* What GET /info answered (from either asker). */
void docker_backend_take_info(DockerBackend *b, json_t *info);

/* Requests that take longer than this fail (default 30 s). */
void docker_backend_set_timeout(DockerBackend *b, uint64_t usec);

/* A backend on agentd's loop (sd_event_default()) with the request timeout of
 * $AGENTD_BACKEND_TIMEOUT: the common part of the plugins' constructors. */
int docker_backend_new_from_env(const char *service, const char *socket, DockerBackend **ret, char **ret_error);
void docker_backend_release(DockerBackend *b);

/* The AgentdBackendOps of a plugin named backend_name whose constructor is new_fn. */
#define ENGINE_BACKEND_DEFINE(backend_name, new_fn)                                  \
        AGENTD_BACKEND_DEFINE(.abi = AGENTD_BACKEND_ABI,                             \
                              .name = (backend_name),                                \
                              .new = (new_fn),                                       \
                              .free = docker_backend_release,                        \
                              .create = docker_backend_create,                       \
                              .cancel = docker_backend_cancel,                       \
                              .remove = docker_backend_remove,                       \
                              .adopt = docker_backend_adopt,                         \
                              .watch = docker_backend_watch,                         \
                              .prune = docker_backend_prune_carriers,                \
                              .runtimes = docker_backend_runtimes,                   \
                              .logs = docker_backend_logs,                           \
                              .pause = docker_backend_pause,                         \
                              .snapshot = docker_backend_snapshot,                   \
                              .snapshots = docker_backend_snapshots,                 \
                              .delete_snapshot = docker_backend_delete_snapshot,     \
                              .stats = docker_backend_stats,                         \
                              .hibernate = docker_backend_hibernate,                 \
                              .wake = docker_backend_wake)


/* Whose snapshot an image is (its inspect), seen by uid (root may use and replace any). */
typedef enum DockerSnapshotOwner {
        DOCKER_SNAPSHOT_NONE,   /* no snapshot: anyone's image */
        DOCKER_SNAPSHOT_OTHERS, /* another user's snapshot */
        DOCKER_SNAPSHOT_OURS,   /* uid's snapshot, or uid is root */
} DockerSnapshotOwner;
DockerSnapshotOwner docker_snapshot_owner(json_t *image, uid_t uid);


/* The backend's state, shared by its files: docker-backend.c (the backend, removes, runtimes),
 * docker-create.c (creates), docker-events.c (the event stream), docker-carriers.c (old
 * carriers), docker-adopt.c (finding them again), docker-network.c (agentd's networks),
 * docker-logs.c, docker-pause.c, docker-snapshot.c and docker-stats.c (what a running sandbox is
 * asked for), docker-checkpoint.c (hibernate and wake). */
struct AgentdBackend {
        sd_event *event;
        char *service;
        char *instance;           /* $AGENTD_INSTANCE (engine-util.h), NULL: none */
        DockerClient *docker;
        CurlEvent *probes;
        json_t *host_config;      /* merged into every task container's HostConfig */
        /* Podman fills a volume from its image when a container first starts, not at create:
         * start each carrier once (it prints its version and exits). */
        bool start_carriers;
        /* the event stream */
        agentd_event_t on_event;
        void *event_userdata;
        DockerRequest *events;
        DockerRequest *events_probe;  /* GET /version: does it answer again? */
        sd_event_source *events_retry;
        bool events_lost;
        long long events_since;   /* unix time of the last event seen */
        /* agentd's networks (docker-network.c); Podman's networks are not Docker's: there,
         * sandboxes go on its default network unless asked for another */
        NetworkShards *isolated;  /* NULL: this backend has no isolated network */
        NetworkShards *egress;    /* NULL: no egress lists here */
        json_t *runtimes;         /* GET /info's Runtimes, once asked; NULL again after a resync */
        DockerRequest *runtimes_request;
        StrMap *stats_pids;       /* sandbox id → its container's init pid (docker-stats.c) */
        char *counting_disk;      /* cgroup v1: the disk each sandbox gets a rule for (cgroup-stats.h) */
        bool live_restore_checked; /* the warning about Docker's live-restore is said once */
        char *resolv_conf;        /* docker-resolv.c's file, once written */
        bool resolv_conf_warned;
};

/* The resolv.conf a sandbox on gVisor's own network stack gets (the host's resolvers), written
 * at its first use under $STATE_DIRECTORY (or /var/lib/agentix); NULL when the host has none a
 * sandbox could reach (warned once), or it cannot be written. */
const char *docker_resolv_conf_path(DockerBackend *b);

/* SPDX-License-Identifier: MIT */
/* A sandbox's usage (stats()): the kernel's numbers for its container's cgroup and network
 * namespace (cgroup-stats.h), found through the container's init pid. The pid comes from one
 * inspect and is kept (b->stats_pids), so that a sandbox asked every second costs Docker
 * nothing after the first time; a kept pid that is not the container's any more (it stopped,
 * or was restarted) is dropped and asked for again. */
#include "cgroup-stats.h"
#include "docker-backend.h"
#include "macro.h"
#include "strmap.h"

typedef struct StatsPid {
        char sandbox_id[32];     /* the key */
        char container_id[80];   /* what its cgroup path names */
        pid_t pid;
} StatsPid;

typedef struct StatsJob {
        DockerBackend *backend;
        char sandbox_id[32];
        agentd_stats_t done;
        void *userdata;
} StatsJob;

static void forget(DockerBackend *b, const char *sandbox_id) {
        free(b->stats_pids ? strmap_remove(b->stats_pids, sandbox_id, strlen(sandbox_id)) : NULL);
}

void docker_stats_forget(DockerBackend *b, const char *sandbox_id) {
        forget(b, sandbox_id);
}

void docker_stats_free_all(DockerBackend *b) {
        size_t state = 0;
        StatsPid *p;

        if (!b->stats_pids)
                return;
        while ((p = strmap_iterate(b->stats_pids, &state)))
                free(p);
        b->stats_pids = strmap_free(b->stats_pids);
}

/* Read with a kept pid: 0 with done() called, or -ESRCH when the pid is not the container's. */
static int read_kept(DockerBackend *b, const StatsPid *p, agentd_stats_t done, void *userdata) {
        AgentdSandboxStats s;
        CgroupStats c;
        char message[160];
        int r;

        r = cgroup_stats_read("", p->pid, p->container_id, &c);
        if (r == -ESRCH)
                return r;
        if (r < 0) {
                snprintf(message, sizeof(message), "Cannot read its container's cgroup: %s", strerror(-r));
                done(userdata, NULL, AGENTD_ERROR_BACKEND_UNAVAILABLE, message);
                return 0;
        }
        _Static_assert(CGROUP_STATS_UNKNOWN == AGENTD_STATS_UNKNOWN, "one \"unknown\"");
        s = (AgentdSandboxStats) {
                .time = c.time, .cpu_usec = c.cpu_usec, .memory_current = c.memory_current,
                .memory_peak = c.memory_peak, .memory_limit = c.memory_limit, .pids_current = c.pids_current,
                .pids_limit = c.pids_limit, .net_rx_bytes = c.net_rx_bytes, .net_tx_bytes = c.net_tx_bytes,
                .io_read_bytes = c.io_read_bytes, .io_write_bytes = c.io_write_bytes,
        };
        done(userdata, &s, NULL, NULL);
        return 0;
}

static void on_inspect(DockerClient *d, int status, json_t *body, const char *error, void *userdata) {
        _cleanup_free_ StatsJob *j = userdata;
        json_t *state = json_object_get(body, "State");
        const char *id = json_string_value(json_object_get(body, "Id"));
        json_int_t pid = json_integer_value(json_object_get(state, "Pid"));
        _cleanup_free_ StatsPid *p = NULL;
        char buf[256];

        if (status == 404) {
                j->done(j->userdata, NULL, AGENTD_ERROR_NO_SUCH_SANDBOX, "Its container is gone.");
                return;
        }
        if (status != 200) {
                j->done(j->userdata, NULL, AGENTD_ERROR_BACKEND_UNAVAILABLE,
                        docker_error_message(status, body, error, buf, sizeof(buf)));
                return;
        }
        if (!json_is_true(json_object_get(state, "Running")) || pid <= 0 || !id || strlen(id) >= sizeof(p->container_id)) {
                j->done(j->userdata, NULL, AGENTD_ERROR_NOT_RUNNING, "Its container is not running: it uses nothing.");
                return;
        }
        p = calloc(1, sizeof(*p));
        if (!p) {
                j->done(j->userdata, NULL, AGENTD_ERROR_BACKEND_UNAVAILABLE, "Out of memory");
                return;
        }
        snprintf(p->sandbox_id, sizeof(p->sandbox_id), "%s", j->sandbox_id);
        snprintf(p->container_id, sizeof(p->container_id), "%s", id);
        p->pid = (pid_t) pid;
        if (read_kept(j->backend, p, j->done, j->userdata) == -ESRCH) {
                /* Docker says it runs with this pid, and this pid is not its container here:
                 * agentd sees other processes than dockerd does (another PID namespace, as when
                 * agentd runs in a container of its own); or it stopped just now. agentd asks
                 * its runtime then (sandbox_read_stats()). */
                j->done(j->userdata, NULL, AGENTD_ERROR_BACKEND_UNAVAILABLE,
                        "Its container's processes are not in agentd's sight (agentd runs in another PID "
                        "namespace than the container engine), or it stopped just now.");
                return;
        }
        forget(j->backend, p->sandbox_id);
        if (j->backend->stats_pids && strmap_put(j->backend->stats_pids, p->sandbox_id, strlen(p->sandbox_id), p) >= 0)
                TAKE_PTR(p);
}

int docker_backend_stats(DockerBackend *b, const char *sandbox_id, agentd_stats_t done, void *userdata) {
        StatsPid *kept;
        DockerRequest *req;
        StatsJob *j;
        char path[128];
        int r;

        if (strlen(sandbox_id) >= sizeof(kept->sandbox_id))
                return -EINVAL;
        if (!b->stats_pids && !(b->stats_pids = strmap_new()))
                return -ENOMEM;
        kept = strmap_get(b->stats_pids, sandbox_id, strlen(sandbox_id));
        if (kept && read_kept(b, kept, done, userdata) == 0)
                return 0;
        forget(b, sandbox_id);

        j = malloc(sizeof(*j));
        if (!j)
                return -ENOMEM;
        *j = (StatsJob) { .backend = b, .done = done, .userdata = userdata };
        snprintf(j->sandbox_id, sizeof(j->sandbox_id), "%s", sandbox_id);
        snprintf(path, sizeof(path), "/containers/agentix-%s/json", sandbox_id);
        r = docker_request(b->docker, "GET", path, NULL, 0, on_inspect, j, &req);
        if (r < 0)
                free(j);
        else
                docker_request_set_destroy(req, free); /* agentd stops before Docker answers */
        return r;
}

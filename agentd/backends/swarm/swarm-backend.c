/* SPDX-License-Identifier: MIT */
/* What a swarm sandbox is asked for once made: removing its service, its log, the runtimes. */
#include "buffer.h"
#include "log.h"
#include "strv.h"
#include "swarm-backend.h"

typedef struct Reply {
        agentd_removed_t removed;
        agentd_logs_t logs;
        void *userdata;
} Reply;

/* ---- remove ------------------------------------------------------------------------------ */

static void on_removed(DockerClient *d, int status, json_t *body, const char *error, void *userdata) {
        _cleanup_free_ Reply *rp = userdata;
        char buf[128];

        /* The manager removes the service at once; each node removes its container when it
         * hears (a node that is down does when it is back). */
        if (status == 200 || status == 404) {
                if (rp->removed)
                        rp->removed(rp->userdata, NULL, NULL);
                return;
        }
        if (rp->removed)
                rp->removed(rp->userdata, AGENTD_ERROR_BACKEND_UNAVAILABLE,
                            docker_error_message(status, body, error, buf, sizeof(buf)));
        else
                log_warning("Cannot remove a sandbox's swarm service (%s).",
                            docker_error_message(status, body, error, buf, sizeof(buf)));
}

int swarm_remove(SwarmBackend *b, const char *sandbox_id, agentd_removed_t removed, void *userdata) {
        Reply *rp = calloc(1, sizeof(*rp));
        DockerRequest *req;
        char path[128];
        int r;

        if (!rp)
                return -ENOMEM;
        *rp = (Reply) { .removed = removed, .userdata = userdata };
        snprintf(path, sizeof(path), "/services/" SWARM_SERVICE_PREFIX "%s", sandbox_id);
        r = docker_request(b->manager, "DELETE", path, NULL, 0, on_removed, rp, &req);
        if (r < 0)
                free(rp);
        else
                docker_request_set_destroy(req, free);
        return r;
}

/* ---- logs -------------------------------------------------------------------------------- */

static void on_logs(DockerClient *d, int status, const void *data, size_t size, const char *error, void *userdata) {
        _cleanup_free_ Reply *rp = userdata;
        _cleanup_buffer_ Buffer text = BUFFER_NULL;
        char buf[128];

        if (status == 404) {
                rp->logs(rp->userdata, NULL, 0, AGENTD_ERROR_NO_SUCH_SANDBOX, "The swarm has no service for it.");
                return;
        }
        if (status != 200) {
                _cleanup_(json_decrefp) json_t *body = size ? json_loadb(data, size, 0, NULL) : NULL;
                rp->logs(rp->userdata, NULL, 0, AGENTD_ERROR_BACKEND_UNAVAILABLE,
                         docker_error_message(status, body, error, buf, sizeof(buf)));
                return;
        }
        if (docker_logs_demultiplex(data, size, &text) < 0) {
                rp->logs(rp->userdata, NULL, 0, AGENTD_ERROR_BACKEND_UNAVAILABLE,
                         "The swarm's answer was no log stream.");
                return;
        }
        rp->logs(rp->userdata, (const char *) buffer_data(&text), text.len, NULL, NULL);
}

/* The manager gathers a service's log from the node that ran its task (GET /services/ID/logs,
 * as `docker service logs`); a node that is down has none to give. */
int swarm_logs(SwarmBackend *b, const char *sandbox_id, uint64_t lines, agentd_logs_t done, void *userdata) {
        Reply *rp = calloc(1, sizeof(*rp));
        DockerRequest *req;
        char path[160];
        int r;

        if (!rp)
                return -ENOMEM;
        *rp = (Reply) { .logs = done, .userdata = userdata };
        snprintf(path, sizeof(path), "/services/" SWARM_SERVICE_PREFIX "%s/logs?stdout=1&stderr=1&tail=%llu", sandbox_id,
                 (unsigned long long) lines);
        r = docker_request_raw(b->manager, path, on_logs, rp, &req);
        if (r < 0)
                free(rp);
        else
                docker_request_set_destroy(req, free);
        return r;
}

/* ---- runtimes ---------------------------------------------------------------------------- */

/* A service cannot choose its OCI runtime (swarm's ContainerSpec has no such field): every
 * sandbox gets the nodes' default, the one runtime this backend offers. */
int swarm_runtimes(SwarmBackend *b, char ***ret) {
        _cleanup_strv_free_ char **l = calloc(1, sizeof(char *));

        if (!l || strv_extend(&l, b->default_runtime) < 0)
                return -ENOMEM;
        *ret = TAKE_PTR(l);
        return 0;
}

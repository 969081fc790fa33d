/* SPDX-License-Identifier: MIT */
/* The docker backend: sandboxes as containers of dockerd, over the Engine API on $DOCKER_HOST. */
#include "docker-backend.h"
#include "docker-host.h"
#include "log.h"

static int docker_new(AgentdBackend **ret, char **ret_error) {
        _cleanup_free_ char *socket = NULL;
        uint64_t timeout = 0;
        sd_event *event = NULL;
        int r;

        log_parse_env();
        log_set_prefix("agentd");
        r = docker_socket_from_env(&socket);
        if (r == -EPROTONOSUPPORT) {
                if (asprintf(ret_error, "DOCKER_HOST=%s: the docker backend speaks to Docker on a unix:// socket only",
                             getenv("DOCKER_HOST")) < 0)
                        *ret_error = NULL;
                return r;
        }
        if (r < 0)
                return r;
        r = docker_backend_timeout_from_env(&timeout, ret_error);
        if (r < 0)
                return r;
        r = sd_event_default(&event);
        if (r < 0)
                return r;
        r = docker_backend_new(event, "Docker", socket, ret);
        sd_event_unref(event);
        if (r < 0)
                return r;
        if (timeout > 0)
                docker_backend_set_timeout(*ret, timeout);
        log_debug("docker backend: Docker at %s.", socket);
        return 0;
}

static void docker_free(AgentdBackend *b) {
        docker_backend_free(b);
}

AGENTD_BACKEND_DEFINE(
        .abi = AGENTD_BACKEND_ABI,
        .name = "docker",
        .new = docker_new,
        .free = docker_free,
        .create = docker_backend_create,
        .cancel = docker_backend_cancel,
        .remove = docker_backend_remove,
        .adopt = docker_backend_adopt,
        .watch = docker_backend_watch,
        .prune = docker_backend_prune_carriers,
);

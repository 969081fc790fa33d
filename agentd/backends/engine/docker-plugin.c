/* SPDX-License-Identifier: MIT */
/* The docker backend: sandboxes as containers of dockerd, over the Engine API on $DOCKER_HOST. */
#include "docker-backend.h"
#include "docker-host.h"
#include "macro.h"

static int docker_new(AgentdBackend **ret, char **ret_error) {
        _cleanup_free_ char *socket = NULL;
        int r;

        r = docker_socket_from_env(&socket);
        if (r == -EPROTONOSUPPORT)
                return backend_new_error(ret_error, r, "DOCKER_HOST=%s: the docker backend speaks to Docker on a unix:// "
                                         "socket only", getenv("DOCKER_HOST"));
        if (r < 0)
                return r;
        r = docker_backend_new_from_env("Docker", socket, ret, ret_error);
        if (r < 0)
                return r;
        /* Sandboxes go on agentd's isolated network unless asked otherwise, on its egress
         * network when they have an egress list. Without its firewall rules none is made on a
         * network (the error says why); other networks still work. */
        r = network_shards_new((*ret)->docker, "Docker", NETWORK_ISOLATED, &(*ret)->isolated, ret_error);
        if (r >= 0)
                r = network_shards_new((*ret)->docker, "Docker", NETWORK_EGRESS, &(*ret)->egress, ret_error);
        if (r < 0) {
                docker_backend_free(*ret);
                return r;
        }
        (void) network_shards_apply_firewall((*ret)->isolated);
        (void) network_shards_apply_firewall((*ret)->egress);
        return 0;
}

ENGINE_BACKEND_DEFINE("docker", docker_new);

/* SPDX-License-Identifier: MIT */
#include "docker-host.h"
#include "macro.h"

int docker_socket_from_env(char **ret) {
        const char *h = getenv("DOCKER_HOST");

        if (strempty(h))
                h = "unix:///var/run/docker.sock";
        if (!strneq(h, "unix://", 7))
                return -EPROTONOSUPPORT;
        *ret = strdup(h + 7);
        return *ret ? 0 : -ENOMEM;
}

/* SPDX-License-Identifier: MIT */
/* The podman backend: sandboxes as Podman containers, over the Docker-compatible API that
 * `podman system service` serves on $CONTAINER_HOST (Podman's own variable), so that hosts
 * without dockerd, and users without root, can run sandboxes. */
#include <errno.h>
#include <stdarg.h>
#include <sys/stat.h>
#include <unistd.h>

#include "docker-backend.h"
#include "macro.h"

#define CONTAINER_HOST_ENV "CONTAINER_HOST"

/* $CONTAINER_HOST (unix://PATH), else where `podman system service` puts its socket: the
 * system's for root, the user's own runtime directory's otherwise. */
static int podman_socket(char **ret, char **ret_error) {
        const char *v = getenv(CONTAINER_HOST_ENV), *runtime_dir;
        struct stat st;
        char *path;

        if (v) {
                if (!strneq(v, "unix://", 7) || v[7] != '/')
                        return backend_new_error(ret_error, -EINVAL, "%s=%s: the podman backend needs a unix:///PATH socket",
                                                 CONTAINER_HOST_ENV, v);
                path = strdup(v + 7);
        } else if (geteuid() == 0)
                path = strdup("/run/podman/podman.sock");
        else {
                runtime_dir = getenv("XDG_RUNTIME_DIR");
                if (!runtime_dir)
                        return backend_new_error(ret_error, -EINVAL, "Neither %s nor XDG_RUNTIME_DIR is set: set %s=unix:///PATH "
                                                 "to the socket of `podman system service`", CONTAINER_HOST_ENV, CONTAINER_HOST_ENV);
                if (asprintf(&path, "%s/podman/podman.sock", runtime_dir) < 0)
                        path = NULL;
        }
        if (!path)
                return -ENOMEM;
        /* Fail now, not at the first create: nothing answers there. */
        if (stat(path, &st) < 0 || !S_ISSOCK(st.st_mode)) {
                int r = backend_new_error(ret_error, -ENOENT, "No Podman API socket at %s (%s): start `podman system service "
                                          "unix://%s`, or set %s", path, v ? CONTAINER_HOST_ENV : "the default", path,
                                          CONTAINER_HOST_ENV);
                free(path);
                return r;
        }
        *ret = path;
        return 0;
}

static int podman_new(AgentdBackend **ret, char **ret_error) {
        _cleanup_free_ char *socket = NULL;
        json_t *ulimits;
        int r;

        r = podman_socket(&socket, ret_error);
        if (r < 0)
                return r;
        r = docker_backend_new_from_env("Podman", socket, ret, ret_error);
        if (r < 0)
                return r;
        /* Podman asks for more open files and processes than a host's hard limit may allow
         * (it then fails every start): ask for what any host grants. */
        ulimits = json_pack("{s:[{s:s, s:i, s:i}, {s:s, s:i, s:i}]}", "Ulimits", "Name", "nofile", "Soft", 1024, "Hard",
                            1024, "Name", "nproc", "Soft", 4096, "Hard", 4096);
        if (!ulimits) {
                docker_backend_free(*ret);
                return -ENOMEM;
        }
        docker_backend_set_host_config(*ret, ulimits);
        (*ret)->start_carriers = true;
        return 0;
}

ENGINE_BACKEND_DEFINE("podman", podman_new);

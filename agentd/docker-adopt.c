/* SPDX-License-Identifier: MIT */
/* Finding the sandbox containers of an earlier agentd in Docker, by their labels. */
#include "docker-backend.h"
#include "log.h"
#include "macro.h"

typedef struct Adopt {
        DockerBackend *backend;
        docker_found_t found;
        void (*done)(void *userdata);
        void *userdata;
        unsigned pending;        /* inspects not answered yet */
} Adopt;

static void adopt_unref(Adopt *a) {
        if (--a->pending > 0)
                return;
        a->done(a->userdata);
        free(a);
}

/* A request dropped unanswered (agentd stopping): let go of the walk without finishing it. */
static void adopt_drop(void *userdata) {
        Adopt *a = userdata;

        if (--a->pending == 0)
                free(a);
}

static void on_inspect(DockerClient *d, int status, json_t *body, const char *error, void *userdata) {
        Adopt *a = userdata;

        if (status == 200)
                a->found(body, a->userdata);
        adopt_unref(a);
}

static void on_list(DockerClient *d, int status, json_t *body, const char *error, void *userdata) {
        Adopt *a = userdata;
        size_t i;
        json_t *c;

        if (status != 200)
                log_warning("Cannot list agentd's containers in Docker (%s): sandboxes of an earlier agentd are not "
                            "adopted.", error ?: "Docker refused");
        json_array_foreach(status == 200 ? body : NULL, i, c) {
                const char *id = json_string_value(json_object_get(c, "Id"));
                char path[256];

                if (!id)
                        continue;
                snprintf(path, sizeof(path), "/containers/%s/json", id);
                DockerRequest *r;
                a->pending++;
                if (docker_request(d, "GET", path, NULL, 0, on_inspect, a, &r) < 0)
                        a->pending--;
                else
                        docker_request_set_destroy(r, adopt_drop);
        }
        adopt_unref(a); /* the list's own reference */
}

int docker_backend_adopt(DockerBackend *b, docker_found_t found, void (*done)(void *userdata), void *userdata) {
        _cleanup_free_ char *filters = docker_escape("{\"label\":[\"org.agentix.sandbox\"]}");
        Adopt *a = calloc(1, sizeof(*a));
        char path[512];
        int r;

        if (!a || !filters) {
                free(a);
                return -ENOMEM;
        }
        *a = (Adopt) { .backend = b, .found = found, .done = done, .userdata = userdata, .pending = 1 };
        snprintf(path, sizeof(path), "/containers/json?all=1&filters=%s", filters);
        DockerRequest *req;
        r = docker_request(b->docker, "GET", path, NULL, 0, on_list, a, &req);
        if (r < 0) {
                free(a);
                return r;
        }
        docker_request_set_destroy(req, adopt_drop);
        return 0;
}

static void on_removed(DockerClient *d, int status, json_t *body, const char *error, void *userdata) {
        char *id = userdata;

        if (status != 204 && status != 404)
                log_warning("Cannot remove container %.12s (%s).", id, error ?: "Docker refused");
        free(id);
}

void docker_backend_remove_container(DockerBackend *b, const char *id) {
        char path[256], *copy = strdup(id);
        DockerRequest *r;

        if (!copy)
                return;
        snprintf(path, sizeof(path), "/containers/%s?force=1&v=1", id);
        if (docker_request(b->docker, "DELETE", path, NULL, 0, on_removed, copy, &r) < 0)
                free(copy);
        else
                docker_request_set_destroy(r, free);
}

/* SPDX-License-Identifier: MIT */
/* Finding the sandbox containers of an earlier agentd in Docker, by their labels. */
#include "docker-backend.h"
#include "log.h"
#include "macro.h"

typedef struct Adopt {
        DockerBackend *backend;
        agentd_found_t found;
        void (*done)(void *userdata, int error);
        void *userdata;
        unsigned pending;        /* inspects not answered yet */
        int error;               /* what was not seen: the list or an inspect failed */
} Adopt;

static void adopt_unref(Adopt *a) {
        if (--a->pending > 0)
                return;
        a->done(a->userdata, a->error);
        free(a);
}

/* A request dropped unanswered (agentd stopping): let go of the walk without finishing it. */
static void adopt_drop(void *userdata) {
        Adopt *a = userdata;

        if (--a->pending == 0)
                free(a);
}

static uint64_t label_u64(json_t *labels, const char *key, bool *ok) {
        const char *v = json_string_value(json_object_get(labels, key));
        unsigned long long n;
        char *end;

        if (!v) {
                *ok = false;
                return 0;
        }
        errno = 0;
        n = strtoull(v, &end, 10);
        if (errno || end == v || *end)
                *ok = false;
        return n;
}

static const char *label(json_t *labels, const char *key) {
        return json_string_value(json_object_get(labels, key)) ?: "";
}

/* What agentd recorded at create, back from the container's labels and settings. */
static void found(Adopt *a, json_t *inspect) {
        json_t *config = json_object_get(inspect, "Config"), *labels = json_object_get(config, "Labels"),
               *host = json_object_get(inspect, "HostConfig"), *st = json_object_get(inspect, "State");
        const char *status = json_string_value(json_object_get(st, "Status")), *port;
        _cleanup_free_ char *url = NULL;
        AgentdFoundState state;
        bool ok = true;
        size_t i;
        json_t *e;
        AgentdSandboxSpec spec = {
                .id = json_string_value(json_object_get(labels, "org.agentix.sandbox")),
                .owner = (uid_t) label_u64(labels, "org.agentix.owner", &ok),
                .created_at = label_u64(labels, "org.agentix.created", &ok),
                .expires_at = label_u64(labels, "org.agentix.expires", &ok),
                .image = label(labels, "org.agentix.image"),
                .bundle = label(labels, "org.agentix.bundle"),
                .bound_to = json_string_value(json_object_get(labels, "org.agentix.bound-to")),
                .cpus = json_integer_value(json_object_get(host, "NanoCpus")) / 1e9,
                .memory = json_integer_value(json_object_get(host, "Memory")),
                .pids = json_integer_value(json_object_get(host, "PidsLimit")),
        };
        AgentdSandboxPlace place = {
                .container_id = json_string_value(json_object_get(inspect, "Id")),
                .bundle_id = label(labels, "org.agentix.bundle.id"),
        };

        if (!spec.id || !place.container_id)
                return;
        json_array_foreach(json_object_get(config, "Env"), i, e)
                if (json_string_value(e) && strneq(json_string_value(e), "AGENTIX_TOKEN=", 14))
                        spec.token = json_string_value(e) + 14;
        port = json_string_value(json_object_get(json_array_get(json_object_get(json_object_get(
                json_object_get(inspect, "NetworkSettings"), "Ports"), "8000/tcp"), 0), "HostPort"));
        if (port && asprintf(&url, "http://127.0.0.1:%s", port) < 0)
                url = NULL;
        place.runtime_url = url;
        if (!ok || !spec.token || !status || streq(status, "created"))
                state = AGENTD_FOUND_HALF_MADE;
        else
                state = streq(status, "running") ? AGENTD_FOUND_RUNNING : AGENTD_FOUND_EXITED;
        a->found(a->userdata, &spec, &place, state);
}

static void on_inspect(DockerClient *d, int status, json_t *body, const char *error, void *userdata) {
        Adopt *a = userdata;

        if (status == 200)
                found(a, body);
        else if (status != 404) /* 404: removed meanwhile */
                a->error = status < 0 ? status : -EIO;
        adopt_unref(a);
}

static void on_list(DockerClient *d, int status, json_t *body, const char *error, void *userdata) {
        Adopt *a = userdata;
        size_t i;
        json_t *c;

        if (status != 200)
                a->error = status < 0 ? status : -EIO;
        if (status != 200)
                log_warning("Cannot list agentd's containers in %s (%s): sandboxes of an earlier agentd are not "
                            "adopted.", a->backend->service, error ?: "refused");
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

int docker_backend_adopt(DockerBackend *b, agentd_found_t found_cb, void (*done)(void *userdata, int error),
                         void *userdata) {
        _cleanup_free_ char *filters = docker_escape("{\"label\":[\"org.agentix.sandbox\"]}");
        Adopt *a = calloc(1, sizeof(*a));
        char path[512];
        int r;

        if (!a || !filters) {
                free(a);
                return -ENOMEM;
        }
        *a = (Adopt) { .backend = b, .found = found_cb, .done = done, .userdata = userdata, .pending = 1 };
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

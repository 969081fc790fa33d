/* SPDX-License-Identifier: MIT */
#include "docker-backend.h"
#include "log.h"
#include "macro.h"

typedef struct Prune {
        bool (*in_use)(const char *bundle_id, void *userdata);
        void *userdata;
        char *carrier, *bundle_id;
} Prune;

static void prune_free(Prune *p) {
        free(p->carrier);
        free(p->bundle_id);
        free(p);
}

static void prune_destroy(void *p) {
        prune_free(p);
}

/* A request whose userdata is freed with destroy if it is dropped unanswered. */
static int request(DockerClient *d, const char *method, const char *path, docker_reply_t reply, void *userdata,
                   void (*destroy)(void *userdata)) {
        DockerRequest *r;
        int k = docker_request(d, method, path, NULL, 0, reply, userdata, &r);

        if (k >= 0)
                docker_request_set_destroy(r, destroy);
        return k;
}

static void on_carrier_removed(DockerClient *d, int status, json_t *body, const char *error, void *userdata) {
        Prune *p = userdata;

        if (status == 204 || status == 404)
                log_info("Removed carrier %.12s: its bundle was rebuilt and no sandbox uses it.", p->carrier);
        else
                log_warning("Cannot remove the old carrier %.12s (%s).", p->carrier, error ?: "Docker refused");
        prune_free(p);
}

static void on_carrier_image(DockerClient *d, int status, json_t *body, const char *error, void *userdata) {
        Prune *p = userdata;
        char path[256];

        /* Still tagged (the current build of its bundle), or in use since: keep it. */
        if ((status == 200 && json_array_size(json_object_get(body, "RepoTags")) > 0) || (status != 200 && status != 404) ||
            p->in_use(p->bundle_id, p->userdata)) {
                prune_free(p);
                return;
        }
        snprintf(path, sizeof(path), "/containers/%s?force=1&v=1", p->carrier);
        if (request(d, "DELETE", path, on_carrier_removed, p, prune_destroy) < 0)
                prune_free(p);
}

typedef struct PruneList {
        bool (*in_use)(const char *bundle_id, void *userdata);
        void *userdata;
        const char *instance;     /* the backend's: whose carriers these are */
} PruneList;

static void on_carriers(DockerClient *d, int status, json_t *body, const char *error, void *userdata) {
        PruneList *pl = userdata;
        size_t i;
        json_t *c;

        json_array_foreach(status == 200 ? body : NULL, i, c) {
                const char *bid = json_string_value(json_object_get(json_object_get(c, "Labels"), "org.agentix.carrier"));
                const char *id = json_string_value(json_object_get(c, "Id"));
                _cleanup_free_ char *e = NULL;
                char path[256];
                Prune *p;

                /* Another agentd's carrier is that one's to prune: only it knows its sandboxes. */
                if (!bid || !id || !docker_labels_instance_is(json_object_get(c, "Labels"), pl->instance) ||
                    pl->in_use(bid, pl->userdata))
                        continue;
                p = calloc(1, sizeof(*p));
                if (!p)
                        break;
                *p = (Prune) { .in_use = pl->in_use, .userdata = pl->userdata, .carrier = strdup(id),
                               .bundle_id = strdup(bid) };
                e = docker_escape(bid);
                if (!p->carrier || !p->bundle_id || !e) {
                        prune_free(p);
                        break;
                }
                snprintf(path, sizeof(path), "/images/%s/json", e);
                if (request(d, "GET", path, on_carrier_image, p, prune_destroy) < 0)
                        prune_free(p);
        }
        free(pl);
}

void docker_backend_prune_carriers(DockerBackend *b, bool (*in_use)(const char *bundle_id, void *userdata),
                                   void *userdata) {
        _cleanup_free_ char *filters = docker_escape("{\"label\":[\"org.agentix.carrier\"]}");
        PruneList *pl = malloc(sizeof(*pl));
        char path[512];

        if (!pl || !filters) {
                free(pl);
                return;
        }
        *pl = (PruneList) { .in_use = in_use, .userdata = userdata, .instance = b->instance };
        snprintf(path, sizeof(path), "/containers/json?all=1&filters=%s", filters);
        if (request(b->docker, "GET", path, on_carriers, pl, free) < 0)
                free(pl);
}

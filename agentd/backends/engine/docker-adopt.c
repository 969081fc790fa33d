/* SPDX-License-Identifier: MIT */
/* Finding the sandbox containers of an earlier agentd in Docker, by their labels. */
#include "docker-backend.h"
#include "firewall-helper.h"
#include "log.h"
#include "macro.h"
#include "strv.h"

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

static const char *empty_to_null(const char *s) {
        return s && *s ? s : NULL;
}

static const char *label(json_t *labels, const char *key) {
        return json_string_value(json_object_get(labels, key)) ?: "";
}

/* What agentd recorded at create, back from the container's labels and settings. egress_failed:
 * its egress rules could not be set again (it goes). */
static void found(Adopt *a, json_t *inspect, bool egress_failed, bool hibernated) {
        json_t *config = json_object_get(inspect, "Config"), *labels = json_object_get(config, "Labels"),
               *host = json_object_get(inspect, "HostConfig"), *st = json_object_get(inspect, "State");
        const char *status = json_string_value(json_object_get(st, "Status")), *network;
        _cleanup_free_ char *url = NULL;
        const char *egress_label = json_string_value(json_object_get(labels, "org.agentix.egress"));
        _cleanup_strv_free_ char **egress = NULL, **caller_labels = NULL;
        AgentdFoundState state;
        bool ok = true;
        size_t i;
        json_t *e;
        AgentdSandboxSpec spec = {
                .id = json_string_value(json_object_get(labels, "org.agentix.sandbox")),
                .owner = (uid_t) docker_label_u64(labels, "org.agentix.owner", &ok),
                .created_at = docker_label_u64(labels, "org.agentix.created", &ok),
                .expires_at = docker_label_u64(labels, "org.agentix.expires", &ok),
                .image = label(labels, "org.agentix.image"),
                .bundle = label(labels, "org.agentix.bundle"),
                .bound_to = empty_to_null(json_string_value(json_object_get(labels, "org.agentix.bound-to"))),
                .pool = empty_to_null(json_string_value(json_object_get(labels, "org.agentix.pool"))),
                .tls = streq_ptr(json_string_value(json_object_get(labels, "org.agentix.tls")), "1"),
                .runtime = empty_to_null(json_string_value(json_object_get(labels, "org.agentix.runtime"))),
                .network = empty_to_null(json_string_value(json_object_get(labels, "org.agentix.network"))),
                .platform = empty_to_null(json_string_value(json_object_get(labels, "org.agentix.platform"))),
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
        if (egress_label && !streq(egress_label, "*")) { /* "*": no egress list */
                egress = calloc(1, sizeof(char *));
                if (!egress || (egress_label[0] && strv_split_extend(&egress, egress_label) < 0))
                        ok = false;
                spec.egress = (const char *const *) egress;
        }
        if (docker_caller_labels(labels, &caller_labels) < 0)
                ok = false;
        spec.labels = (const char *const *) caller_labels;
        json_array_foreach(json_object_get(config, "Env"), i, e)
                if (json_string_value(e) && strneq(json_string_value(e), "AGENTIX_TOKEN=", 14))
                        spec.token = json_string_value(e) + 14;
                else if (streq_ptr(json_string_value(e), "AGENTIX_CHECKPOINT=1"))
                        spec.checkpointable = true;
        if (docker_runtime_url(inspect, &url) < 0)
                url = NULL;
        place.runtime_url = url;
        /* Counted on its shard of agentd's networks again. */
        network = json_string_value(json_object_get(host, "NetworkMode"));
        if (a->backend->isolated)
                network_shards_found(a->backend->isolated, spec.id, network);
        if (a->backend->egress)
                network_shards_found(a->backend->egress, spec.id, network);
        if (!ok || !spec.token || !status || streq(status, "created") || egress_failed)
                state = AGENTD_FOUND_HALF_MADE;
        else
                state = streq(status, "running") ? AGENTD_FOUND_RUNNING :
                        streq(status, "paused")  ? AGENTD_FOUND_PAUSED :
                        hibernated               ? AGENTD_FOUND_HIBERNATED :
                                                   AGENTD_FOUND_EXITED;
        a->found(a->userdata, &spec, &place, state);
}

typedef struct AdoptEgress {
        Adopt *adopt;
        json_t *inspect;
} AdoptEgress;

static void on_egress_set(void *userdata, int status, const char *output) {
        AdoptEgress *e = userdata;
        const char *id = json_string_value(json_object_get(json_object_get(json_object_get(e->inspect, "Config"),
                                                                           "Labels"), "org.agentix.sandbox"));

        if (status != 0)
                log_warning("Sandbox %s: could not set its egress rules again (agentix-firewall egress: %s%s%s): "
                            "it is removed.", id ?: "?", status < 0 ? strerror(-status) : "failed",
                            output[0] ? ": " : "", output);
        found(e->adopt, e->inspect, status != 0, false);
        json_decref(e->inspect);
        adopt_unref(e->adopt);
        free(e);
}

/* A running sandbox with an egress list: its rules live in its network namespace and outlast
 * agentd, but an agentd killed between start and rules left none: set them (again) before it
 * counts as found. */
static bool egress_again(Adopt *a, json_t *inspect) {
        json_t *labels = json_object_get(json_object_get(inspect, "Config"), "Labels");
        const char *list = json_string_value(json_object_get(labels, "org.agentix.egress")),
                   *netns = json_string_value(json_object_get(json_object_get(inspect, "NetworkSettings"), "SandboxKey"));
        _cleanup_strv_free_ char **cidrs = calloc(1, sizeof(char *));
        FirewallJob *job;
        AdoptEgress *e;
        int r;

        if (!list || streq(list, "*") || !json_is_true(json_object_get(json_object_get(inspect, "State"), "Running")) || !netns ||
            !netns[0])
                return false;
        if (!firewall_egress_possible()) {
                log_warning("Sandbox %s has an egress list, and no one here sets egress rules for this agentd: the "
                            "rules it was made with stay.", label(labels, "org.agentix.sandbox"));
                return false;
        }
        r = cidrs ? strv_split_extend(&cidrs, list) : -ENOMEM;
        e = r >= 0 ? calloc(1, sizeof(*e)) : NULL;
        if (!e) {
                found(a, inspect, true, false);
                return true;
        }
        *e = (AdoptEgress) { .adopt = a, .inspect = json_incref(inspect) };
        a->pending++;
        r = firewall_egress_start(a->backend->event, netns, cidrs, on_egress_set, e, &job);
        if (r < 0)
                on_egress_set(e, r, "");
        return true;
}

/* Made by this agentd: its labels name a sandbox and this agentd's instance (engine-util.h),
 * and the container is named after the sandbox. A container run from an image committed of a
 * sandbox carries the labels too (docker-snapshot.c empties them; a plain docker commit does
 * not): it is someone else's. So is one another agentd on the same service made: adopting it
 * would take its sandboxes (and expire, prune or remove them) from under that one. */
static bool made_by_agentd(DockerBackend *b, json_t *inspect) {
        json_t *labels = json_object_get(json_object_get(inspect, "Config"), "Labels");
        const char *id = json_string_value(json_object_get(labels, "org.agentix.sandbox")),
                   *name = json_string_value(json_object_get(inspect, "Name")), *rest;

        return id && id[0] && name && (rest = startswith(name, "/agentix-")) && streq(rest, id) &&
               docker_labels_instance_is(labels, b->instance);
}

typedef struct AdoptStopped {
        Adopt *adopt;
        json_t *inspect;
} AdoptStopped;

static void on_checkpoints(DockerClient *d, int status, json_t *body, const char *error, void *userdata) {
        _cleanup_free_ AdoptStopped *st = userdata;
        bool hibernated = false;
        size_t i;
        json_t *c;

        json_array_foreach(status == 200 ? body : NULL, i, c)
                if (streq_ptr(json_string_value(json_object_get(c, "Name")), DOCKER_CHECKPOINT_NAME))
                        hibernated = true;
        found(st->adopt, st->inspect, false, hibernated);
        json_decref(st->inspect);
        adopt_unref(st->adopt);
}

static void checkpoints_drop(void *userdata) {
        AdoptStopped *st = userdata;

        json_decref(st->inspect);
        adopt_drop(st->adopt);
        free(st);
}

/* A stopped sandbox that could hibernate: is it hibernated (its checkpoint kept)? */
static bool look_for_checkpoint(Adopt *a, json_t *inspect) {
        const char *status = json_string_value(json_object_get(json_object_get(inspect, "State"), "Status")),
                   *id = json_string_value(json_object_get(inspect, "Id"));
        bool checkpointable = false;
        AdoptStopped *st;
        DockerRequest *r;
        char path[256];
        size_t i;
        json_t *e;

        json_array_foreach(json_object_get(json_object_get(inspect, "Config"), "Env"), i, e)
                if (streq_ptr(json_string_value(e), "AGENTIX_CHECKPOINT=1"))
                        checkpointable = true;
        if (!checkpointable || !id || !streq_ptr(status, "exited") || !(st = calloc(1, sizeof(*st))))
                return false;
        *st = (AdoptStopped) { .adopt = a, .inspect = json_incref(inspect) };
        snprintf(path, sizeof(path), "/containers/%s/checkpoints", id);
        a->pending++;
        if (docker_request(a->backend->docker, "GET", path, NULL, 0, on_checkpoints, st, &r) < 0) {
                a->pending--;
                json_decref(st->inspect);
                free(st);
                return false;
        }
        docker_request_set_destroy(r, checkpoints_drop);
        return true;
}

static void on_inspect(DockerClient *d, int status, json_t *body, const char *error, void *userdata) {
        Adopt *a = userdata;

        if (status == 200 && !made_by_agentd(a->backend, body))
                ; /* not a sandbox */
        else if (status == 200 && !egress_again(a, body) && !look_for_checkpoint(a, body))
                found(a, body, false, false);
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
        _cleanup_free_ char *filters = NULL, *json = NULL;
        Adopt *a = calloc(1, sizeof(*a));
        char path[512];
        int r;

        /* An instance's own only (made_by_agentd() checks again); without one, Docker cannot
         * filter on a label's absence. The name needs no quoting (docker_instance_from_env()). */
        if (b->instance ? asprintf(&json, "{\"label\":[\"org.agentix.sandbox\",\"%s=%s\"]}", AGENTD_INSTANCE_LABEL,
                                   b->instance) < 0
                        : !(json = strdup("{\"label\":[\"org.agentix.sandbox\"]}")))
                json = NULL;
        filters = json ? docker_escape(json) : NULL;
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

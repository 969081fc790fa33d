/* SPDX-License-Identifier: MIT */
/* A create on a swarm, step by step: the bundle and task images looked up in the registry
 * (through the manager), the bundle put on the nodes (swarm-bundle.c), the service made, its
 * task followed until it runs, then the runtime's /health probed on the task's node. Any
 * failure removes the service it made. */
#include "health-probe.h"
#include "log.h"
#include "sandbox-json.h"
#include "swarm-backend.h"

#define SERVER_PATH "/nix/runtime/bin/agentix-server"
#define TASK_POLL_FAST_USEC (50ULL * 1000)      /* while a task usually gets going */
#define TASK_POLL_FAST_FOR_USEC (3ULL * 1000 * 1000)
#define TASK_POLL_USEC (250ULL * 1000)          /* then (a node pulling a large image) */
#define HEALTH_INTERVAL_USEC (20ULL * 1000)
#define HEALTH_CHECK_EVERY 25      /* probes between looks at whether the task still runs */
#define START_TIMEOUT_USEC (120ULL * 1000 * 1000) /* from the service's making: a node may pull the image */

/* The capabilities a task keeps: the docker backend's set (docker-create.c says why each). */
#define TASK_CAPABILITIES "CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FOWNER", "CAP_SETUID", "CAP_SETGID", "CAP_KILL", \
                          "CAP_NET_BIND_SERVICE"

typedef enum CreateStep {
        STEP_RESOLVE_BUNDLE,
        STEP_RESOLVE_IMAGE,
        STEP_BUNDLE,
        STEP_CREATE,
        STEP_TASK,
        STEP_NODE,
        STEP_HEALTH,
        STEP_CLEANUP,
} CreateStep;

struct AgentdJob {
        SwarmBackend *backend;
        const AgentdSandboxSpec *spec;
        agentd_made_t made;
        void *userdata;
        CreateStep step;
        DockerRequest *request;
        char *bundle_ref, *image_ref; /* as the nodes pull them */
        char *bundle_digest, *image_digest;
        char *service_id;
        bool service_made;        /* a create may have made it: remove on failure */
        char *node_id;            /* where its task runs */
        char *runtime_url;
        char *task_error;         /* what the task's status last said (no suitable node, …) */
        unsigned port;            /* the runtime's, published on the node */
        HealthProbe *probe;       /* GET /health */
        sd_event_source *timer;
        uint64_t deadline;
        unsigned probes;
        const char *error_name;
        char *error_message;
        /* when each stage ended (CLOCK_MONOTONIC), for the debug line of a create that worked */
        uint64_t t_begin, t_resolved, t_bundle, t_service, t_running;
};

static void job_free(SwarmCreate *j) {
        if (!j)
                return;
        docker_request_cancel(j->request);
        swarm_bundle_forget(j->backend, j);
        health_probe_free(j->probe);
        sd_event_source_disable_unref(j->timer);
        free(j->bundle_ref);
        free(j->image_ref);
        free(j->bundle_digest);
        free(j->image_digest);
        free(j->service_id);
        free(j->node_id);
        free(j->runtime_url);
        free(j->task_error);
        free(j->error_message);
        free(j);
}

void swarm_cancel(SwarmCreate *j) {
        job_free(j);
}

static void job_finish(SwarmCreate *j) {
        const AgentdSandboxPlace place = { .runtime_url = j->runtime_url, .container_id = j->service_id,
                                           .bundle_id = j->bundle_digest };
        agentd_made_t made = j->made;
        void *userdata = j->userdata;

        if (!j->error_name && j->t_running) {
                uint64_t end = now_usec();
                log_debug("Sandbox %s ready on the swarm in %llu ms: registry %llu, bundle on nodes %llu, service "
                          "%llu, task running %llu, /health %llu.", j->spec->id,
                          (unsigned long long) (end - j->t_begin) / 1000,
                          (unsigned long long) (j->t_resolved - j->t_begin) / 1000,
                          (unsigned long long) (j->t_bundle - j->t_resolved) / 1000,
                          (unsigned long long) (j->t_service - j->t_bundle) / 1000,
                          (unsigned long long) (j->t_running - j->t_service) / 1000,
                          (unsigned long long) (end - j->t_running) / 1000);
        }
        made(userdata, j->error_name ? NULL : &place, j->error_name, j->error_message);
        job_free(j);
}

static void on_cleanup(DockerClient *d, int status, json_t *body, const char *error, void *userdata) {
        SwarmCreate *j = userdata;

        j->request = NULL;
        if (status != 200 && status != 404)
                log_warning("Sandbox %s: could not remove the half-made service " SWARM_SERVICE_PREFIX "%s (%s); "
                            "remove it by hand (docker service rm).", j->spec->id, j->spec->id, error ?: "HTTP error");
        job_finish(j);
}

static void job_fail(SwarmCreate *j, const char *error_name, const char *fmt, ...) _printf_(3, 4);
static void job_fail(SwarmCreate *j, const char *error_name, const char *fmt, ...) {
        char path[128];
        va_list ap;

        j->error_name = error_name;
        va_start(ap, fmt);
        if (vasprintf(&j->error_message, fmt, ap) < 0)
                j->error_message = NULL;
        va_end(ap);
        docker_request_cancel(j->request);
        j->request = NULL;
        j->timer = sd_event_source_disable_unref(j->timer);
        if (!j->service_made) {
                job_finish(j);
                return;
        }
        j->step = STEP_CLEANUP;
        snprintf(path, sizeof(path), "/services/" SWARM_SERVICE_PREFIX "%s", j->spec->id);
        if (docker_request(j->backend->manager, "DELETE", path, NULL, 0, on_cleanup, j, &j->request) < 0)
                job_finish(j);
}

static void job_fail_manager(SwarmCreate *j, const char *what, int status, json_t *body, const char *error) {
        char buf[128];
        const char *m = docker_error_message(status, body, error, buf, sizeof(buf));

        if (status == -ETIMEDOUT)
                job_fail(j, AGENTD_ERROR_BACKEND_UNAVAILABLE, "The swarm manager did not answer in time while %s: %s",
                         what, m);
        else if (status < 0)
                job_fail(j, AGENTD_ERROR_BACKEND_UNAVAILABLE, "Cannot reach the swarm manager while %s: %s", what, m);
        else
                job_fail(j, AGENTD_ERROR_START_FAILED, "The swarm manager refused %s: %s", what, m);
}

#define FAIL(...)                               \
        do {                                    \
                job_fail(__VA_ARGS__);          \
                return;                         \
        } while (0)

/* ---- the service ------------------------------------------------------------------------- */

/* agentd's labels; network, runtime and platform always (the docker backend records them for a
 * pool's sandboxes only), as adoption gives them back. */
static json_t *labels_json(const AgentdSandboxSpec *s, const char *bundle_digest) {
        json_t *l = sandbox_labels_json(s, bundle_digest);

        if (l && (json_object_set_new(l, "org.agentix.network", json_string(s->network ?: "")) < 0 ||
                  json_object_set_new(l, "org.agentix.runtime", json_string(s->runtime ?: "")) < 0 ||
                  json_object_set_new(l, "org.agentix.platform", json_string(s->platform ?: "")) < 0))
                return json_decref(l), NULL;
        return l;
}

static json_t *service_json(SwarmCreate *j) {
        const AgentdSandboxSpec *s = j->spec;
        _cleanup_free_ char *image = NULL, *constraint = NULL;
        char label[64], volume[64], name[64];
        json_t *svc, *container, *mounts, *placement;

        swarm_bundle_names(j->bundle_digest, label, volume);
        if (asprintf(&image, "%s@%s", j->image_ref, j->image_digest) < 0 ||
            asprintf(&constraint, "node.labels.%s==1", label) < 0)
                return NULL;
        /* The bundle read-only: one volume serves every sandbox on the node. */
        mounts = json_pack("[{s:s, s:s, s:s, s:b}]", "Type", "volume", "Source", volume, "Target", "/nix",
                           "ReadOnly", true);
        container = json_pack("{s:s, s:[s], s:o, s:o, s:o, s:[s], s:[sssssss]}",
                              "Image", strchr(j->image_ref, '@') ? j->image_ref : image,
                              "Command", SERVER_PATH,
                              "Env", sandbox_env_json(s),
                              "Labels", labels_json(s, j->bundle_digest),
                              "Mounts", mounts,
                              "CapabilityDrop", "ALL",
                              "CapabilityAdd", TASK_CAPABILITIES);
        if (!container)
                return NULL;
        if (s->workdir)
                json_object_set_new(container, "Dir", json_string(s->workdir));
        if (s->user)
                json_object_set_new(container, "User", json_string(s->user));
        if (s->read_only) {
                /* The root read-only; scratch space in memory, within the memory limit. */
                json_object_set_new(container, "ReadOnly", json_true());
                json_array_append_new(mounts, json_pack("{s:s, s:s, s:{s:i}}", "Type", "tmpfs", "Target", "/tmp",
                                                        "TmpfsOptions", "Mode", 01777));
                if (s->workdir)
                        json_array_append_new(mounts, json_pack("{s:s, s:s, s:{s:i}}", "Type", "tmpfs", "Target",
                                                                s->workdir, "TmpfsOptions", "Mode", 0755));
        }
        placement = json_pack("{s:[s]}", "Constraints", constraint);
        if (placement && s->platform) {
                _cleanup_free_ char *os = strndup(s->platform, strcspn(s->platform, "/"));
                const char *arch = strchr(s->platform, '/');
                json_object_set_new(placement, "Platforms",
                                    json_pack("[{s:s, s:s}]", "OS", os ?: "linux", "Architecture", arch ? arch + 1 : ""));
        }
        snprintf(name, sizeof(name), SWARM_SERVICE_PREFIX "%s", s->id);
        svc = json_pack("{s:s, s:o, s:{s:o, s:{s:{s:I, s:I, s:I}, s:{s:I, s:I}}, s:{s:s}, s:o}, "
                        "s:{s:{s:i}}, s:{s:s, s:[{s:s, s:i, s:s}]}}",
                        "Name", name,
                        "Labels", labels_json(s, j->bundle_digest),
                        "TaskTemplate",
                        "ContainerSpec", container,
                        "Resources",
                        "Limits", "NanoCPUs", (json_int_t) (s->cpus * 1e9), "MemoryBytes", (json_int_t) s->memory,
                        "Pids", (json_int_t) s->pids,
                        "Reservations", "NanoCPUs", (json_int_t) (s->cpus * 1e9), "MemoryBytes", (json_int_t) s->memory,
                        "RestartPolicy", "Condition", "none",
                        "Placement", placement,
                        "Mode", "Replicated", "Replicas", 1,
                        /* dnsrr: no virtual IP, which needs IPVS */
                        "EndpointSpec", "Mode", "dnsrr", "Ports", "Protocol", "tcp", "TargetPort", SWARM_RUNTIME_PORT,
                        "PublishMode", "host");
        if (svc && s->network)
                json_object_set_new(json_object_get(svc, "TaskTemplate"), "Networks",
                                    json_pack("[{s:s}]", "Target", s->network));
        return svc;
}

/* ---- /health ----------------------------------------------------------------------------- */

static void look_at_task(SwarmCreate *j);
static int on_probe_timer(sd_event_source *es, uint64_t usec, void *userdata);

static bool past_deadline(SwarmCreate *j) {
        uint64_t now;

        (void) sd_event_now(j->backend->event, CLOCK_MONOTONIC, &now);
        return now >= j->deadline;
}

static void probe_again(SwarmCreate *j) {
        if (past_deadline(j))
                FAIL(j, AGENTD_ERROR_START_FAILED, "The runtime in sandbox %s (%s) did not answer /health within "
                     "%llu s (docker service logs " SWARM_SERVICE_PREFIX "%s)", j->spec->id, j->runtime_url,
                     START_TIMEOUT_USEC / 1000000, j->spec->id);
        if (j->probes % HEALTH_CHECK_EVERY == 0) {
                look_at_task(j); /* still running? */
                return;
        }
        if (sd_event_add_time_relative(j->backend->event, &j->timer, CLOCK_MONOTONIC, HEALTH_INTERVAL_USEC, 1000,
                                       on_probe_timer, j) < 0)
                FAIL(j, AGENTD_ERROR_START_FAILED, "Out of memory");
}

static void on_probe_done(void *userdata, bool healthy) {
        SwarmCreate *j = userdata;

        if (healthy) {
                job_finish(j);
                return;
        }
        j->probes++;
        probe_again(j);
}

static void probe(SwarmCreate *j) {
        j->step = STEP_HEALTH;
        if (!j->probe && health_probe_new(j->backend->probes, j->runtime_url, on_probe_done, j, &j->probe) < 0)
                FAIL(j, AGENTD_ERROR_START_FAILED, "Cannot probe the runtime: out of memory");
        if (health_probe_start(j->probe) < 0)
                FAIL(j, AGENTD_ERROR_START_FAILED, "Cannot probe the runtime");
}

static int on_probe_timer(sd_event_source *es, uint64_t usec, void *userdata) {
        SwarmCreate *j = userdata;

        j->timer = sd_event_source_disable_unref(j->timer);
        probe(j);
        return 0;
}

/* ---- the task ---------------------------------------------------------------------------- */

static void on_reply(DockerClient *d, int status, json_t *body, const char *error, void *userdata);

static void look_at_task(SwarmCreate *j) {
        _cleanup_free_ char *filter = NULL, *escaped = NULL, *path = NULL;

        j->step = STEP_TASK;
        if (asprintf(&filter, "{\"service\":[\"" SWARM_SERVICE_PREFIX "%s\"]}", j->spec->id) < 0 ||
            !(escaped = docker_escape(filter)) || asprintf(&path, "/tasks?filters=%s", escaped) < 0)
                FAIL(j, AGENTD_ERROR_START_FAILED, "Out of memory");
        if (docker_request(j->backend->manager, "GET", path, NULL, 0, on_reply, j, &j->request) < 0)
                FAIL(j, AGENTD_ERROR_BACKEND_UNAVAILABLE, "Cannot ask the swarm manager about the sandbox's task");
}

static int on_task_timer(sd_event_source *es, uint64_t usec, void *userdata) {
        SwarmCreate *j = userdata;

        j->timer = sd_event_source_disable_unref(j->timer);
        look_at_task(j);
        return 0;
}

static void on_task(SwarmCreate *j, json_t *tasks) {
        json_t *task = swarm_newest_task(tasks, NULL), *st, *p;
        const char *state, *err;
        size_t i;

        st = json_object_get(task, "Status");
        state = json_string_value(json_object_get(st, "State")) ?: "new";
        err = json_string_value(json_object_get(st, "Err"));
        if (err && (!j->task_error || !streq(j->task_error, err))) {
                free(j->task_error);
                j->task_error = strdup(err);
        }
        if (swarm_task_ended(state))
                FAIL(j, AGENTD_ERROR_START_FAILED,
                     "The sandbox's swarm task %s before its runtime answered%s%s: does image '%s' run "
                     SERVER_PATH " from bundle '%s'?", state, err ? ": " : "", err ?: "", j->spec->image,
                     j->spec->bundle);
        if (streq(state, "running")) {
                if (j->runtime_url) { /* a look between probes: still running */
                        if (sd_event_add_time_relative(j->backend->event, &j->timer, CLOCK_MONOTONIC,
                                                       HEALTH_INTERVAL_USEC, 1000, on_probe_timer, j) < 0)
                                FAIL(j, AGENTD_ERROR_START_FAILED, "Out of memory");
                        j->step = STEP_HEALTH;
                        return;
                }
                json_array_foreach(json_object_get(json_object_get(st, "PortStatus"), "Ports"), i, p)
                        if (json_integer_value(json_object_get(p, "TargetPort")) == SWARM_RUNTIME_PORT &&
                            json_integer_value(json_object_get(p, "PublishedPort")) > 0) {
                                char path[128];
                                free(j->node_id);
                                j->node_id = strdup(json_string_value(json_object_get(task, "NodeID")) ?: "");
                                j->port = (unsigned) json_integer_value(json_object_get(p, "PublishedPort"));
                                if (!j->node_id || !j->node_id[0])
                                        FAIL(j, AGENTD_ERROR_START_FAILED, "The swarm named no node for the task");
                                j->step = STEP_NODE;
                                snprintf(path, sizeof(path), "/nodes/%s", j->node_id);
                                if (docker_request(j->backend->manager, "GET", path, NULL, 0, on_reply, j,
                                                   &j->request) < 0)
                                        FAIL(j, AGENTD_ERROR_BACKEND_UNAVAILABLE, "Cannot ask the swarm manager");
                                return;
                        }
                FAIL(j, AGENTD_ERROR_START_FAILED, "The swarm published no port for the sandbox's runtime");
        }
        if (past_deadline(j))
                FAIL(j, AGENTD_ERROR_START_FAILED, "The sandbox's swarm task was still %s after %llu s%s%s", state,
                     START_TIMEOUT_USEC / 1000000, j->task_error ? ": " : "", j->task_error ?: "");
        if (sd_event_add_time_relative(j->backend->event, &j->timer, CLOCK_MONOTONIC,
                                       now_usec() - j->t_service < TASK_POLL_FAST_FOR_USEC ? TASK_POLL_FAST_USEC
                                                                                          : TASK_POLL_USEC, 5 * 1000,
                                       on_task_timer, j) < 0)
                FAIL(j, AGENTD_ERROR_START_FAILED, "Out of memory");
}

/* ---- the steps --------------------------------------------------------------------------- */

static void on_node(SwarmCreate *j, json_t *node) {
        const char *addr = json_string_value(json_object_get(json_object_get(node, "Status"), "Addr"));

        j->t_running = now_usec();
        if (!addr || !addr[0] || streq(addr, "0.0.0.0"))
                FAIL(j, AGENTD_ERROR_START_FAILED, "Swarm node %s has no address agentd can reach", j->node_id);
        if (asprintf(&j->runtime_url, "http://%s:%u", addr, j->port) < 0) {
                j->runtime_url = NULL;
                FAIL(j, AGENTD_ERROR_START_FAILED, "Out of memory");
        }
        j->probes = 1;
        probe(j);
}

static void create_service(SwarmCreate *j) {
        json_t *svc = service_json(j);
        int r;

        if (!svc)
                FAIL(j, AGENTD_ERROR_START_FAILED, "Out of memory");
        j->step = STEP_CREATE;
        r = docker_request(j->backend->manager, "POST", "/services/create", svc, 0, on_reply, j, &j->request);
        json_decref(svc);
        if (r < 0)
                FAIL(j, AGENTD_ERROR_BACKEND_UNAVAILABLE, "Cannot ask the swarm manager: %s", strerror(-r));
        /* From here a failure removes it: an answer lost on the way may still have made it. */
        j->service_made = true;
}

static void on_bundle_ready(void *userdata, const char *error_name, const char *message) {
        SwarmCreate *j = userdata;

        if (error_name)
                FAIL(j, error_name, "%s", message);
        j->t_bundle = now_usec();
        create_service(j);
}

static void on_resolved(SwarmBackend *b, int status, const char *digest, const char *message, void *userdata) {
        SwarmCreate *j = userdata;
        bool bundle = j->step == STEP_RESOLVE_BUNDLE;
        const char *ref = bundle ? j->bundle_ref : j->image_ref;
        int r;

        j->request = NULL;
        if (!digest) {
                /* The manager answers 401/403/404 (or 500 naming the registry's answer) for what
                 * the registry does not hold. */
                if (status >= 400 && status < 600)
                        FAIL(j, bundle ? AGENTD_ERROR_BUNDLE_NOT_FOUND : AGENTD_ERROR_IMAGE_NOT_FOUND,
                             "%s image '%s' is not in a registry the swarm can pull from (%s): push it there "
                             "(docker tag %s %s && docker push %s)", bundle ? "Bundle" : "Task", ref, message,
                             bundle ? j->spec->bundle : j->spec->image, ref, ref);
                FAIL(j, AGENTD_ERROR_BACKEND_UNAVAILABLE, "Cannot ask the swarm manager about image '%s': %s", ref,
                     message);
        }
        if (bundle) {
                if (!(j->bundle_digest = strdup(digest)))
                        FAIL(j, AGENTD_ERROR_START_FAILED, "Out of memory");
                j->step = STEP_RESOLVE_IMAGE;
                r = swarm_resolve(b, j->image_ref, on_resolved, j, &j->request);
                if (r < 0)
                        FAIL(j, AGENTD_ERROR_BACKEND_UNAVAILABLE, "Cannot ask the swarm manager: %s", strerror(-r));
                return;
        }
        if (!(j->image_digest = strdup(digest)))
                FAIL(j, AGENTD_ERROR_START_FAILED, "Out of memory");
        j->t_resolved = now_usec();
        j->step = STEP_BUNDLE;
        r = swarm_bundle_ensure(b, j->bundle_ref, j->bundle_digest, on_bundle_ready, j, &j->request);
        if (r < 0)
                FAIL(j, AGENTD_ERROR_START_FAILED, "Cannot put the bundle on the swarm's nodes: %s", strerror(-r));
}

static void on_reply(DockerClient *d, int status, json_t *body, const char *error, void *userdata) {
        SwarmCreate *j = userdata;

        j->request = NULL;
        switch (j->step) {
        case STEP_CREATE:
                if (status == 409)
                        FAIL(j, AGENTD_ERROR_START_FAILED, "The swarm has a service " SWARM_SERVICE_PREFIX "%s already",
                             j->spec->id);
                if (status != 201 || !json_string_value(json_object_get(body, "ID"))) {
                        if (status >= 400 && status < 500)
                                j->service_made = false; /* refused: nothing was made */
                        job_fail_manager(j, "the sandbox's service", status, body, error);
                        return;
                }
                j->service_id = strdup(json_string_value(json_object_get(body, "ID")));
                if (!j->service_id)
                        FAIL(j, AGENTD_ERROR_START_FAILED, "Out of memory");
                j->t_service = now_usec();
                j->deadline = j->t_service + START_TIMEOUT_USEC;
                look_at_task(j);
                return;
        case STEP_TASK:
                if (status != 200) {
                        job_fail_manager(j, "telling about the sandbox's task", status, body, error);
                        return;
                }
                on_task(j, body);
                return;
        case STEP_NODE:
                if (status != 200) {
                        job_fail_manager(j, "telling about the task's node", status, body, error);
                        return;
                }
                on_node(j, body);
                return;
        case STEP_CLEANUP:
                on_cleanup(d, status, body, error, userdata);
                return;
        default:
                return;
        }
}

int swarm_create(SwarmBackend *b, const AgentdSandboxSpec *spec, agentd_made_t made, void *userdata,
                 SwarmCreate **ret_job) {
        SwarmCreate *j = calloc(1, sizeof(*j));
        int r;

        if (!j)
                return -ENOMEM;
        *j = (SwarmCreate) { .backend = b, .spec = spec, .made = made, .userdata = userdata,
                             .step = STEP_RESOLVE_BUNDLE };
        *ret_job = j;
        j->t_begin = now_usec();
        /* What a swarm service cannot do, named before anything is made. */
        if (spec->egress) {
                job_fail(j, AGENTD_ERROR_INVALID_CONFIG, "config key 'egress': the swarm backend has no egress lists "
                     "(the rules live in a container's network namespace on its node, out of agentd's reach)");
                return 0;
        }
        if (spec->runtime && !streq(spec->runtime, b->default_runtime)) {
                job_fail(j, AGENTD_ERROR_INVALID_CONFIG, "config key 'runtime': a swarm service runs its nodes' default "
                     "runtime (%s); '%s' cannot be chosen per sandbox", b->default_runtime, spec->runtime);
                return 0;
        }
        if (spec->network && (streq(spec->network, "none") || streq(spec->network, "isolated") ||
                              streq(spec->network, "host"))) {
                job_fail(j, AGENTD_ERROR_INVALID_CONFIG, "config key 'network': '%s' is not for swarm sandboxes (their "
                     "runtime's port is published on the node; name a swarm network, or leave the key out)",
                     spec->network);
                return 0;
        }
        j->bundle_ref = swarm_image_ref(b, spec->bundle);
        j->image_ref = swarm_image_ref(b, spec->image);
        if (!j->bundle_ref || !j->image_ref) {
                job_fail(j, AGENTD_ERROR_START_FAILED, "Out of memory");
                return 0;
        }
        r = swarm_resolve(b, j->bundle_ref, on_resolved, j, &j->request);
        if (r < 0) {
                job_fail(j, AGENTD_ERROR_BACKEND_UNAVAILABLE, "Cannot ask the swarm manager: %s", strerror(-r));
                return 0;
        }
        return 0;
}

/* SPDX-License-Identifier: MIT */
/* A create on the Docker Engine API, step by step: the bundle and task images looked up, the
 * runtime checked, agentd's network made if missing, the bundle's carrier made, the task
 * container made and started, a sandbox's egress rules set, then /health probed until the
 * runtime answers. Any failure removes the container it made. */
#include "cgroup-stats.h"
#include "docker-backend.h"
#include "docker-client.h"
#include "firewall-helper.h"
#include "health-probe.h"
#include "log.h"
#include "sandbox-json.h"

#define RUNTIME_PORT "8000/tcp"
#define SERVER_PATH "/nix/runtime/bin/agentix-server"
#define HEALTH_INTERVAL_USEC (20ULL * 1000)
#define HEALTH_TIMEOUT_USEC (60ULL * 1000 * 1000)
#define HEALTH_CHECK_EVERY 25 /* probes between looks at whether the container still runs */
#define CARRIER_WAIT_USEC (25ULL * 1000)
#define CARRIER_WAITS_MAX 400 /* 10 s */
#define NETWORK_WAIT_USEC (25ULL * 1000)
#define NETWORK_WAITS_MAX 1200 /* 30 s */

/* Least privilege for the task container: of Docker's default capabilities, only those that
 * ordinary tools run as root in a sandbox need (the runtime itself needs none):
 *   CHOWN            tar, cp -a, package managers set the owners of what they unpack
 *   DAC_OVERRIDE     root reads and writes files of other users (a `user`'s workdir, say)
 *   FOWNER           chmod and utimes on files root does not own (tar, cp -p, git)
 *   SETUID, SETGID   dropping privileges (apt's _apt sandbox, runuser, su from root)
 *   KILL             root signals processes of other users in the sandbox
 *   NET_BIND_SERVICE a server in the sandbox on a port below 1024
 * Dropped: MKNOD (device nodes), NET_RAW (raw sockets, spoofing), SYS_CHROOT, SETPCAP,
 * SETFCAP (capabilities on files), AUDIT_WRITE, FSETID. With no-new-privileges, set-user-ID
 * programs gain nothing; Docker's default seccomp profile stays on. */
#define TASK_CAPABILITIES "CHOWN", "DAC_OVERRIDE", "FOWNER", "SETUID", "SETGID", "KILL", "NET_BIND_SERVICE"


typedef enum CreateStep {
        STEP_INSPECT_BUNDLE,
        STEP_INSPECT_IMAGE,
        STEP_RUNTIME,
        STEP_NETWORK,
        STEP_INSPECT_CARRIER,
        STEP_CREATE_CARRIER,
        STEP_START_CARRIER,
        STEP_CREATE,
        STEP_START,
        STEP_REMAKE,              /* the network went: remove the container, make the network again */
        STEP_INSPECT,
        STEP_EGRESS,              /* agentix-firewall egress in the container's network namespace */
        STEP_HEALTH,
        STEP_CLEANUP,
} CreateStep;

struct AgentdJob {
        DockerBackend *backend;
        const AgentdSandboxSpec *spec;
        agentd_made_t made;
        void *userdata;
        CreateStep step;
        DockerRequest *request;
        char *bundle_id;          /* sha256:… */
        char *container_id;
        char *runtime_url;
        char *carrier;            /* its name */
        bool container_made;      /* a create may have made it: remove on failure */
        /* /health probes */
        HealthProbe *probe;       /* GET /health */
        sd_event_source *timer;
        uint64_t deadline;
        unsigned probes;
        int exit_code;            /* the container stopped before its runtime answered */
        unsigned carrier_waits;   /* looks at a carrier that another create is making */
        unsigned network_waits;   /* looks at the isolated network being made */
        bool network_retried;     /* it had gone: made again once */
        const char *network;      /* NetworkMode, or NULL: Docker's default */
        DockerNetwork *own;       /* agentd's network it goes on (network is its name), or NULL */
        NetworkShards *shards;    /* whose shard own is: the place is let go if the create fails */
        FirewallJob *egress;      /* setting its egress rules */
        json_t *inspected;        /* the container as it was when they were asked for */
        bool egress_set;          /* they are in place */
        /* the failure being reported once the cleanup is done */
        const char *error_name;
        char *error_message;
};

static void job_free(CreateJob *j) {
        if (!j)
                return;
        docker_request_cancel(j->request);
        health_probe_free(j->probe);
        sd_event_source_disable_unref(j->timer);
        firewall_job_cancel(j->egress);
        json_decref(j->inspected);
        free(j->bundle_id);
        free(j->container_id);
        free(j->runtime_url);
        free(j->carrier);
        free(j->error_message);
        free(j);
}

void docker_backend_cancel(CreateJob *j) {
        if (j->shards)
                network_shards_release(j->shards, j->spec->id);
        job_free(j);
}

static void job_finish(CreateJob *j) {
        const AgentdSandboxPlace place = { .runtime_url = j->runtime_url, .container_id = j->container_id,
                                           .bundle_id = j->bundle_id };
        agentd_made_t made = j->made;
        void *userdata = j->userdata;

        if (j->error_name && j->shards)
                network_shards_release(j->shards, j->spec->id);
        /* The job goes after made(): place's strings are its own. */
        made(userdata, j->error_name ? NULL : &place, j->error_name, j->error_message);
        job_free(j);
}

static void on_cleanup(DockerClient *d, int status, json_t *body, const char *error, void *userdata) {
        CreateJob *j = userdata;

        j->request = NULL;
        if (status != 204 && status != 404)
                log_warning("Sandbox %s: could not remove the half-made container agentix-%s (%s); "
                            "remove it by hand.", j->spec->id, j->spec->id, error ?: "HTTP error");
        job_finish(j);
}

/* Fail the create: remove what it made, then answer. */
static void job_fail(CreateJob *j, const char *error_name, const char *fmt, ...) _printf_(3, 4);
static void job_fail(CreateJob *j, const char *error_name, const char *fmt, ...) {
        char path[128];
        va_list ap;

        j->error_name = error_name;
        va_start(ap, fmt);
        if (vasprintf(&j->error_message, fmt, ap) < 0)
                j->error_message = NULL;
        va_end(ap);
        if (!j->container_made) {
                job_finish(j);
                return;
        }
        j->step = STEP_CLEANUP;
        snprintf(path, sizeof(path), "/containers/agentix-%s?force=1&v=1", j->spec->id);
        if (docker_request(j->backend->docker, "DELETE", path, NULL, 0, on_cleanup, j, &j->request) < 0)
                job_finish(j);
}

/* A Docker error that is not the caller's: the backend is down or refused. */
static void job_fail_docker(CreateJob *j, const char *what, int status, json_t *body, const char *error) {
        char buf[128];
        const char *m = docker_error_message(status, body, error, buf, sizeof(buf));

        const char *service = j->backend->service;

        if (status == -ETIMEDOUT)
                job_fail(j, AGENTD_ERROR_BACKEND_UNAVAILABLE, "%s did not answer in time while %s: %s", service, what, m);
        else if (status < 0)
                job_fail(j, AGENTD_ERROR_BACKEND_UNAVAILABLE, "Cannot reach %s while %s: %s", service, what, m);
        else
                job_fail(j, AGENTD_ERROR_START_FAILED, "%s refused %s: %s", service, what, m);
}

static void step(CreateJob *j);

static void on_reply(DockerClient *d, int status, json_t *body, const char *error, void *userdata);

static int send_step(CreateJob *j, const char *method, const char *path, json_t *body) {
        return docker_request(j->backend->docker, method, path, body, 0, on_reply, j, &j->request);
}


static json_t *task_container_json(CreateJob *j) {
        const AgentdSandboxSpec *s = j->spec;
        json_t *c;

        c = json_pack("{s:s, s:[s], s:[], s:o, s:o*, s:{s:{}}, s:{s:[s], s:I, s:I, s:I, s:s?, "
                      "s:{s:s}, s:[s], s:[sssssss], s:[s]}}",
                      "Image", s->image,
                      "Entrypoint", SERVER_PATH,
                      "Cmd",
                      "Env", sandbox_env_json(s),
                      "Labels", sandbox_labels_json(s, j->bundle_id),
                      "ExposedPorts", RUNTIME_PORT,
                      "HostConfig",
                      "VolumesFrom", j->carrier,
                      "PidsLimit", (json_int_t) s->pids,
                      "Memory", (json_int_t) s->memory,
                      "NanoCpus", (json_int_t) (s->cpus * 1e9),
                      "NetworkMode", j->network,
                      "LogConfig", "Type", "json-file",
                      "CapDrop", "ALL",
                      "CapAdd", TASK_CAPABILITIES,
                      "SecurityOpt", "no-new-privileges");
        /* On agentd's own networks the host reaches the runtime at the container's address on
         * the bridge (agentix-firewall keeps everyone else off it); elsewhere Docker publishes
         * its port on 127.0.0.1, through a proxy process per sandbox. */
        /* Whose it is, always set: a container takes the keys the create does not name from its
         * image, and an image committed of another agentd's sandbox has that one's name. */
        if (c && json_object_set_new(json_object_get(c, "Labels"), AGENTD_INSTANCE_LABEL,
                                     json_string(j->backend->instance ?: "")) < 0)
                return json_decref(c), NULL;
        if (c && !j->own)
                json_object_set_new(json_object_get(c, "HostConfig"), "PortBindings",
                                    json_pack("{s:[{s:s, s:s}]}", RUNTIME_PORT, "HostIp", "127.0.0.1", "HostPort", ""));
        if (c && s->workdir)
                json_object_set_new(c, "WorkingDir", json_string(s->workdir));
        if (c && s->runtime)
                json_object_set_new(json_object_get(c, "HostConfig"), "Runtime", json_string(s->runtime));
        if (c && s->user)
                json_object_set_new(c, "User", json_string(s->user));
        if (c && s->read_only) {
                /* The root and the bundle read-only; scratch space in memory, within the memory limit. */
                json_t *host = json_object_get(c, "HostConfig"), *tmpfs = json_object();
                char carrier_ro[256];

                snprintf(carrier_ro, sizeof(carrier_ro), "%s:ro", j->carrier);
                json_object_set_new(host, "ReadonlyRootfs", json_true());
                json_object_set_new(host, "VolumesFrom", json_pack("[s]", carrier_ro));
                json_object_set_new(tmpfs, "/tmp", json_string("mode=1777"));
                if (s->workdir)
                        json_object_set_new(tmpfs, s->workdir, json_string("mode=0755"));
                json_object_set_new(host, "Tmpfs", tmpfs);
        }
        if (c && j->backend->counting_disk)
                json_object_set_new(json_object_get(c, "HostConfig"), "BlkioDeviceWriteBps",
                                    json_pack("[{s:s, s:I}]", "Path", j->backend->counting_disk,
                                              "Rate", (json_int_t) CGROUP_V1_COUNTING_RATE));
        if (c && s->checkpointable) {
                const char *resolv = docker_resolv_conf_path(j->backend);
                char bind[PATH_MAX + 32];

                if (resolv && snprintf(bind, sizeof(bind), "%s:/etc/resolv.conf:ro", resolv) < (int) sizeof(bind))
                        json_object_set_new(json_object_get(c, "HostConfig"), "Binds", json_pack("[s]", bind));
        }
        if (c && j->backend->host_config)
                json_object_update(json_object_get(c, "HostConfig"), j->backend->host_config);
        return c;
}

/* ---- /health ---------------------------------------------------------------------------- */

static int on_probe_timer(sd_event_source *es, uint64_t usec, void *userdata);

static void probe_again(CreateJob *j) {
        uint64_t now;

        (void) sd_event_now(j->backend->event, CLOCK_MONOTONIC, &now);
        if (now >= j->deadline) {
                job_fail(j, AGENTD_ERROR_START_FAILED,
                         "The runtime in sandbox %s did not answer /health within %llu s (see the logs of container "
                         "agentix-%s)", j->spec->id, HEALTH_TIMEOUT_USEC / 1000000, j->spec->id);
                return;
        }
        if (j->probes % HEALTH_CHECK_EVERY == 0) {
                /* Is it still running? A server that could not start is not waited for. */
                char path[128];
                j->step = STEP_INSPECT;
                snprintf(path, sizeof(path), "/containers/agentix-%s/json", j->spec->id);
                if (send_step(j, "GET", path, NULL) < 0)
                        job_fail(j, AGENTD_ERROR_BACKEND_UNAVAILABLE, "Cannot ask %s about the sandbox's container",
                                 j->backend->service);
                return;
        }
        if (sd_event_add_time_relative(j->backend->event, &j->timer, CLOCK_MONOTONIC, HEALTH_INTERVAL_USEC, 1000,
                                       on_probe_timer, j) < 0)
                job_fail(j, AGENTD_ERROR_START_FAILED, "Cannot wait for the runtime: out of memory");
}

static void on_probe_done(void *userdata, bool healthy) {
        CreateJob *j = userdata;

        if (healthy) {
                job_finish(j);
                return;
        }
        j->probes++;
        probe_again(j);
}

static void probe(CreateJob *j) {
        if (!j->probe && health_probe_new(j->backend->probes, j->runtime_url, on_probe_done, j, &j->probe) < 0) {
                job_fail(j, AGENTD_ERROR_START_FAILED, "Cannot probe the runtime: out of memory");
                return;
        }
        if (health_probe_start(j->probe) < 0)
                job_fail(j, AGENTD_ERROR_START_FAILED, "Cannot probe the runtime");
}

static int on_probe_timer(sd_event_source *es, uint64_t usec, void *userdata) {
        CreateJob *j = userdata;

        j->timer = sd_event_source_disable_unref(j->timer);
        probe(j);
        return 0;
}

/* ---- the steps -------------------------------------------------------------------------- */

static bool bundle_looks_right(json_t *image) {
        json_t *config = json_object_get(image, "Config");

        return json_object_get(json_object_get(config, "Volumes"), "/nix") != NULL;
}

/* Take the job's step again (after waiting for what another create is making). */
static int on_step_timer(sd_event_source *es, uint64_t usec, void *userdata) {
        CreateJob *j = userdata;

        j->timer = sd_event_source_disable_unref(j->timer);
        step(j);
        return 0;
}

/* Another create is making the carrier (its name is taken, but Docker has no container by that
 * name until the create is done): look again shortly. */
static void wait_for_carrier(CreateJob *j) {
        if (++j->carrier_waits > CARRIER_WAITS_MAX) {
                job_fail(j, AGENTD_ERROR_START_FAILED, "The bundle's carrier %s did not appear in %s within 10 s",
                         j->carrier, j->backend->service);
                return;
        }
        j->step = STEP_INSPECT_CARRIER;
        if (sd_event_add_time_relative(j->backend->event, &j->timer, CLOCK_MONOTONIC, CARRIER_WAIT_USEC, 1000,
                                       on_step_timer, j) < 0)
                job_fail(j, AGENTD_ERROR_START_FAILED, "Out of memory");
}

/* agentd's network, made by this create or another one: go on once it is there. */
static void network_step(CreateJob *j) {
        DockerBackend *b = j->backend;

        switch (docker_network_state(j->own)) {
        case NETWORK_READY:
                j->step = STEP_INSPECT_CARRIER;
                step(j);
                return;
        case NETWORK_BROKEN:
                job_fail(j, AGENTD_ERROR_START_FAILED, "No sandbox on %s: %s", j->network,
                         docker_network_error(j->own) ?: "its firewall rules are not in place");
                return;
        case NETWORK_UNKNOWN:
                /* A failure seen after this create asked: report it; else ask (again). */
                if (j->network_waits > 0 && docker_network_error(j->own)) {
                        job_fail(j, AGENTD_ERROR_START_FAILED, "%s", docker_network_error(j->own));
                        return;
                }
                docker_network_ensure(j->own);
                if (docker_network_state(j->own) == NETWORK_READY) {
                        network_step(j);
                        return;
                }
                break;
        case NETWORK_MAKING:
                break;
        }
        if (++j->network_waits > NETWORK_WAITS_MAX) {
                job_fail(j, AGENTD_ERROR_START_FAILED, "Network %s was not ready in %s within 30 s", j->network,
                         b->service);
                return;
        }
        if (sd_event_add_time_relative(b->event, &j->timer, CLOCK_MONOTONIC, NETWORK_WAIT_USEC, 1000,
                                       on_step_timer, j) < 0)
                job_fail(j, AGENTD_ERROR_START_FAILED, "Out of memory");
}

/* Fail and leave on_reply(). */
#define FAIL(...)                               \
        do {                                    \
                job_fail(__VA_ARGS__);          \
                return;                         \
        } while (0)
#define FAIL_DOCKER(...)                        \
        do {                                    \
                job_fail_docker(__VA_ARGS__);   \
                return;                         \
        } while (0)

/* The container runs (or this is the first look): keep probing /health, or start to. */
/* The last lines the runtime of a container that stopped wrote: what says most about why. */
#define STOPPED_LOG_LINES 10
#define STOPPED_LOG_MAX 1500

static void on_stopped_logs(DockerClient *d, int status, const void *data, size_t size, const char *error,
                            void *userdata) {
        CreateJob *j = userdata;
        const AgentdSandboxSpec *s = j->spec;
        _cleanup_buffer_ Buffer text = BUFFER_NULL;
        const char *t;
        size_t n;

        j->request = NULL;
        if (status != 200 || docker_logs_demultiplex(data, size, &text) < 0 || buffer_append(&text, "", 1) < 0)
                text.len = 0;
        /* One line of message: the log's lines joined, its end kept when it is long. */
        t = text.len ? (const char *) buffer_data(&text) : "";
        n = strlen(t);
        while (n > 0 && (t[n - 1] == '\n' || t[n - 1] == '\r'))
                n--;
        if (n > STOPPED_LOG_MAX) {
                t += n - STOPPED_LOG_MAX;
                n = STOPPED_LOG_MAX;
        }
        for (size_t i = 0; i < n; i++)
                if (t[i] == '\n' || t[i] == '\r' || (unsigned char) t[i] < ' ')
                        ((char *) t)[i] = t[i] == '\n' ? '|' : ' ';
        job_fail(j, AGENTD_ERROR_START_FAILED,
                 "The sandbox's container stopped (exit status %d) before its runtime answered: does image '%s' run "
                 "/nix/runtime/bin/agentix-server from bundle '%s'?%s%.*s", j->exit_code, s->image, s->bundle,
                 n > 0 ? " Its last lines: " : "", (int) n, t);
}

static void on_inspected(CreateJob *j, json_t *body) {
        json_t *st = json_object_get(body, "State");
        int r;

        if (!json_is_true(json_object_get(st, "Running"))) {
                char path[160];
                j->exit_code = (int) json_integer_value(json_object_get(st, "ExitCode"));
                snprintf(path, sizeof(path), "/containers/agentix-%s/logs?stdout=1&stderr=1&tail=%d", j->spec->id,
                         STOPPED_LOG_LINES);
                if (docker_request_raw(j->backend->docker, path, on_stopped_logs, j, &j->request) < 0)
                        on_stopped_logs(j->backend->docker, -ENOMEM, NULL, 0, NULL, j);
                return;
        }
        j->step = STEP_HEALTH;
        if (j->runtime_url) {
                if (sd_event_add_time_relative(j->backend->event, &j->timer, CLOCK_MONOTONIC, HEALTH_INTERVAL_USEC, 1000,
                                               on_probe_timer, j) < 0)
                        FAIL(j, AGENTD_ERROR_START_FAILED, "Out of memory");
                return;
        }
        r = docker_runtime_url(body, &j->runtime_url);
        if (r == -ENOMEM)
                FAIL(j, AGENTD_ERROR_START_FAILED, "Out of memory");
        if (r < 0)
                FAIL(j, AGENTD_ERROR_START_FAILED, "%s gave the sandbox's runtime neither a published port nor an "
                     "address on network %s", j->backend->service, strna(j->network));
        (void) sd_event_now(j->backend->event, CLOCK_MONOTONIC, &j->deadline);
        j->deadline += HEALTH_TIMEOUT_USEC;
        j->probes = 1;
        probe(j);
}

static void on_egress_set(void *userdata, int status, const char *output) {
        CreateJob *j = userdata;
        json_t *inspected;

        j->egress = NULL;
        if (status != 0)
                FAIL(j, AGENTD_ERROR_START_FAILED, "Could not set the sandbox's egress rules (agentix-firewall "
                     "egress: %s%s%s)", status < 0 ? strerror(-status) : "failed", output[0] ? ": " : "", output);
        j->egress_set = true;
        inspected = TAKE_PTR(j->inspected);
        on_inspected(j, inspected); /* and on to /health */
        json_decref(inspected);
}

/* The container runs: its egress rules go into its network namespace before anything can run
 * in it (the runtime only serves calls made with the token the create answers with). */
static void start_egress(CreateJob *j, json_t *inspect) {
        const char *netns = json_string_value(json_object_get(json_object_get(inspect, "NetworkSettings"), "SandboxKey"));
        int r;

        if (!netns || !netns[0])
                FAIL(j, AGENTD_ERROR_START_FAILED, "%s gave no network namespace for the sandbox: its egress rules "
                     "cannot be set", j->backend->service);
        r = firewall_egress_start(j->backend->event, netns, (char *const *) j->spec->egress, on_egress_set, j,
                                  &j->egress);
        if (r < 0)
                FAIL(j, AGENTD_ERROR_START_FAILED, "Cannot ask agentix-firewall to set the sandbox's egress rules: "
                     "%s", strerror(-r));
        j->inspected = json_incref(inspect);
        j->step = STEP_EGRESS;
}

static void on_reply(DockerClient *d, int status, json_t *body, const char *error, void *userdata) {
        CreateJob *j = userdata;
        const AgentdSandboxSpec *s = j->spec;
        const char *service = j->backend->service;
        char buf[128];

        j->request = NULL;
        switch (j->step) {
        case STEP_INSPECT_BUNDLE:
                if (status == 404)
                        FAIL(j, AGENTD_ERROR_BUNDLE_NOT_FOUND,
                             "Bundle image '%s' is not in %s: build it with agentixctl build (or load it)",
                             s->bundle, service);
                if (status != 200)
                        FAIL_DOCKER(j, "looking up the bundle image", status, body, error);
                if (!bundle_looks_right(body))
                        FAIL(j, AGENTD_ERROR_BUNDLE_NOT_FOUND,
                             "Image '%s' is not an agentix bundle: it declares no VOLUME /nix (make bundles with "
                             "agentixctl build)", s->bundle);
                j->bundle_id = strdup(json_string_value(json_object_get(body, "Id")) ?: "");
                if (!j->bundle_id || !strneq(j->bundle_id, "sha256:", 7) || strlen(j->bundle_id) < 7 + 12)
                        FAIL(j, AGENTD_ERROR_BACKEND_UNAVAILABLE, "%s gave no id for '%s'", service, s->bundle);
                if (asprintf(&j->carrier, "agentix-carrier-%.12s", j->bundle_id + 7) < 0) {
                        j->carrier = NULL;
                        FAIL(j, AGENTD_ERROR_START_FAILED, "Out of memory");
                }
                j->step = STEP_INSPECT_IMAGE;
                break;
        case STEP_INSPECT_IMAGE:
                if (status == 404)
                        FAIL(j, AGENTD_ERROR_IMAGE_NOT_FOUND,
                             "Task image '%s' is not in %s: pull, build or import it first", s->image, service);
                if (status != 200)
                        FAIL_DOCKER(j, "looking up the task image", status, body, error);
                if (docker_snapshot_owner(body, s->owner) == DOCKER_SNAPSHOT_OTHERS)
                        FAIL(j, AGENTD_ERROR_NOT_OWNER, "Image '%s' is a snapshot of another user", s->image);
                /* /info is read before the first container too: it says whether it needs the
                 * block I/O rule of cgroup-stats.h. */
                j->step = s->runtime || !j->backend->runtimes ? STEP_RUNTIME : STEP_NETWORK;
                break;
        case STEP_RUNTIME: {
                json_t *runtimes = json_object_get(body, "Runtimes");
                _cleanup_free_ char *names = NULL;
                const char *name;
                size_t size = 1;
                json_t *v;

                if (status != 200)
                        FAIL_DOCKER(j, "asking which runtimes it has", status, body, error);
                docker_backend_take_info(j->backend, body);
                if (!s->runtime || json_object_get(runtimes, s->runtime)) {
                        j->step = STEP_NETWORK;
                        break;
                }
                json_object_foreach(runtimes, name, v)
                        size += strlen(name) + 2;
                names = calloc(size, 1);
                if (!names)
                        FAIL(j, AGENTD_ERROR_START_FAILED, "Out of memory");
                json_object_foreach(runtimes, name, v) {
                        if (names[0])
                                strcat(names, ", ");
                        strcat(names, name);
                }
                FAIL(j, AGENTD_ERROR_INVALID_CONFIG, "config key 'runtime': %s has no runtime '%s' (it has: %s)",
                     service, s->runtime, names[0] ? names : "none it names");
        }
        case STEP_INSPECT_CARRIER:
                if (status != 200 && status != 404)
                        FAIL_DOCKER(j, "looking up the bundle's carrier", status, body, error);
                /* Still being made by the other create; every second, try to make it ourselves
                 * (in case that create failed). */
                if (status == 404 && j->carrier_waits % 40 != 0) {
                        wait_for_carrier(j);
                        return;
                }
                if (status == 404)
                        j->step = STEP_CREATE_CARRIER;
                else if (j->backend->start_carriers &&
                         streq(json_string_value(json_object_get(json_object_get(body, "State"), "Status")) ?: "", "created"))
                        j->step = STEP_START_CARRIER; /* made by a create still on its way, or that failed */
                else
                        j->step = STEP_CREATE;
                break;
        case STEP_CREATE_CARRIER:
                if (status == 409) { /* another create is making it */
                        wait_for_carrier(j);
                        return;
                }
                if (status != 201)
                        FAIL_DOCKER(j, "creating the bundle's carrier", status, body, error);
                j->step = j->backend->start_carriers ? STEP_START_CARRIER : STEP_CREATE;
                break;
        case STEP_START_CARRIER:
                if (status != 204 && status != 304)
                        FAIL_DOCKER(j, "starting the bundle's carrier", status, body, error);
                j->step = STEP_CREATE;
                break;
        case STEP_CREATE:
                if (status == 404 && strstr(docker_error_message(status, body, error, buf, sizeof(buf)), j->carrier)) {
                        /* The carrier went (pruned) between the look and the create: make it again. */
                        j->container_made = false;
                        if (++j->carrier_waits > CARRIER_WAITS_MAX)
                                FAIL(j, AGENTD_ERROR_START_FAILED, "The bundle's carrier %s keeps disappearing", j->carrier);
                        j->step = STEP_CREATE_CARRIER;
                        break;
                }
                if (status == 404)
                        FAIL(j, AGENTD_ERROR_IMAGE_NOT_FOUND, "%s has no image '%s'%s%s: %s", service, s->image,
                             s->platform ? " for " : "", s->platform ?: "",
                             docker_error_message(status, body, error, buf, sizeof(buf)));
                if (status != 201)
                        FAIL_DOCKER(j, "creating the sandbox's container", status, body, error);
                free(j->container_id);
                j->container_id = strdup(json_string_value(json_object_get(body, "Id")) ?: "");
                j->step = STEP_START;
                break;
        case STEP_START:
                if (status == 404 && j->network &&
                    strstr(docker_error_message(status, body, error, buf, sizeof(buf)), j->network)) {
                        /* Docker starts a container whose network has gone only to say so. */
                        if (!j->own || j->network_retried)
                                FAIL(j, AGENTD_ERROR_INVALID_CONFIG, "config key 'network': %s has no network '%s'",
                                     service, j->network);
                        j->network_retried = true; /* removed by hand, say: made again, once */
                        docker_network_forget(j->own);
                        j->step = STEP_REMAKE;
                        break;
                }
                if (status != 204 && status != 304)
                        FAIL_DOCKER(j, "starting the sandbox's container", status, body, error);
                j->step = STEP_INSPECT;
                break;
        case STEP_REMAKE:
                if (status != 204 && status != 404)
                        FAIL_DOCKER(j, "removing a container whose network went", status, body, error);
                j->container_made = false;
                j->network_waits = 0;
                j->step = STEP_NETWORK;
                break;
        case STEP_INSPECT:
                if (status != 200)
                        FAIL_DOCKER(j, "looking at the sandbox's container", status, body, error);
                if (s->egress && !j->egress_set) {
                        start_egress(j, body);
                        return;
                }
                on_inspected(j, body);
                return;
        default:
                return;
        }
        step(j);
}

static void step(CreateJob *j) {
        const AgentdSandboxSpec *s = j->spec;
        _cleanup_free_ char *q = NULL, *e = NULL;
        char path[512];
        json_t *body = NULL;
        int r;

        switch (j->step) {
        case STEP_INSPECT_BUNDLE:
        case STEP_INSPECT_IMAGE:
                e = docker_escape(j->step == STEP_INSPECT_BUNDLE ? s->bundle : s->image);
                if (!e) {
                        job_fail(j, AGENTD_ERROR_START_FAILED, "Out of memory");
                        return;
                }
                snprintf(path, sizeof(path), "/images/%s/json", e);
                r = send_step(j, "GET", path, NULL);
                break;
        case STEP_RUNTIME:
                /* Asked once; again only for a runtime not seen (registered since, perhaps). */
                if (j->backend->runtimes && (!s->runtime || json_object_get(j->backend->runtimes, s->runtime))) {
                        j->step = STEP_NETWORK;
                        step(j);
                        return;
                }
                r = send_step(j, "GET", "/info", NULL);
                break;
        case STEP_NETWORK:
                if (!j->own) {
                        j->step = STEP_INSPECT_CARRIER;
                        step(j);
                } else
                        network_step(j);
                return;
        case STEP_INSPECT_CARRIER:
                snprintf(path, sizeof(path), "/containers/%s/json", j->carrier);
                r = send_step(j, "GET", path, NULL);
                break;
        case STEP_CREATE_CARRIER:
                snprintf(path, sizeof(path), "/containers/create?name=%s", j->carrier);
                /* Started, if ever, only to fill its volume: it prints its version and exits. */
                body = json_pack("{s:s, s:[s], s:[s], s:b, s:{s:s, s:s, s:s}}", "Image", j->bundle_id, "Entrypoint",
                                 SERVER_PATH, "Cmd", "--version", "NetworkDisabled", 1, "Labels", "org.agentix.managed", "1", "org.agentix.carrier",
                                 j->bundle_id, AGENTD_INSTANCE_LABEL, j->backend->instance ?: "");
                if (body && j->backend->host_config)
                        json_object_set_new(body, "HostConfig", json_deep_copy(j->backend->host_config));
                r = body ? send_step(j, "POST", path, body) : -ENOMEM;
                break;
        case STEP_CREATE:
                if (s->platform) {
                        q = docker_escape(s->platform);
                        if (!q) {
                                job_fail(j, AGENTD_ERROR_START_FAILED, "Out of memory");
                                return;
                        }
                }
                snprintf(path, sizeof(path), "/containers/create?name=agentix-%s%s%s", s->id, q ? "&platform=" : "",
                         q ?: "");
                body = task_container_json(j);
                j->container_made = true; /* from here on, a failure removes agentix-<id> */
                r = body ? send_step(j, "POST", path, body) : -ENOMEM;
                break;
        case STEP_START_CARRIER:
                snprintf(path, sizeof(path), "/containers/%s/start", j->carrier);
                r = send_step(j, "POST", path, NULL);
                break;
        case STEP_START:
                snprintf(path, sizeof(path), "/containers/agentix-%s/start", s->id);
                r = send_step(j, "POST", path, NULL);
                break;
        case STEP_REMAKE:
                snprintf(path, sizeof(path), "/containers/agentix-%s?force=1&v=1", s->id);
                r = send_step(j, "DELETE", path, NULL);
                break;
        case STEP_INSPECT:
                snprintf(path, sizeof(path), "/containers/agentix-%s/json", s->id);
                r = send_step(j, "GET", path, NULL);
                break;
        default:
                return;
        }
        json_decref(body);
        if (r < 0)
                job_fail(j, AGENTD_ERROR_BACKEND_UNAVAILABLE, "Cannot send a request to %s: %s", j->backend->service,
                         strerror(-r));
}

/* On a shard of agentd's network of that kind, then on with the steps. */
static void take_shard(CreateJob *j, NetworkShards *shards) {
        int r = network_shards_take(shards, j->spec->id, &j->own);

        if (r == -E2BIG)
                job_fail(j, AGENTD_ERROR_START_FAILED, "Every shard of agentd's networks on %s is full (%u of them): "
                         "no room for another sandbox on this host", j->backend->service, NETWORK_SHARDS_MAX);
        else if (r < 0)
                job_fail(j, AGENTD_ERROR_START_FAILED, "No network for the sandbox: %s", strerror(-r));
        else {
                j->shards = shards;
                j->network = docker_network_name(j->own);
                step(j);
        }
}

int docker_backend_create(DockerBackend *b, const AgentdSandboxSpec *spec, agentd_made_t made, void *userdata,
                          CreateJob **ret_job) {
        CreateJob *j = calloc(1, sizeof(*j));

        if (!j)
                return -ENOMEM;
        *j = (CreateJob) { .backend = b, .spec = spec, .made = made, .userdata = userdata, .step = STEP_INSPECT_BUNDLE,
                           .network = spec->network };
        /* The caller holds the job before its first step can finish it. */
        *ret_job = j;
        /* "isolated" (the default where the backend has it) is agentd's own network; with an
         * egress list, agentd's egress network. */
        if (spec->egress) {
                if (spec->network && !streq(spec->network, "isolated"))
                        job_fail(j, AGENTD_ERROR_INVALID_CONFIG, "config key 'egress' is for sandboxes on agentd's own "
                                 "network, not on '%s' (leave 'network' out)", spec->network);
                else if (!b->egress)
                        job_fail(j, AGENTD_ERROR_INVALID_CONFIG, "config key 'egress': the %s backend has no egress "
                                 "lists", b->service);
                else if (!firewall_egress_possible())
                        job_fail(j, AGENTD_ERROR_INVALID_CONFIG, "config key 'egress': no one here sets egress "
                                 "rules for agentd (start agentix-egress.socket, or give agentd CAP_NET_ADMIN and "
                                 "CAP_SYS_ADMIN)");
                else
                        take_shard(j, b->egress);
                return 0;
        }
        if ((!spec->network && b->isolated) || (spec->network && streq(spec->network, "isolated"))) {
                if (!b->isolated) {
                        job_fail(j, AGENTD_ERROR_INVALID_CONFIG, "config key 'network': the %s backend has no "
                                 "isolated network; name one of its networks, or none", b->service);
                        return 0;
                }
                take_shard(j, b->isolated);
                return 0;
        }
        step(j);
        return 0;
}

/* SPDX-License-Identifier: MIT */
/* A bundle on the swarm's nodes. A service cannot take a carrier's volume (VolumesFrom), so:
 *
 *   1. a global job, agentix-fill-<digest12>, runs the bundle image once on every node with
 *      the named volume agentix-bundle-<digest12> at /nix: Docker fills an empty volume from the
 *      image, and the job's command (agentix-server --version) proves the runtime is there;
 *   2. every node whose task completed gets the label org.agentix.bundle.<digest12>=1;
 *   3. the job goes.
 *
 * A sandbox's service mounts that volume with a placement constraint on the label: no task can
 * land on a node whose volume would be empty (Docker makes a missing volume, empty). A create
 * waits for a fill only when no ready node has the bundle; a node without it (one that joined
 * later) gets it from a fill in the background. A node where a fill failed (another
 * architecture, no way to the registry) is tried again at most once a minute. */
#include "log.h"
#include "strv.h"
#include "swarm-backend.h"

#define FILL_POLL_USEC (200ULL * 1000)
#define FILL_TIMEOUT_USEC (300ULL * 1000 * 1000) /* pulling a large bundle on a slow link */
#define REFILL_AFTER_USEC (60ULL * 1000 * 1000)
#define TASKS_APPEAR_USEC (10ULL * 1000 * 1000)   /* a global job's tasks, one per node, appear by then */
#define BUNDLE_SERVER "/nix/runtime/bin/agentix-server"

typedef enum FillStep {
        FILL_CREATE,
        FILL_RECREATE,            /* a job of that name was left (an agentd killed mid-fill): gone first */
        FILL_TASKS,
        FILL_NODE_GET,
        FILL_NODE_UPDATE,
        FILL_REMOVE,
} FillStep;

typedef struct Waiter {
        swarm_bundle_ready_t ready;
        void *userdata;
} Waiter;

struct SwarmFill {
        SwarmFill *next;
        SwarmBackend *backend;
        char *ref;                /* REF@DIGEST: what every node pulls */
        char *digest;
        char label[64], volume[64], service[80];
        bool running;
        bool recreated;           /* a left job was removed once: a second 409 is an error */
        FillStep step;
        DockerRequest *request;
        sd_event_source *timer;
        uint64_t started, deadline, finished_at;
        unsigned ready_nodes;     /* ready, active nodes when the fill began: tasks to wait for */
        char **completed;         /* nodes whose task completed: to label */
        char **failed;            /* nodes whose task did not, at the last fill */
        size_t labelled;          /* of those, done */
        unsigned n_labelled;      /* labels in place */
        char *error;              /* why no node got it */
        Waiter *waiters;
        size_t n_waiters;
};

/* A create's look at the nodes, before it waits or goes on. */
typedef struct Check {
        SwarmFill *fill;
        Waiter waiter;
        DockerRequest **slot;     /* the create's: cleared once answered */
} Check;

void swarm_bundle_names(const char *digest, char label[static 64], char volume[static 64]) {
        const char *hex = startswith(digest, "sha256:") ?: digest;

        snprintf(label, 64, "org.agentix.bundle.%.12s", hex);
        snprintf(volume, 64, "agentix-bundle-%.12s", hex);
}

static void fill_free(SwarmFill *f) {
        docker_request_cancel(f->request);
        sd_event_source_disable_unref(f->timer);
        strv_free(f->completed);
        strv_free(f->failed);
        free(f->ref);
        free(f->digest);
        free(f->error);
        free(f->waiters);
        free(f);
}

void swarm_bundle_free_all(SwarmBackend *b) {
        while (b->fills) {
                SwarmFill *f = b->fills;
                b->fills = f->next;
                fill_free(f);
        }
}

void swarm_bundle_forget(SwarmBackend *b, void *userdata) {
        for (SwarmFill *f = b->fills; f; f = f->next)
                for (size_t i = 0; i < f->n_waiters; i++)
                        if (f->waiters[i].userdata == userdata)
                                f->waiters[i].ready = NULL;
}

static int add_waiter(SwarmFill *f, Waiter w) {
        Waiter *grown = realloc(f->waiters, (f->n_waiters + 1) * sizeof(*grown));

        if (!grown)
                return -ENOMEM;
        f->waiters = grown;
        f->waiters[f->n_waiters++] = w;
        return 0;
}

/* The fill is over: each waiter hears (one may start another fill meanwhile). */
static void fill_done(SwarmFill *f) {
        Waiter *waiters = f->waiters;
        size_t n = f->n_waiters;
        _cleanup_free_ char *message = NULL;

        f->running = false;
        f->waiters = NULL;
        f->n_waiters = 0;
        f->request = NULL;
        f->timer = sd_event_source_disable_unref(f->timer);
        (void) sd_event_now(f->backend->event, CLOCK_MONOTONIC, &f->finished_at);
        if (f->n_labelled == 0 &&
            asprintf(&message, "Bundle '%s' reached no node of the swarm: %s", f->ref,
                     f->error ?: "no node ran the job that fills its volume") < 0)
                message = NULL;
        if (f->n_labelled > 0)
                log_info("Bundle %s is on %u more node(s) of the swarm (volume %s).", f->ref, f->n_labelled, f->volume);
        else
                log_warning("%s", message ?: "A bundle reached no node of the swarm.");
        for (size_t i = 0; i < n; i++)
                if (waiters[i].ready)
                        waiters[i].ready(waiters[i].userdata, f->n_labelled ? NULL : AGENTD_ERROR_BUNDLE_NOT_FOUND,
                                         f->n_labelled ? NULL : message ?: "The bundle reached no node.");
        free(waiters);
}

static void fill_fail(SwarmFill *f, const char *fmt, ...) _printf_(2, 3);
static void fill_fail(SwarmFill *f, const char *fmt, ...) {
        va_list ap;

        free(f->error);
        va_start(ap, fmt);
        if (vasprintf(&f->error, fmt, ap) < 0)
                f->error = NULL;
        va_end(ap);
        fill_done(f);
}

static void on_fill_reply(DockerClient *d, int status, json_t *body, const char *error, void *userdata);

static int send_fill(SwarmFill *f, const char *method, const char *path, json_t *body) {
        return docker_request(f->backend->manager, method, path, body, 0, on_fill_reply, f, &f->request);
}

static void remove_job(SwarmFill *f) {
        char path[128];

        f->step = FILL_REMOVE;
        snprintf(path, sizeof(path), "/services/%s", f->service);
        if (send_fill(f, "DELETE", path, NULL) < 0)
                fill_done(f);
}

/* The next completed node gets the label: GET it for its version, then update its spec. */
static void label_next(SwarmFill *f) {
        char path[128];

        if (!f->completed || !f->completed[f->labelled]) {
                remove_job(f);
                return;
        }
        f->step = FILL_NODE_GET;
        snprintf(path, sizeof(path), "/nodes/%s", f->completed[f->labelled]);
        if (send_fill(f, "GET", path, NULL) < 0)
                fill_fail(f, "out of memory");
}

static void label_node(SwarmFill *f, json_t *node) {
        json_t *spec = json_deep_copy(json_object_get(node, "Spec")), *labels;
        long long version = json_integer_value(json_object_get(json_object_get(node, "Version"), "Index"));
        char path[160];
        int r;

        if (!spec) {
                fill_fail(f, "the manager gave node %s without its spec", f->completed[f->labelled]);
                return;
        }
        labels = json_object_get(spec, "Labels");
        if (!json_is_object(labels)) {
                labels = json_object();
                json_object_set_new(spec, "Labels", labels);
        }
        json_object_set_new(labels, f->label, json_string("1"));
        f->step = FILL_NODE_UPDATE;
        snprintf(path, sizeof(path), "/nodes/%s/update?version=%lld", f->completed[f->labelled], version);
        r = send_fill(f, "POST", path, spec);
        json_decref(spec);
        if (r < 0)
                fill_fail(f, "out of memory");
}

static int on_fill_timer(sd_event_source *es, uint64_t usec, void *userdata);

static void poll_tasks(SwarmFill *f) {
        if (sd_event_add_time_relative(f->backend->event, &f->timer, CLOCK_MONOTONIC, FILL_POLL_USEC, 10 * 1000,
                                       on_fill_timer, f) < 0)
                fill_fail(f, "out of memory");
}

static int on_fill_timer(sd_event_source *es, uint64_t usec, void *userdata) {
        SwarmFill *f = userdata;
        _cleanup_free_ char *filter = NULL, *escaped = NULL, *path = NULL;

        f->timer = sd_event_source_disable_unref(f->timer);
        f->step = FILL_TASKS;
        if (asprintf(&filter, "{\"service\":[\"%s\"]}", f->service) < 0 || !(escaped = docker_escape(filter)) ||
            asprintf(&path, "/tasks?filters=%s", escaped) < 0 || send_fill(f, "GET", path, NULL) < 0)
                fill_fail(f, "out of memory");
        return 0;
}

/* Every task ended (or time is up): the completed ones' nodes are labelled. */
static void on_tasks(SwarmFill *f, json_t *tasks) {
        size_t i, ended = 0;
        uint64_t now;
        json_t *t;

        json_array_foreach(tasks, i, t) {
                const char *state = json_string_value(json_object_get(json_object_get(t, "Status"), "State")) ?: "";
                if (swarm_task_ended(state))
                        ended++;
        }
        (void) sd_event_now(f->backend->event, CLOCK_MONOTONIC, &now);
        /* Every task ended; and one per node, unless a node went meanwhile (after a while, the
         * tasks there are all there will be). */
        if ((ended < json_array_size(tasks) ||
             (json_array_size(tasks) < f->ready_nodes && now < f->started + TASKS_APPEAR_USEC)) &&
            now < f->deadline) {
                poll_tasks(f);
                return;
        }
        json_array_foreach(tasks, i, t) {
                json_t *st = json_object_get(t, "Status");
                const char *state = json_string_value(json_object_get(st, "State")) ?: "",
                           *node = json_string_value(json_object_get(t, "NodeID"));

                if (streq(state, "complete") && node) {
                        if (strv_extend(&f->completed, node) < 0) {
                                fill_fail(f, "out of memory");
                                return;
                        }
                } else if (node && strv_extend(&f->failed, node) < 0) {
                        fill_fail(f, "out of memory");
                        return;
                }
                if (!streq(state, "complete") && !f->error) {
                        const char *err = json_string_value(json_object_get(st, "Err"));
                        /* The job's command not found: the image holds no runtime at /nix. */
                        if (asprintf(&f->error, "on node %s the job that fills its volume %s%s%s%s", node ?: "?",
                                     swarm_task_ended(state) ? "ended " : "is still ", state, err ? ": " : "", err ?: "") < 0)
                                f->error = NULL;
                }
        }
        label_next(f);
}

/* The global job: the bundle image, its volume at /nix, the runtime's --version as command. */
static void create_job(SwarmFill *f) {
        json_t *job = json_pack("{s:s, s:{s:s}, s:{s:{s:s, s:[ss], s:[{s:s, s:s, s:s}]}, s:{s:s}}, s:{s:{}}}",
                                "Name", f->service,
                                "Labels", "org.agentix.fill", f->digest,
                                "TaskTemplate",
                                "ContainerSpec", "Image", f->ref, "Command", BUNDLE_SERVER, "--version",
                                "Mounts", "Type", "volume", "Source", f->volume, "Target", "/nix",
                                "RestartPolicy", "Condition", "none",
                                "Mode", "GlobalJob");
        int r;

        f->step = FILL_CREATE;
        r = job ? send_fill(f, "POST", "/services/create", job) : -ENOMEM;
        json_decref(job);
        if (r < 0)
                fill_fail(f, "cannot ask the manager: %s", strerror(-r));
}

static void on_fill_reply(DockerClient *d, int status, json_t *body, const char *error, void *userdata) {
        SwarmFill *f = userdata;
        char buf[128];

        f->request = NULL;
        switch (f->step) {
        case FILL_CREATE:
                if (status == 409 && !f->recreated) {
                        char path[128];
                        f->recreated = true;
                        f->step = FILL_RECREATE;
                        snprintf(path, sizeof(path), "/services/%s", f->service);
                        if (send_fill(f, "DELETE", path, NULL) < 0)
                                fill_fail(f, "out of memory");
                        return;
                }
                if (status != 201) {
                        fill_fail(f, "the manager refused its job: %s", docker_error_message(status, body, error, buf,
                                                                                              sizeof(buf)));
                        return;
                }
                poll_tasks(f);
                return;
        case FILL_RECREATE:
                if (status != 200 && status != 404) {
                        fill_fail(f, "a job %s was left and cannot be removed: %s", f->service,
                                  docker_error_message(status, body, error, buf, sizeof(buf)));
                        return;
                }
                break;
        case FILL_TASKS:
                if (status != 200) {
                        fill_fail(f, "cannot follow its job: %s", docker_error_message(status, body, error, buf, sizeof(buf)));
                        return;
                }
                on_tasks(f, body);
                return;
        case FILL_NODE_GET:
                if (status != 200) {
                        f->labelled++; /* a node that went meanwhile: the others still count */
                        label_next(f);
                        return;
                }
                label_node(f, body);
                return;
        case FILL_NODE_UPDATE:
                if (status == 200)
                        f->n_labelled++;
                else
                        log_warning("Cannot label swarm node %s with %s: %s", f->completed[f->labelled], f->label,
                                    docker_error_message(status, body, error, buf, sizeof(buf)));
                f->labelled++;
                label_next(f);
                return;
        case FILL_REMOVE:
                if (status != 200 && status != 404)
                        log_warning("Cannot remove swarm job %s: %s", f->service,
                                    docker_error_message(status, body, error, buf, sizeof(buf)));
                fill_done(f);
                return;
        }
        create_job(f); /* the left job is gone: make ours */
}

static void fill_start(SwarmFill *f, unsigned ready_nodes) {
        f->running = true;
        f->recreated = false;
        f->ready_nodes = ready_nodes;
        f->labelled = 0;
        f->n_labelled = 0;
        f->completed = strv_free(f->completed);
        f->failed = strv_free(f->failed);
        f->error = mfree(f->error);
        (void) sd_event_now(f->backend->event, CLOCK_MONOTONIC, &f->started);
        f->deadline = f->started + FILL_TIMEOUT_USEC;
        log_info("Putting bundle %s on the swarm's nodes (volume %s).", f->ref, f->volume);
        create_job(f);
}

static SwarmFill *fill_get(SwarmBackend *b, const char *ref, const char *digest) {
        SwarmFill *f;

        for (f = b->fills; f; f = f->next)
                if (streq(f->digest, digest))
                        return f;
        f = calloc(1, sizeof(*f));
        if (!f)
                return NULL;
        f->backend = b;
        f->digest = strdup(digest);
        if (strchr(ref, '@'))
                f->ref = strdup(ref);
        else if (asprintf(&f->ref, "%s@%s", ref, digest) < 0)
                f->ref = NULL;
        if (!f->digest || !f->ref) {
                fill_free(f);
                return NULL;
        }
        swarm_bundle_names(digest, f->label, f->volume);
        snprintf(f->service, sizeof(f->service), "agentix-fill-%.12s", startswith(digest, "sha256:") ?: digest);
        f->next = b->fills;
        b->fills = f;
        return f;
}

static bool node_usable(json_t *node) {
        return streq_ptr(json_string_value(json_object_get(json_object_get(node, "Status"), "State")), "ready") &&
               streq_ptr(json_string_value(json_object_get(json_object_get(node, "Spec"), "Availability")), "active");
}

static void on_nodes(DockerClient *d, int status, json_t *body, const char *error, void *userdata) {
        _cleanup_free_ Check *c = userdata;
        SwarmFill *f = c->fill;
        unsigned have = 0, lack = 0, new_lack = 0; /* new: not among the last fill's failures */
        uint64_t now;
        size_t i;
        json_t *n;
        char buf[128];

        *c->slot = NULL;
        if (status != 200) {
                c->waiter.ready(c->waiter.userdata, AGENTD_ERROR_BACKEND_UNAVAILABLE,
                                docker_error_message(status, body, error, buf, sizeof(buf)));
                return;
        }
        json_array_foreach(body, i, n) {
                if (!node_usable(n))
                        continue;
                if (streq_ptr(json_string_value(json_object_get(json_object_get(json_object_get(n, "Spec"), "Labels"),
                                                                f->label)), "1"))
                        have++;
                else {
                        lack++;
                        if (!strv_contains(f->failed, json_string_value(json_object_get(n, "ID")) ?: ""))
                                new_lack++;
                }
        }
        if (lack > 0 && !f->running) {
                (void) sd_event_now(f->backend->event, CLOCK_MONOTONIC, &now);
                if (have == 0 || new_lack > 0 || f->finished_at == 0 || now - f->finished_at >= REFILL_AFTER_USEC)
                        fill_start(f, have + lack);
        }
        if (have > 0) {
                c->waiter.ready(c->waiter.userdata, NULL, NULL);
                return;
        }
        if (!f->running) {
                c->waiter.ready(c->waiter.userdata, AGENTD_ERROR_START_FAILED,
                                "The swarm has no ready, active node to run the sandbox on.");
                return;
        }
        if (add_waiter(f, c->waiter) < 0)
                c->waiter.ready(c->waiter.userdata, AGENTD_ERROR_START_FAILED, "Out of memory");
}

int swarm_bundle_ensure(SwarmBackend *b, const char *ref, const char *digest, swarm_bundle_ready_t ready,
                        void *userdata, DockerRequest **slot) {
        Check *c = calloc(1, sizeof(*c));
        int r;

        if (!c)
                return -ENOMEM;
        c->fill = fill_get(b, ref, digest);
        c->waiter = (Waiter) { .ready = ready, .userdata = userdata };
        c->slot = slot;
        if (!c->fill) {
                free(c);
                return -ENOMEM;
        }
        r = docker_request(b->manager, "GET", "/nodes", NULL, 0, on_nodes, c, slot);
        if (r < 0)
                free(c);
        else
                docker_request_set_destroy(*slot, free);
        return r;
}

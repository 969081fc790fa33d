/* SPDX-License-Identifier: MIT */
/* Adoption and the watch. The manager sends no events for tasks, so both are looks
 * (swarm-look.c): adopt() is one, and the watch looks every second, and at once when the
 * manager reports a node or service change (a node going down is one), telling agentd what
 * changed since the last look. */
#include "log.h"
#include "strv.h"
#include "swarm-backend.h"

#define LOOK_INTERVAL_USEC (1000ULL * 1000)
#define EVENTS_RETRY_USEC (2000ULL * 1000)

/* ---- adopt ------------------------------------------------------------------------------- */

typedef struct Adopt {
        agentd_found_t found;
        void (*done)(void *userdata, int error);
        void *userdata;
} Adopt;

static const char *label(json_t *labels, const char *key) {
        return json_string_value(json_object_get(labels, key)) ?: "";
}

static const char *empty_to_null(const char *s) {
        return s && *s ? s : NULL;
}

/* What agentd recorded at create, back from the service's labels and spec. */
static void found(Adopt *a, const SwarmSandbox *sb) {
        json_t *spec = json_object_get(sb->service, "Spec"), *labels = json_object_get(spec, "Labels"),
               *task = json_object_get(spec, "TaskTemplate"),
               *limits = json_object_get(json_object_get(task, "Resources"), "Limits");
        json_t *container = json_object_get(task, "ContainerSpec"), *e;
        _cleanup_strv_free_ char **caller_labels = NULL;
        AgentdFoundState state;
        bool ok = true;
        size_t i;
        AgentdSandboxSpec s = {
                .id = sb->id,
                .owner = (uid_t) docker_label_u64(labels, "org.agentix.owner", &ok),
                .created_at = docker_label_u64(labels, "org.agentix.created", &ok),
                .expires_at = docker_label_u64(labels, "org.agentix.expires", &ok),
                .image = label(labels, "org.agentix.image"),
                .bundle = label(labels, "org.agentix.bundle"),
                .bound_to = empty_to_null(label(labels, "org.agentix.bound-to")),
                .pool = empty_to_null(label(labels, "org.agentix.pool")),
                .tls = streq_ptr(label(labels, "org.agentix.tls"), "1"),
                .runtime = empty_to_null(label(labels, "org.agentix.runtime")),
                .network = empty_to_null(label(labels, "org.agentix.network")),
                .platform = empty_to_null(label(labels, "org.agentix.platform")),
                .cpus = json_integer_value(json_object_get(limits, "NanoCPUs")) / 1e9,
                .memory = json_integer_value(json_object_get(limits, "MemoryBytes")),
                .pids = json_integer_value(json_object_get(limits, "Pids")),
        };
        AgentdSandboxPlace place = {
                .runtime_url = sb->runtime_url[0] ? sb->runtime_url : NULL,
                .container_id = json_string_value(json_object_get(sb->service, "ID")),
                .bundle_id = label(labels, "org.agentix.bundle.id"),
        };

        if (docker_caller_labels(labels, &caller_labels) < 0)
                ok = false;
        s.labels = (const char *const *) caller_labels;
        json_array_foreach(json_object_get(container, "Env"), i, e)
                if (json_string_value(e) && strneq(json_string_value(e), "AGENTIX_TOKEN=", 14))
                        s.token = json_string_value(e) + 14;
        /* A service whose task never got going was made by an agentd that died mid-create:
         * agentd removes it. */
        if (!ok || !s.token || sb->condition == SWARM_STARTING || (sb->condition == SWARM_RUNNING && !place.runtime_url))
                state = AGENTD_FOUND_HALF_MADE;
        else
                state = sb->condition == SWARM_RUNNING ? AGENTD_FOUND_RUNNING : AGENTD_FOUND_EXITED;
        a->found(a->userdata, &s, &place, state);
}

static void on_adopt_look(SwarmBackend *b, int error, const char *message, const SwarmSandbox *sandboxes, size_t n,
                          void *userdata) {
        _cleanup_free_ Adopt *a = userdata;

        if (error < 0)
                log_warning("Cannot ask the swarm manager at %s which sandboxes it runs: %s", b->host, message);
        for (size_t i = 0; i < n; i++)
                found(a, &sandboxes[i]);
        a->done(a->userdata, error < 0 ? error : 0);
}

int swarm_adopt(SwarmBackend *b, agentd_found_t found_cb, void (*done)(void *userdata, int error), void *userdata) {
        Adopt *a = calloc(1, sizeof(*a));
        int r;

        if (!a)
                return -ENOMEM;
        *a = (Adopt) { .found = found_cb, .done = done, .userdata = userdata };
        r = swarm_look(b, on_adopt_look, a, NULL);
        if (r < 0)
                free(a);
        return r;
}

/* ---- the watch --------------------------------------------------------------------------- */

static int schedule(SwarmBackend *b, uint64_t usec);

static struct SwarmKnown *known_get(SwarmBackend *b, const char *id) {
        for (size_t i = 0; i < b->n_known; i++)
                if (streq(b->known[i].id, id))
                        return &b->known[i];
        return NULL;
}

/* The action agentd hears when a sandbox's condition becomes c. */
static const char *action_for(SwarmCondition c) {
        switch (c) {
        case SWARM_RUNNING:
                return "start";
        case SWARM_EXITED:
                return "die";
        case SWARM_FAILED:
                return "fail";
        default:
                return NULL;
        }
}

static void on_watch_look(SwarmBackend *b, int error, const char *message, const SwarmSandbox *sandboxes, size_t n,
                          void *userdata) {
        size_t kept = 0;

        b->look = NULL;
        if (error < 0) {
                if (!b->lost)
                        log_warning("Cannot look at the swarm (manager %s): %s; looking again.", b->host, message);
                b->lost = true;
                (void) schedule(b, LOOK_INTERVAL_USEC);
                return;
        }
        if (b->lost) {
                /* Changes may have gone unseen: agentd adopts again. */
                log_info("The swarm manager at %s answers again.", b->host);
                b->lost = false;
                b->n_known = 0;
                b->on_event(b->event_userdata, NULL, "resync");
        }
        for (size_t i = 0; i < b->n_known; i++)
                b->known[i].seen = false;
        for (size_t i = 0; i < n; i++) {
                const SwarmSandbox *sb = &sandboxes[i];
                struct SwarmKnown *k = known_get(b, sb->id);
                const char *action;

                if (!k) {
                        struct SwarmKnown *grown = realloc(b->known, (b->n_known + 1) * sizeof(*grown));
                        if (!grown)
                                continue;
                        b->known = grown;
                        k = &b->known[b->n_known++];
                        snprintf(k->id, sizeof(k->id), "%s", sb->id);
                        /* First seen: running or starting is what agentd made it as; anything
                         * else is news. */
                        k->condition = sb->condition == SWARM_STARTING ? SWARM_STARTING : SWARM_RUNNING;
                }
                k->seen = true;
                if (k->condition == sb->condition)
                        continue;
                k->condition = sb->condition;
                action = action_for(sb->condition);
                if (action) {
                        log_debug("Sandbox %s: its swarm task is %s.", sb->id, swarm_condition_to_string(sb->condition));
                        b->on_event(b->event_userdata, sb->id, action);
                }
        }
        /* A service gone without agentd's removal (docker service rm): "destroy". agentd's own
         * removals are ignored there, as it is removing them. */
        for (size_t i = 0; i < b->n_known; i++) {
                if (b->known[i].seen) {
                        b->known[kept++] = b->known[i];
                        continue;
                }
                b->on_event(b->event_userdata, b->known[i].id, "destroy");
        }
        b->n_known = kept;
        (void) schedule(b, b->look_again ? 0 : LOOK_INTERVAL_USEC);
        b->look_again = false;
}

static int on_look_timer(sd_event_source *es, uint64_t usec, void *userdata) {
        SwarmBackend *b = userdata;

        b->look_timer = sd_event_source_disable_unref(b->look_timer);
        if (swarm_look(b, on_watch_look, b, &b->look) < 0)
                (void) schedule(b, LOOK_INTERVAL_USEC);
        return 0;
}

static int schedule(SwarmBackend *b, uint64_t usec) {
        if (b->look_timer || b->look)
                return 0;
        return sd_event_add_time_relative(b->event, &b->look_timer, CLOCK_MONOTONIC, usec, 10 * 1000, on_look_timer, b);
}

/* A node or service changed: look now (or right after the look in progress). */
static void on_manager_event(DockerClient *d, json_t *line, void *userdata) {
        SwarmBackend *b = userdata;

        if (b->look) {
                b->look_again = true;
                return;
        }
        b->look_timer = sd_event_source_disable_unref(b->look_timer);
        (void) schedule(b, 0);
}

static int start_events(SwarmBackend *b);

static int on_events_retry(sd_event_source *es, uint64_t usec, void *userdata) {
        SwarmBackend *b = userdata;

        b->events_retry = sd_event_source_disable_unref(b->events_retry);
        if (start_events(b) < 0)
                (void) sd_event_add_time_relative(b->event, &b->events_retry, CLOCK_MONOTONIC, EVENTS_RETRY_USEC, 0,
                                                  on_events_retry, b);
        return 0;
}

/* The stream ended (the manager restarted, or is gone): the looks go on; listen again soon. */
static void on_events_end(DockerClient *d, int status, json_t *body, const char *error, void *userdata) {
        SwarmBackend *b = userdata;

        b->events = NULL;
        (void) sd_event_add_time_relative(b->event, &b->events_retry, CLOCK_MONOTONIC, EVENTS_RETRY_USEC, 0,
                                          on_events_retry, b);
}

static int start_events(SwarmBackend *b) {
        /* {"type":["node","service"]} */
        return docker_stream(b->manager, "/events?filters=%7B%22type%22%3A%5B%22node%22%2C%22service%22%5D%7D",
                             on_manager_event, on_events_end, b, &b->events);
}

int swarm_watch(SwarmBackend *b, agentd_event_t on_event, void *userdata) {
        int r;

        b->on_event = on_event;
        b->event_userdata = userdata;
        r = start_events(b);
        if (r < 0)
                return r;
        return schedule(b, 0);
}

void swarm_watch_stop(SwarmBackend *b) {
        docker_request_cancel(b->events);
        b->events = NULL;
        b->events_retry = sd_event_source_disable_unref(b->events_retry);
        swarm_look_cancel(b->look);
        b->look = NULL;
        b->look_timer = sd_event_source_disable_unref(b->look_timer);
}

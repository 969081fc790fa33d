/* SPDX-License-Identifier: MIT */
/* One look at the swarm: agentd's services (by label), every task and every node, asked at
 * once, then each sandbox's condition from its newest task and that task's node. */
#include "log.h"
#include "swarm-backend.h"

enum { ASK_SERVICES, ASK_TASKS, ASK_NODES, _ASK_MAX };

struct SwarmLook {
        SwarmBackend *backend;
        swarm_look_t done;
        void *userdata;
        DockerRequest *requests[_ASK_MAX];
        json_t *answers[_ASK_MAX];
        unsigned pending;
        int error;
        char message[256];
};

static const char *const condition_names[_SWARM_CONDITION_MAX] = {
        [SWARM_STARTING] = "starting",
        [SWARM_RUNNING] = "running",
        [SWARM_EXITED] = "exited",
        [SWARM_FAILED] = "failed",
};

const char *swarm_condition_to_string(SwarmCondition c) {
        return c >= 0 && c < _SWARM_CONDITION_MAX ? condition_names[c] : "?";
}

void swarm_look_cancel(SwarmLook *l) {
        if (!l)
                return;
        for (size_t i = 0; i < _ASK_MAX; i++) {
                docker_request_cancel(l->requests[i]);
                json_decref(l->answers[i]);
        }
        free(l);
}

static json_t *node_by_id(json_t *nodes, const char *id) {
        size_t i;
        json_t *n;

        json_array_foreach(nodes, i, n)
                if (id && streq_ptr(json_string_value(json_object_get(n, "ID")), id))
                        return n;
        return NULL;
}

json_t *swarm_newest_task(json_t *tasks, const char *service_id) {
        json_t *newest = NULL, *t;
        size_t i;

        json_array_foreach(tasks, i, t)
                if ((!service_id || streq_ptr(json_string_value(json_object_get(t, "ServiceID")), service_id)) &&
                    (!newest || json_integer_value(json_object_get(json_object_get(t, "Version"), "Index")) >
                                        json_integer_value(json_object_get(json_object_get(newest, "Version"), "Index"))))
                        newest = t;
        return newest;
}

static bool task_failed(const char *state) {
        return streq(state, "failed") || streq(state, "rejected") || streq(state, "orphaned");
}

static bool task_exited(const char *state) {
        return streq(state, "complete") || streq(state, "shutdown") || streq(state, "remove");
}

bool swarm_task_ended(const char *state) {
        return task_failed(state) || task_exited(state);
}

/* Swarm's task states (docker service ps): on the way, running, or ended. */
static SwarmCondition task_condition(json_t *task, json_t *node) {
        const char *state = json_string_value(json_object_get(json_object_get(task, "Status"), "State")) ?: "";
        const char *node_state = json_string_value(json_object_get(json_object_get(node, "Status"), "State"));

        if (streq(state, "running"))
                /* A node that stopped answering its heartbeats is down: what ran there is lost
                 * (the task is never restarted), though the manager still lists it as running. */
                return node && node_state && !streq(node_state, "ready") ? SWARM_FAILED : SWARM_RUNNING;
        if (task_exited(state))
                return SWARM_EXITED;
        if (task_failed(state))
                return SWARM_FAILED;
        /* new, pending, assigned, accepted, preparing, ready, starting: on its way, unless its
         * node went meanwhile */
        return node && node_state && streq(node_state, "down") ? SWARM_FAILED : SWARM_STARTING;
}

/* The task's host-mode port on its node's address. */
static void runtime_url(json_t *task, json_t *node, char url[static 96]) {
        const char *addr = json_string_value(json_object_get(json_object_get(node, "Status"), "Addr"));
        size_t i;
        json_t *p;

        url[0] = 0;
        json_array_foreach(json_object_get(json_object_get(json_object_get(task, "Status"), "PortStatus"), "Ports"), i, p)
                if (json_integer_value(json_object_get(p, "TargetPort")) == SWARM_RUNTIME_PORT && addr &&
                    json_integer_value(json_object_get(p, "PublishedPort")) > 0)
                        snprintf(url, 96, "http://%s:%lld", addr,
                                 (long long) json_integer_value(json_object_get(p, "PublishedPort")));
}

static void finish(SwarmLook *l) {
        json_t *services = l->answers[ASK_SERVICES], *tasks = l->answers[ASK_TASKS], *nodes = l->answers[ASK_NODES];
        SwarmSandbox *sandboxes = NULL;
        size_t n = 0, i;
        json_t *s;

        if (l->error == 0 && (!json_is_array(services) || !json_is_array(tasks) || !json_is_array(nodes))) {
                l->error = -EPROTO;
                snprintf(l->message, sizeof(l->message), "the manager's answers were not lists");
        }
        if (l->error == 0 && json_array_size(services) > 0 &&
            !(sandboxes = calloc(json_array_size(services), sizeof(*sandboxes)))) {
                l->error = -ENOMEM;
                snprintf(l->message, sizeof(l->message), "out of memory");
        }
        if (l->error == 0)
                json_array_foreach(services, i, s) {
                        json_t *labels = json_object_get(json_object_get(s, "Spec"), "Labels");
                        const char *id = json_string_value(json_object_get(labels, "org.agentix.sandbox"));
                        const char *sid = json_string_value(json_object_get(s, "ID"));
                        SwarmSandbox *sb = &sandboxes[n];

                        if (!id || !sid)
                                continue;
                        *sb = (SwarmSandbox) { .id = id, .service = s };
                        /* The newest task: one replica that is never restarted has one, but a
                         * service updated by hand may have more. */
                        sb->task = swarm_newest_task(tasks, sid);
                        sb->node = node_by_id(nodes, json_string_value(json_object_get(sb->task, "NodeID")));
                        sb->condition = sb->task ? task_condition(sb->task, sb->node) : SWARM_STARTING;
                        if (sb->condition == SWARM_RUNNING)
                                runtime_url(sb->task, sb->node, sb->runtime_url);
                        n++;
                }
        l->done(l->backend, l->error, l->error ? l->message : NULL, sandboxes, n, l->userdata);
        free(sandboxes);
        swarm_look_cancel(l);
}

static void on_answer(DockerClient *d, int status, json_t *body, const char *error, void *userdata, unsigned which) {
        SwarmLook *l = userdata;

        l->requests[which] = NULL;
        if (status == 200)
                l->answers[which] = json_incref(body);
        else if (l->error == 0) {
                char buf[128];
                l->error = status < 0 ? status : -EIO;
                snprintf(l->message, sizeof(l->message), "%s", docker_error_message(status, body, error, buf, sizeof(buf)));
        }
        if (--l->pending == 0)
                finish(l);
}

static void on_services(DockerClient *d, int status, json_t *body, const char *error, void *userdata) {
        on_answer(d, status, body, error, userdata, ASK_SERVICES);
}
static void on_tasks(DockerClient *d, int status, json_t *body, const char *error, void *userdata) {
        on_answer(d, status, body, error, userdata, ASK_TASKS);
}
static void on_nodes(DockerClient *d, int status, json_t *body, const char *error, void *userdata) {
        on_answer(d, status, body, error, userdata, ASK_NODES);
}

int swarm_look(SwarmBackend *b, swarm_look_t done, void *userdata, SwarmLook **ret) {
        static const docker_reply_t replies[_ASK_MAX] = { on_services, on_tasks, on_nodes };
        /* {"label":["org.agentix.sandbox"]}; tasks are matched to services by ID here, since
         * a task's labels are not its service's */
        static const char *const paths[_ASK_MAX] = {
                "/services?filters=%7B%22label%22%3A%5B%22org.agentix.sandbox%22%5D%7D",
                "/tasks",
                "/nodes",
        };
        SwarmLook *l = calloc(1, sizeof(*l));

        if (!l)
                return -ENOMEM;
        *l = (SwarmLook) { .backend = b, .done = done, .userdata = userdata };
        for (size_t i = 0; i < _ASK_MAX; i++) {
                int r = docker_request(b->manager, "GET", paths[i], NULL, 0, replies[i], l, &l->requests[i]);
                if (r < 0) {
                        swarm_look_cancel(l);
                        return r;
                }
                l->pending++;
        }
        if (ret)
                *ret = l;
        return 0;
}

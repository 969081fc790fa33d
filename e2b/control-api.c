/* SPDX-License-Identifier: MIT */
/* E2B's control API (control-api.h): routing, and the short requests (get, kill, timeout,
 * pause, resume, connect, metrics). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "control-api.h"
#include "control-body.h"
#include "control-create.h"
#include "control-list.h"
#include "control-op.h"
#include "log.h"
#include "macro.h"

#define BODY_MAX (1024u * 1024u)           /* a request's JSON: E2B's are a few hundred bytes */

struct ControlApi {
        HttpServer *http;
        UserBuses *buses;
        ApiKeys *const *keys;
        OpList ops;
};

/* ---- get, kill, timeout, pause, resume, connect ------------------------------------------------- */

static void answer_info(Op *op, sd_bus_message *reply) {
        op_answer(op, 200, sandbox_info_json(&op->info));
}

static void answer_done(Op *op, sd_bus_message *reply) {
        op_answer(op, 204, NULL);
}

static void set_ttl_then(Op *op, OpStep then) {
        /* E2B's timeout 0 is "now"; agentd's shortest TTL is a second. */
        op_call(op, op->path, SANDBOX_IFACE, "SetTTL", then, "t", MAX(op->timeout_sec, (uint64_t) 1));
}

static void timeout_set(Op *op, sd_bus_message *reply) {
        set_ttl_then(op, answer_done);
}

/* E2B's pause keeps memory and processes and frees the host's RAM: agentd's Hibernate() where
 * the sandbox runs on gVisor; elsewhere Pause() (frozen in RAM: the same to the sandbox). */
static void pause_checked(Op *op, sd_bus_message *reply) {
        if (streq_ptr(sandbox_info_e2b_state(&op->info), "paused")) {
                op_fail(op, 409, "sandbox %s is paused already", op->id);
                return;
        }
        op_call(op, op->path, SANDBOX_IFACE, streq_ptr(op->info.runtime, "runsc") ? "Hibernate" : "Pause", answer_done,
                NULL);
}

/* Resumed (connect, resume): its timeout from now when one was given, then the access answer. */
static void resumed(Op *op, sd_bus_message *reply) {
        op->resumed = true;
        if (op->timeout_sec > 0) {
                set_ttl_then(op, op_answer_access);
                return;
        }
        op_answer_access(op, NULL);
}

static void resume_checked(Op *op, sd_bus_message *reply) {
        if (!streq_ptr(sandbox_info_e2b_state(&op->info), "paused")) {
                op_fail(op, 409, "sandbox %s is not paused", op->id);
                return;
        }
        op_call(op, op->path, SANDBOX_IFACE, "Resume", resumed, NULL);
}

static void connect_checked(Op *op, sd_bus_message *reply) {
        if (streq_ptr(sandbox_info_e2b_state(&op->info), "paused")) {
                op_call(op, op->path, SANDBOX_IFACE, "Resume", resumed, NULL);
                return;
        }
        if (!sandbox_info_e2b_state(&op->info)) {
                op_fail(op, 404, "sandbox %s is %s", op->id, op->info.state);
                return;
        }
        if (op->timeout_sec > 0) {
                set_ttl_then(op, op_answer_access);
                return;
        }
        op_answer_access(op, NULL);
}

/* ---- metrics ------------------------------------------------------------------------------------- */

static void got_stats(Op *op, sd_bus_message *reply) {
        json_t *j = sandbox_metrics_json(&op->info, reply);

        if (!j) {
                op_fail(op, 500, "agentd's usage of sandbox %s could not be read", op->id);
                return;
        }
        op_answer(op, 200, j);
}

static void metrics_read(Op *op, sd_bus_message *reply) {
        if (streq(op->info.state, "hibernated")) {
                op_answer(op, 200, json_array()); /* nothing runs: no readings */
                return;
        }
        if (!sandbox_info_e2b_state(&op->info)) {
                op_fail(op, 409, "sandbox %s is %s: it uses nothing", op->id, op->info.state);
                return;
        }
        op_call(op, op->path, SANDBOX_IFACE, "GetStats", got_stats, NULL);
}

/* ---- requests ------------------------------------------------------------------------------------ */

static void start(Op *op) {
        switch (op->kind) {
        case OP_CREATE:
                control_create_start(op);
                return;
        case OP_GET:
                op_read_sandbox(op, answer_info);
                return;
        case OP_KILL:
                op_call(op, MANAGER_PATH, MANAGER_IFACE, "DeleteSandbox", answer_done, "s", op->id);
                return;
        case OP_TIMEOUT:
                if (op->timeout_sec == 0 && !json_is_integer(json_object_get(op->body, "timeout"))) {
                        op_fail(op, 400, "timeout (seconds) is required");
                        return;
                }
                op_read_sandbox(op, timeout_set);
                return;
        case OP_PAUSE:
                op_read_sandbox(op, pause_checked);
                return;
        case OP_RESUME:
                op_read_sandbox(op, resume_checked);
                return;
        case OP_CONNECT:
                op_read_sandbox(op, connect_checked);
                return;
        case OP_METRICS:
                op_read_sandbox(op, metrics_read);
                return;
        case OP_LIST:
                control_list_start(op);
                return;
        }
}

static void on_request(HttpConn *c, void *userdata) {
        _cleanup_free_ char *problem = NULL;
        Op *op = userdata;
        int r = 0;

        if (c->body_oversized) {
                op_fail(op, 413, "the request body is larger than 1 MiB");
                return;
        }
        if (c->body.len > 0)
                r = control_body_parse(buffer_data(&c->body), c->body.len, &op->body, &problem);
        if (r >= 0)
                r = control_body_timeout(op->body, &op->timeout_sec, &problem);
        if (r < 0) {
                op_fail(op, problem ? 400 : 500, "%s", problem ?: "out of memory");
                return;
        }
        start(op);
}

static void on_closed(HttpConn *c, void *userdata) {
        Op *op = userdata;

        op->c = NULL;
        if (op->kind == OP_CREATE && control_create_client_left(op))
                return;
        op_free(op);
}

static const HttpHandler handler = {
        .request = on_request,
        .closed = on_closed,
};

/* The key a request names (X-API-KEY), or NULL after answering 401 (and logging it). */
static const ApiKey *request_key(HttpConn *c, ApiKeys *const *keys) {
        char key[API_KEY_MAX_LEN + 1];
        const ApiKey *k;
        int n = http_conn_header(c, "X-API-KEY", key, sizeof(key));

        k = n > 0 ? api_keys_find(*keys, key, (size_t) n) : NULL;
        if (!k) {
                log_notice("E2B API: %s refused: %s.", c->path, n > 0 ? "an API key not in the keys file" :
                                                                 "no API key (X-API-KEY)");
                respond_error(c, 401, "Invalid API key");
        }
        return k;
}

/* A sandbox id as agentd makes them (letters and digits); anything else names no sandbox. */
static bool id_ok(const char *s, size_t n) {
        return n > 0 && n < 64 && strspn(s, "abcdefghijklmnopqrstuvwxyz0123456789") >= n;
}

/* /sandboxes[/ID[/ACTION]] with the method: which Op, or -1. */
static int route_kind(HttpMethod method, const char *rest, char *ret_id, size_t id_size) {
        const char *slash;
        size_t n;

        if (*rest == 0)
                return method == HTTP_METHOD_POST ? OP_CREATE : method == HTTP_METHOD_GET ? OP_LIST : -1;
        if (*rest != '/')
                return -1;
        rest++;
        slash = strchr(rest, '/');
        n = slash ? (size_t) (slash - rest) : strlen(rest);
        if (!id_ok(rest, n) || n >= id_size)
                return -2;
        memcpy(ret_id, rest, n);
        ret_id[n] = 0;
        if (!slash)
                return method == HTTP_METHOD_GET ? OP_GET : method == HTTP_METHOD_DELETE ? OP_KILL : -1;
        if (method == HTTP_METHOD_GET && streq(slash, "/metrics"))
                return OP_METRICS;
        if (method != HTTP_METHOD_POST)
                return -1;
        if (streq(slash, "/timeout"))
                return OP_TIMEOUT;
        if (streq(slash, "/connect"))
                return OP_CONNECT;
        if (streq(slash, "/pause"))
                return OP_PAUSE;
        if (streq(slash, "/resume"))
                return OP_RESUME;
        return -1;
}

static void route(HttpConn *c, const char *path, void *userdata) {
        ControlApi *api = userdata;
        const char *rest = startswith(path, "/v2") ?: path;
        char id[64] = "";
        const ApiKey *key;
        Op *op;
        int kind, r;

        rest = startswith(rest, "/sandboxes");
        if (!rest) {
                respond_error(c, 404, "not found");
                return;
        }
        kind = route_kind(c->method, rest, id, sizeof(id));
        if (kind == -2) {
                respond_error(c, 404, "sandbox not found");
                return;
        }
        if (kind < 0) {
                respond_error(c, 404, "not served by agentix-e2b");
                return;
        }
        key = request_key(c, api->keys);
        if (!key)
                return;
        op = op_new(&api->ops, c, kind, id[0] ? id : NULL);
        if (!op) {
                respond_error(c, 500, "out of memory");
                return;
        }
        r = user_buses_get(api->buses, key, &op->bus);
        if (r < 0) {
                op_fail(op, 503, "cannot reach agentd on the bus as user %s: %s", key->user, strerror(-r));
                return;
        }
        sd_bus_ref(op->bus);
        http_conn_set_handler(c, &handler, op, BODY_MAX);
}

int control_api_new(HttpServer *http, UserBuses *buses, ApiKeys *const *keys, ControlApi **ret) {
        ControlApi *api = calloc(1, sizeof(ControlApi));
        int r;

        if (!api)
                return -ENOMEM;
        *api = (ControlApi) { .http = http, .buses = buses, .keys = keys };
        r = http_server_add_route(http, "/sandboxes", route, api);
        if (r >= 0)
                r = http_server_add_route(http, "/v2/sandboxes", route, api);
        if (r < 0) {
                free(api);
                return r;
        }
        *ret = api;
        return 0;
}

ControlApi *control_api_free(ControlApi *api) {
        if (!api)
                return NULL;
        while (api->ops.first)
                op_free(api->ops.first);
        free(api);
        return NULL;
}

/* SPDX-License-Identifier: MIT */
/* E2B's control API (control-api.h). Each request becomes an Op: a short chain of agentd calls
 * over the key's user's bus connection, each step run with the reply of the one before, and one
 * answer at the end. A client that leaves mid-way ends its Op (the call under way is dropped),
 * except a create: that one waits for agentd's answer and deletes the sandbox nobody will get. */
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "control-api.h"
#include "control-body.h"
#include "log.h"
#include "macro.h"
#include "proxy-token.h"
#include "sandbox-info.h"
#include "strv.h"

#define AGENTD_ERROR(name) "org.agentix.Agentd1." name

#define BODY_MAX (1024u * 1024u)           /* a request's JSON: E2B's are a few hundred bytes */
#define CREATE_TIMEOUT_USEC (150ULL * 1000 * 1000) /* a cold create pulls nothing, but may wait */
#define CALL_TIMEOUT_USEC (60ULL * 1000 * 1000)
#define LIST_LIMIT_MAX 100
#define LIST_MAX 10000                     /* sandboxes one list looks at (agentd's own bound is lower) */

typedef enum OpKind {
        OP_CREATE,
        OP_GET,
        OP_LIST,
        OP_KILL,
        OP_TIMEOUT,
        OP_CONNECT,
        OP_PAUSE,
        OP_RESUME,
        OP_METRICS,
} OpKind;

typedef struct Op Op;
typedef void (*OpStep)(Op *op, sd_bus_message *reply);

struct ControlApi {
        HttpServer *http;
        UserBuses *buses;
        ApiKeys *const *keys;
        Op *ops;
};

struct Op {
        ControlApi *api;
        Op *prev, *next;
        HttpConn *c;            /* NULL once the client left */
        OpKind kind;
        sd_bus *bus;            /* the key's user's connection */
        sd_bus_slot *slot;      /* the call under way */
        OpStep step;            /* runs with its reply */
        OpStep then;            /* read_sandbox(): runs once op->info is read */
        char *id;
        char *path;
        json_t *body;
        uint64_t timeout_sec;   /* the request's "timeout" (0: none given) */
        bool resumed;
        SandboxInfo info;
        /* list */
        char **ids, **paths;
        size_t n, n_paths, next_one;
        json_t *seen;           /* [[created_at, id, sandbox json]] that passed the filters */
        char **states;          /* the state filter (NULL: running and paused) */
        json_t *metadata;       /* the metadata filter: every key with that value */
        unsigned limit;
        char *after;            /* nextToken: "CREATED-ID" of the last one of the page before */
};

static Op *op_free(Op *op) {
        if (!op)
                return NULL;
        if (op->c)
                http_conn_detach_handler(op->c);
        if (op->prev)
                op->prev->next = op->next;
        else if (op->api->ops == op)
                op->api->ops = op->next;
        if (op->next)
                op->next->prev = op->prev;
        sd_bus_slot_unref(op->slot);
        sd_bus_unref(op->bus);
        free(op->id);
        free(op->path);
        json_decref(op->body);
        sandbox_info_done(&op->info);
        strv_free(op->ids);
        strv_free(op->paths);
        json_decref(op->seen);
        strv_free(op->states);
        json_decref(op->metadata);
        free(op->after);
        free(op);
        return NULL;
}

static void respond_error(HttpConn *c, unsigned status, const char *message) {
        (void) http_conn_respond_json(c, status, json_pack("{s:i, s:s}", "code", (int) status, "message", message));
}

/* Answer and end the Op. */
static void op_answer(Op *op, unsigned status, json_t *body) {
        if (op->c) {
                if (body)
                        (void) http_conn_respond_json(op->c, status, body);
                else
                        (void) http_conn_respond(op->c, status, NULL, NULL);
        } else
                json_decref(body);
        op_free(op);
}

static void op_fail(Op *op, unsigned status, const char *fmt, ...) _printf_(3, 4);
static void op_fail(Op *op, unsigned status, const char *fmt, ...) {
        _cleanup_free_ char *message = NULL;
        va_list ap;

        va_start(ap, fmt);
        if (vasprintf(&message, fmt, ap) < 0)
                message = NULL;
        va_end(ap);
        log_full_errno(status >= 500 ? LOG_WARNING : LOG_NOTICE, 0, "E2B API: %u %s", status,
                       message ?: "out of memory");
        if (op->c)
                respond_error(op->c, status, message ?: "out of memory");
        op_free(op);
}

/* agentd's errors as E2B's: a sandbox of another user is as absent as one that never was. */
static void op_fail_bus(Op *op, const sd_bus_error *e) {
        const char *message = e->message ?: e->name;

        if (sd_bus_error_has_names(e, AGENTD_ERROR("NoSuchSandbox"), AGENTD_ERROR("NotOwner")))
                op_fail(op, 404, "sandbox %s not found", op->id ?: "");
        else if (sd_bus_error_has_name(e, AGENTD_ERROR("InvalidConfig")) && op->kind == OP_CREATE &&
                 strstr(message, "config key 'pool'"))
                op_fail(op, 404, "template '%s' not found (a template is a pool: pools.d/NAME.pool beside agentd.conf)",
                        json_string_value(json_object_get(op->body, "templateID")) ?: "");
        else if (sd_bus_error_has_name(e, AGENTD_ERROR("InvalidConfig")))
                op_fail(op, 400, "%s", message);
        else if (sd_bus_error_has_names(e, AGENTD_ERROR("TooManySandboxes"), AGENTD_ERROR("QuotaExceeded")))
                op_fail(op, 429, "%s", message);
        else if (sd_bus_error_has_names(e, SD_BUS_ERROR_SERVICE_UNKNOWN, SD_BUS_ERROR_NAME_HAS_NO_OWNER,
                                        AGENTD_ERROR("BackendUnavailable")))
                op_fail(op, 503, "agentd cannot serve this now: %s", message);
        else if (sd_bus_error_has_names(e, SD_BUS_ERROR_ACCESS_DENIED))
                op_fail(op, 403, "the bus does not let this key's user call agentd (the agentix group): %s", message);
        else
                op_fail(op, 500, "%s", message);
}

static int on_reply(sd_bus_message *reply, void *userdata, sd_bus_error *ret_error) {
        Op *op = userdata;
        const sd_bus_error *e = sd_bus_message_get_error(reply);

        op->slot = sd_bus_slot_unref(op->slot);
        /* A listed sandbox may go before it is read: it is simply not listed. */
        if (e && op->kind == OP_LIST && sd_bus_error_has_name(e, AGENTD_ERROR("NoSuchSandbox"))) {
                op->step(op, NULL);
                return 0;
        }
        if (e) {
                op_fail_bus(op, e);
                return 0;
        }
        op->step(op, reply);
        return 0;
}

/* Call agentd; step runs with the reply (errors end the Op). m is taken. */
static void op_send(Op *op, sd_bus_message *m, uint64_t timeout_usec, OpStep step) {
        int r;

        op->step = step;
        r = sd_bus_call_async(op->bus, &op->slot, m, on_reply, op, timeout_usec);
        sd_bus_message_unref(m);
        if (r < 0)
                op_fail(op, 503, "cannot call agentd: %s", strerror(-r));
}

static void op_call(Op *op, const char *path, const char *iface, const char *member, OpStep step, const char *types,
                    ...) {
        sd_bus_message *m = NULL;
        va_list ap;
        int r;

        r = sd_bus_message_new_method_call(op->bus, &m, AGENTD_NAME, path, iface, member);
        if (r >= 0 && types) {
                va_start(ap, types);
                r = sd_bus_message_appendv(m, types, ap);
                va_end(ap);
        }
        if (r < 0) {
                sd_bus_message_unref(m);
                op_fail(op, 500, "cannot make the call to agentd: %s", strerror(-r));
                return;
        }
        op_send(op, m, CALL_TIMEOUT_USEC, step);
}

/* ---- reading a sandbox --------------------------------------------------------------------- */

static void got_properties(Op *op, sd_bus_message *reply) {
        int r = sandbox_info_read(reply, op->id, &op->info);

        if (r < 0) {
                op_fail(op, 500, "agentd's properties of sandbox %s could not be read: %s", op->id, strerror(-r));
                return;
        }
        op->then(op, NULL);
}

static void got_path(Op *op, sd_bus_message *reply) {
        const char *path;

        if (sd_bus_message_read(reply, "o", &path) < 0 || !(op->path = strdup(path))) {
                op_fail(op, 500, "agentd's answer to GetSandbox was not an object path");
                return;
        }
        op_call(op, op->path, "org.freedesktop.DBus.Properties", "GetAll", got_properties, "s", SANDBOX_IFACE);
}

/* GetSandbox(id) (agentd answers only for the caller's own: 404 otherwise), its properties in
 * op->info, then `then` (called with no reply). */
static void read_sandbox(Op *op, OpStep then) {
        op->then = then;
        op_call(op, MANAGER_PATH, MANAGER_IFACE, "GetSandbox", got_path, "s", op->id);
}

/* ---- what E2B gets back when it may talk to the sandbox (create, connect, resume) ------------ */

/* trafficAccessToken: E2B answers it only for a sandbox whose ports are not public, but here the
 * code interpreter's port always wants a token, and the SDK's context calls carry that one only:
 * it is answered for every sandbox. */
static void got_access(Op *op, sd_bus_message *reply) {
        const char *url, *token, *template_id;
        char access[65], traffic[65];

        if (sd_bus_message_read(reply, "ss", &url, &token) < 0 || e2b_access_token(token, access) < 0 ||
            e2b_traffic_token(token, traffic) < 0) {
                op_fail(op, 500, "agentd's runtime access for sandbox %s could not be read", op->id);
                return;
        }
        template_id = op->info.template_id ?: json_string_value(json_object_get(op->body, "templateID")) ?: "";
        op_answer(op, op->kind == OP_CONNECT && !op->resumed ? 200 : 201,
                  json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:n}", "sandboxID", op->id, "templateID",
                            template_id, "alias", template_id, "clientID", "agentix", "envdVersion", E2B_ENVD_VERSION,
                            "envdAccessToken", access, "trafficAccessToken", traffic, "domain"));
}

static void answer_access(Op *op, sd_bus_message *reply) {
        op_call(op, MANAGER_PATH, MANAGER_IFACE, "GetRuntimeAccess", got_access, "s", op->id);
}

/* ---- create ------------------------------------------------------------------------------------ */

static void on_orphan_deleted(Op *op, sd_bus_message *reply) {
        log_info("E2B API: sandbox %s deleted: its creator left before it was made.", op->id);
        op_free(op);
}

static void created(Op *op, sd_bus_message *reply) {
        const char *path, *id;

        if (sd_bus_message_read(reply, "os", &path, &id) < 0 || !(op->id = strdup(id))) {
                op_fail(op, 500, "agentd's answer to CreateSandbox could not be read");
                return;
        }
        if (!op->c) {
                /* Nobody will ever know its id: it goes now rather than at its timeout. */
                op_call(op, MANAGER_PATH, MANAGER_IFACE, "DeleteSandbox", on_orphan_deleted, "s", op->id);
                return;
        }
        answer_access(op, NULL);
}

/* A JSON object of strings (metadata, envVars) as a{ss}, with the pairs of `extra` (key, value,
 * …, NULL) added. */
static int append_string_map(sd_bus_message *m, json_t *o, const char *const *extra) {
        const char *k;
        json_t *v;
        int r;

        r = sd_bus_message_open_container(m, 'a', "{ss}");
        json_object_foreach(o, k, v)
                if (r >= 0)
                        r = sd_bus_message_append(m, "{ss}", k, json_string_value(v));
        for (; r >= 0 && extra && extra[0]; extra += 2)
                r = sd_bus_message_append(m, "{ss}", extra[0], extra[1]);
        return r < 0 ? r : sd_bus_message_close_container(m);
}

static void create(Op *op) {
        const char *labels[] = { E2B_TEMPLATE_LABEL, NULL, E2B_PUBLIC_LABEL, NULL, NULL };
        _cleanup_free_ char *problem = NULL;
        sd_bus_message *m = NULL;
        ControlCreate c;
        int r;

        r = control_body_create(op->body, &c, &problem);
        if (r < 0) {
                op_fail(op, problem ? 400 : 500, "%s", problem ?: "out of memory");
                return;
        }
        labels[1] = c.template_id;
        labels[3] = c.public_traffic ? "yes" : "no";

        r = sd_bus_message_new_method_call(op->bus, &m, AGENTD_NAME, MANAGER_PATH, MANAGER_IFACE, "CreateSandbox");
        if (r >= 0)
                r = sd_bus_message_open_container(m, 'a', "{sv}");
        if (r >= 0)
                r = sd_bus_message_append(m, "{sv}", "pool", "s", c.template_id);
        if (r >= 0)
                r = sd_bus_message_append(m, "{sv}", "ttl", "t", op->timeout_sec ?: (uint64_t) E2B_DEFAULT_TIMEOUT_SEC);
        if (r >= 0)
                r = sd_bus_message_open_container(m, 'e', "sv");
        if (r >= 0)
                r = sd_bus_message_append(m, "s", "labels");
        if (r >= 0)
                r = sd_bus_message_open_container(m, 'v', "a{ss}");
        if (r >= 0)
                r = append_string_map(m, c.metadata, labels);
        if (r >= 0)
                r = sd_bus_message_close_container(m);
        if (r >= 0)
                r = sd_bus_message_close_container(m);
        if (r >= 0 && json_object_size(c.env) > 0) {
                r = sd_bus_message_open_container(m, 'e', "sv");
                if (r >= 0)
                        r = sd_bus_message_append(m, "s", "env");
                if (r >= 0)
                        r = sd_bus_message_open_container(m, 'v', "a{ss}");
                if (r >= 0)
                        r = append_string_map(m, c.env, NULL);
                if (r >= 0)
                        r = sd_bus_message_close_container(m);
                if (r >= 0)
                        r = sd_bus_message_close_container(m);
        }
        if (r >= 0)
                r = sd_bus_message_close_container(m);
        if (r < 0) {
                sd_bus_message_unref(m);
                op_fail(op, 500, "cannot make the call to agentd: %s", strerror(-r));
                return;
        }
        op_send(op, m, CREATE_TIMEOUT_USEC, created);
}

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

static void pause_checked(Op *op, sd_bus_message *reply) {
        if (streq(op->info.state, "paused")) {
                op_fail(op, 409, "sandbox %s is paused already", op->id);
                return;
        }
        op_call(op, op->path, SANDBOX_IFACE, "Pause", answer_done, NULL);
}

/* Resumed (connect, resume): its timeout from now when one was given, then the access answer. */
static void resumed(Op *op, sd_bus_message *reply) {
        op->resumed = true;
        if (op->timeout_sec > 0) {
                set_ttl_then(op, answer_access);
                return;
        }
        answer_access(op, NULL);
}

static void resume_checked(Op *op, sd_bus_message *reply) {
        if (!streq(op->info.state, "paused")) {
                op_fail(op, 409, "sandbox %s is not paused", op->id);
                return;
        }
        op_call(op, op->path, SANDBOX_IFACE, "Resume", resumed, NULL);
}

static void connect_checked(Op *op, sd_bus_message *reply) {
        if (streq(op->info.state, "paused")) {
                op_call(op, op->path, SANDBOX_IFACE, "Resume", resumed, NULL);
                return;
        }
        if (!sandbox_info_e2b_state(&op->info)) {
                op_fail(op, 404, "sandbox %s is %s", op->id, op->info.state);
                return;
        }
        if (op->timeout_sec > 0) {
                set_ttl_then(op, answer_access);
                return;
        }
        answer_access(op, NULL);
}

/* ---- list --------------------------------------------------------------------------------------- */

static void list_next(Op *op);

static bool passes_filters(Op *op) {
        const char *state = sandbox_info_e2b_state(&op->info), *k;
        json_t *v;

        if (!state || (op->states && !strv_contains(op->states, state)))
                return false;
        json_object_foreach(op->metadata, k, v)
                if (!json_equal(json_object_get(op->info.metadata, k), v))
                        return false;
        return true;
}

static void list_got_one(Op *op, sd_bus_message *reply) {
        if (op->info.id && passes_filters(op)) {
                json_t *j = sandbox_info_json(&op->info);

                if (!j || json_array_append_new(op->seen, json_pack("[I, s, o]", (json_int_t) op->info.created_at,
                                                                     op->info.id, j)) < 0) {
                        op_fail(op, 500, "out of memory");
                        return;
                }
        }
        sandbox_info_done(&op->info);
        list_next(op);
}

static void list_got_properties(Op *op, sd_bus_message *reply) {
        if (reply) {
                int r = sandbox_info_read(reply, op->ids[op->next_one - 1], &op->info);
                if (r < 0) {
                        op_fail(op, 500, "agentd's properties of a sandbox could not be read: %s", strerror(-r));
                        return;
                }
        }
        list_got_one(op, NULL);
}

/* "CREATED-ID" orders as the list does: by creation, then id. */
static int order(json_int_t created_a, const char *id_a, json_int_t created_b, const char *id_b) {
        if (created_a != created_b)
                return created_a < created_b ? -1 : 1;
        return strcmp(id_a, id_b);
}

static int compare_seen(const void *a, const void *b) {
        json_t *x = *(json_t *const *) a, *y = *(json_t *const *) b;
        return order(json_integer_value(json_array_get(x, 0)), json_string_value(json_array_get(x, 1)),
                     json_integer_value(json_array_get(y, 0)), json_string_value(json_array_get(y, 1)));
}

static void list_answer(Op *op) {
        size_t n = json_array_size(op->seen), start = 0, count;
        _cleanup_free_ json_t **sorted = calloc(n + 1, sizeof(json_t *));
        json_t *out = json_array();
        json_int_t after_created = 0;
        const char *after_id = NULL;

        if (!sorted || !out) {
                json_decref(out);
                op_fail(op, 500, "out of memory");
                return;
        }
        for (size_t i = 0; i < n; i++)
                sorted[i] = json_array_get(op->seen, i);
        qsort(sorted, n, sizeof(json_t *), compare_seen);
        if (op->after) {
                char *dash = strchr(op->after, '-');
                after_created = strtoll(op->after, NULL, 10);
                after_id = dash ? dash + 1 : "";
                while (start < n && order(json_integer_value(json_array_get(sorted[start], 0)),
                                          json_string_value(json_array_get(sorted[start], 1)), after_created,
                                          after_id) <= 0)
                        start++;
        }
        count = MIN(n - start, (size_t) op->limit);
        for (size_t i = start; i < start + count; i++)
                (void) json_array_append(out, json_array_get(sorted[i], 2));
        if (start + count < n && op->c) {
                json_t *last = sorted[start + count - 1];
                _cleanup_free_ char *token = NULL;

                if (asprintf(&token, "%" JSON_INTEGER_FORMAT "-%s", json_integer_value(json_array_get(last, 0)),
                             json_string_value(json_array_get(last, 1))) >= 0)
                        (void) http_conn_add_header(op->c, "x-next-token", token);
        }
        op_answer(op, 200, out);
}

static void list_next(Op *op) {
        if (op->next_one >= op->n) {
                list_answer(op);
                return;
        }
        op->next_one++;
        op_call(op, op->paths[op->next_one - 1], "org.freedesktop.DBus.Properties", "GetAll", list_got_properties, "s",
                SANDBOX_IFACE);
}

static void listed(Op *op, sd_bus_message *reply) {
        const char *id, *image, *state, *path;
        int r;

        r = sd_bus_message_enter_container(reply, 'a', "(ssso)");
        while (r >= 0 && (r = sd_bus_message_read(reply, "(ssso)", &id, &image, &state, &path)) > 0) {
                if (op->n >= LIST_MAX)
                        break;
                /* Only what E2B could list is read further. */
                if (!streq(state, "running") && !streq(state, "paused"))
                        continue;
                if (strv_consume_n(&op->ids, &op->n, strdup(id)) < 0 || strv_consume_n(&op->paths, &op->n_paths, strdup(path)) < 0) {
                        op_fail(op, 500, "out of memory");
                        return;
                }
        }
        if (r < 0) {
                op_fail(op, 500, "agentd's list could not be read: %s", strerror(-r));
                return;
        }
        list_next(op);
}

/* The query: limit, nextToken, state (repeated or comma-separated), metadata ("k=v&k2=v2",
 * each part URL-encoded). */
static int list_read_query(Op *op, HttpConn *c) {
        char buf[2048], value[1024];
        int n;

        op->limit = LIST_LIMIT_MAX;
        n = http_conn_query_nth(c, "limit", 0, buf, sizeof(buf));
        if (n >= 0) {
                char *end;
                unsigned long l = strtoul(buf, &end, 10);
                if (n == 0 || *end || l < 1 || l > LIST_LIMIT_MAX)
                        return op_fail(op, 400, "limit is a number from 1 to 100"), -EINVAL;
                op->limit = (unsigned) l;
        }
        if (http_conn_query_nth(c, "nextToken", 0, buf, sizeof(buf)) > 0 && !(op->after = strdup(buf)))
                return -ENOMEM;
        for (unsigned i = 0; i < 16 && http_conn_query_nth(c, "state", i, buf, sizeof(buf)) >= 0; i++)
                for (char *s = strtok(buf, ","); s; s = strtok(NULL, ",")) {
                        if (!streq(s, "running") && !streq(s, "paused"))
                                return op_fail(op, 400, "state is running or paused, not '%s'", s), -EINVAL;
                        if (!strv_contains(op->states, s) && strv_extend(&op->states, s) < 0)
                                return -ENOMEM;
                }
        op->metadata = json_object();
        if (!op->metadata)
                return -ENOMEM;
        n = http_conn_query_nth(c, "metadata", 0, buf, sizeof(buf));
        if (n == -E2BIG)
                return op_fail(op, 400, "the metadata filter is too long"), -EINVAL;
        for (char *pair = n > 0 ? strtok(buf, "&") : NULL; pair; pair = strtok(NULL, "&")) {
                char *eq = strchr(pair, '='), key[512];

                if (!eq)
                        return op_fail(op, 400, "the metadata filter is key=value pairs joined by &"), -EINVAL;
                if (http_url_decode(pair, (size_t) (eq - pair), key, sizeof(key)) < 0 ||
                    http_url_decode(eq + 1, strlen(eq + 1), value, sizeof(value)) < 0)
                        return op_fail(op, 400, "the metadata filter is too long"), -EINVAL;
                if (json_object_set_new(op->metadata, key, json_string(value)) < 0)
                        return -ENOMEM;
        }
        return 0;
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
                create(op);
                return;
        case OP_GET:
                read_sandbox(op, answer_info);
                return;
        case OP_KILL:
                op_call(op, MANAGER_PATH, MANAGER_IFACE, "DeleteSandbox", answer_done, "s", op->id);
                return;
        case OP_TIMEOUT:
                if (op->timeout_sec == 0 && !json_is_integer(json_object_get(op->body, "timeout"))) {
                        op_fail(op, 400, "timeout (seconds) is required");
                        return;
                }
                read_sandbox(op, timeout_set);
                return;
        case OP_PAUSE:
                read_sandbox(op, pause_checked);
                return;
        case OP_RESUME:
                read_sandbox(op, resume_checked);
                return;
        case OP_CONNECT:
                read_sandbox(op, connect_checked);
                return;
        case OP_METRICS:
                read_sandbox(op, metrics_read);
                return;
        case OP_LIST:
                if (list_read_query(op, op->c) < 0)
                        return; /* answered (or out of memory: the connection goes) */
                op->seen = json_array();
                if (!op->seen) {
                        op_fail(op, 500, "out of memory");
                        return;
                }
                op_call(op, MANAGER_PATH, MANAGER_IFACE, "ListSandboxes", listed, NULL);
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
        if (op->kind == OP_CREATE) {
                /* A create under way finishes, to delete what it made (created()). */
                if (op->slot && op->step == created)
                        return;
                /* Made, not yet answered: nobody will ever know its id. */
                if (op->id) {
                        op->slot = sd_bus_slot_unref(op->slot);
                        op_call(op, MANAGER_PATH, MANAGER_IFACE, "DeleteSandbox", on_orphan_deleted, "s", op->id);
                        return;
                }
        }
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
        op = calloc(1, sizeof(Op));
        if (!op || (id[0] && !(op->id = strdup(id)))) {
                free(op);
                respond_error(c, 500, "out of memory");
                return;
        }
        *op = (Op) { .api = api, .c = c, .kind = kind, .id = op->id, .next = api->ops };
        if (api->ops)
                api->ops->prev = op;
        api->ops = op;
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
        while (api->ops)
                op_free(api->ops);
        free(api);
        return NULL;
}

int e2b_access_token(const char *runtime_token, char ret[static 65]) {
        return runtime_token_derive(runtime_token, "agentix-e2b:access", ret);
}

int e2b_traffic_token(const char *runtime_token, char ret[static 65]) {
        return runtime_token_derive(runtime_token, "agentix-e2b:traffic", ret);
}

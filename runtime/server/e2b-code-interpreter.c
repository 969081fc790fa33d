/* SPDX-License-Identifier: MIT */
/* E2B's code interpreter API, served on the worker's code:: module (code.c): what the
 * unmodified @e2b/code-interpreter package calls on a sandbox's port 49999, which agentix-e2b
 * forwards here.
 *
 *   POST   /execute {code, context_id?, language?, env_vars?}   200, NDJSON as the run goes
 *                                                               (e2b-code-item.h), then
 *                                                               {"type": "end_of_execution"}
 *   GET    /contexts                                            [{id, language, cwd}]
 *   POST   /contexts {language?, cwd?}                          {id, language, cwd}
 *   DELETE /contexts/ID                                         204
 *   POST   /contexts/ID/restart                                 204
 *
 * Authenticated like /rpc, with the runtime's token as "Authorization: Bearer T" or
 * "X-Access-Token: T". Errors are {"code": STATUS, "message": "TYPE: …"}: 404 for an unknown
 * context or kernel, 400 for bad input, 429 when a context has too many runs waiting, 401,
 * 405, 413, 500. A run's output is flow-controlled end to end: the worker makes more only as
 * the HTTP client reads it. A client that goes away cancels its call (the kernel gets ^C). */
#include <errno.h>
#include <jansson.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "e2b-code-interpreter.h"
#include "e2b-code-item.h"
#include "envelope.h"
#include "json-msgpack.h"
#include "log.h"
#include "macro.h"
#include "mp-check.h"

/* Largest request body taken: code, and the rest of the JSON around it. */
#define CODE_BODY_MAX (8u * 1024u * 1024u)
#define IGNORED_BODY_MAX (64u * 1024u)
#define CONTEXT_ID_MAX 64

typedef enum CodeRoute {
        ROUTE_EXECUTE,
        ROUTE_LIST,
        ROUTE_CREATE,
        ROUTE_DELETE,
        ROUTE_RESTART,
} CodeRoute;

struct CodeInterpreterApi {
        Rpc *rpc;
        char *cwd; /* the server's: a context made without one works there */
};

typedef struct CodeRequest {
        CodeInterpreterApi *api;
        HttpConn *conn;
        CodeRoute route;
        char context_id[CONTEXT_ID_MAX + 1];
        RpcCall *call;
        bool looking_up;    /* create: the context is made, code::contexts gives its language */
        char *created;      /* … its id */
        uint64_t due;       /* item bytes sent on, not yet credited to the worker */
} CodeRequest;

static void request_free(CodeRequest *q) {
        if (!q)
                return;
        free(q->created);
        free(q);
}

/* ---- answers -------------------------------------------------------------------------------- */

static void respond_error(HttpConn *c, unsigned status, const char *type, const char *message) {
        _cleanup_free_ char *full = NULL;

        if (asprintf(&full, "%s%s%s", type ?: "", type ? ": " : "", message) < 0)
                full = NULL;
        (void) http_conn_respond_json(c, status, full ? json_pack("{s:i,s:s}", "code", (int) status, "message", full) : NULL);
}

/* An error of code:: (or of the worker) as an HTTP status. */
static unsigned status_of(const char *type) {
        static const struct {
                const char *type;
                unsigned status;
        } table[] = {
                { "ContextNotFound", 404 }, { "KernelNotFound", 404 }, { "NoSuchCallable", 404 },
                { "ArgumentError", 400 },   { "ValueError", 400 },     { "BadRequest", 400 },
                { "ContextBusy", 429 },     { "TooManyContexts", 429 }, { "TooManyCalls", 429 },
                { "Cancelled", 503 },
        };

        for (size_t i = 0; type && i < ELEMENTSOF(table); i++)
                if (streq(type, table[i].type))
                        return table[i].status;
        return 500;
}

/* The request is answered (or its connection gone): no more of it. */
static void request_finish(CodeRequest *q) {
        if (q->conn)
                http_conn_detach_handler(q->conn);
        request_free(q);
}

/* ---- calls ---------------------------------------------------------------------------------- */

static const RpcLocalHandlers call_handlers;

static int start_call(CodeRequest *q, const char *callable, const char *shape, const Buffer *args, const Buffer *kwargs) {
        int r = rpc_call_local(q->api->rpc, callable, shape, args, kwargs, &call_handlers, q, &q->call);

        if (r == -EBUSY)
                respond_error(q->conn, 429, "TooManyCalls", "the runtime runs as many calls as it takes; retry later");
        else if (r < 0)
                respond_error(q->conn, 503, "WorkerDied", "the worker cannot take the call now");
        return r;
}

/* Pack a msgpack array of one string, or of none. */
static int pack_args(Buffer *b, const char *s) {
        msgpack_packer pk;

        mp_packer_init_buffer(&pk, b);
        if (msgpack_pack_array(&pk, s ? 1 : 0) < 0 || (s && mp_pack_cstr(&pk, s) < 0))
                return -ENOMEM;
        return 0;
}

static void on_item(RpcCall *call, const uint8_t *payload, size_t size, void *userdata) {
        CodeRequest *q = userdata;
        msgpack_unpacked u;
        size_t off = 0;
        json_t *line = NULL;
        struct timespec ts;
        char *text = NULL;
        int r;

        /* Counted as due whatever becomes of it: the window must not shrink for good. */
        q->due += size;
        msgpack_unpacked_init(&u);
        if (q->route != ROUTE_EXECUTE || mp_check(payload, size) < 0 ||
            msgpack_unpack_next(&u, (const char *) payload, size, &off) != MSGPACK_UNPACK_SUCCESS ||
            !mp_map_get(&u.data, "value")) {
                msgpack_unpacked_destroy(&u);
                return;
        }
        clock_gettime(CLOCK_REALTIME, &ts);
        r = e2b_code_item_to_json(mp_map_get(&u.data, "value"),
                                  (uint64_t) ts.tv_sec * 1000000u + (uint64_t) ts.tv_nsec / 1000u, &line);
        msgpack_unpacked_destroy(&u);
        if (r < 0) {
                log_debug("Dropping a code::run item E2B has no line for: %s", strerror(-r));
                return;
        }
        text = json_dumps(line, JSON_COMPACT);
        json_decref(line);
        if (!text) {
                log_oom();
                return;
        }
        if (!q->conn->streaming && !q->conn->responding)
                (void) http_conn_stream_begin(q->conn, 200, "application/x-ndjson");
        (void) http_conn_stream_write(q->conn, text, strlen(text));
        (void) http_conn_stream_write(q->conn, "\n", 1);
        free(text);
}

/* The value of a call's result envelope, or the error's type and message. */
static int envelope_value(const uint8_t *data, size_t size, msgpack_unpacked *u, const msgpack_object **ret) {
        size_t off = 0;

        if (!data || mp_check(data, size) < 0 ||
            msgpack_unpack_next(u, (const char *) data, size, &off) != MSGPACK_UNPACK_SUCCESS)
                return -EBADMSG;
        *ret = mp_map_get(&u->data, "value");
        return 0;
}

static void finish_with_error(CodeRequest *q, const uint8_t *data, size_t size) {
        _cleanup_free_ char *type = NULL, *message = NULL;

        rpc_error_of(data, size, &type, &message);
        if (q->conn->streaming) {
                /* The status is out: say it as the run's error, then end as E2B does. */
                json_t *line = json_pack("{s:s,s:s,s:s,s:s}", "type", "error", "name", type ?: "InternalError", "value",
                                         message ?: "", "traceback", "");
                char *text = line ? json_dumps(line, JSON_COMPACT) : NULL;

                json_decref(line);
                if (text) {
                        (void) http_conn_stream_write(q->conn, text, strlen(text));
                        (void) http_conn_stream_write(q->conn, "\n", 1);
                }
                free(text);
                (void) http_conn_stream_write(q->conn, "{\"type\":\"end_of_execution\"}\n", 28);
                (void) http_conn_stream_end(q->conn);
        } else
                respond_error(q->conn, status_of(type), type ?: "InternalError", message ?: "the call failed");
        request_finish(q);
}

/* One entry of code::contexts as E2B's Context: {id, language, cwd}. */
static json_t *context_json(CodeRequest *q, const msgpack_object *entry) {
        const char *id, *language, *cwd;
        size_t id_n, language_n, cwd_n;

        if (mp_map_get_str(entry, "id", &id, &id_n) < 0)
                return NULL;
        if (mp_map_get_str(entry, "language", &language, &language_n) < 0)
                language = "python", language_n = 6;
        if (mp_map_get_str(entry, "cwd", &cwd, &cwd_n) < 0)
                cwd = q->api->cwd, cwd_n = strlen(q->api->cwd);
        return json_pack("{s:s%,s:s%,s:s%}", "id", id, id_n, "language", language, language_n, "cwd", cwd, cwd_n);
}

static void answer_contexts(CodeRequest *q, const msgpack_object *list) {
        json_t *out = q->created ? NULL : json_array();

        for (uint32_t i = 0; list && list->type == MSGPACK_OBJECT_ARRAY && i < list->via.array.size; i++) {
                const msgpack_object *e = &list->via.array.ptr[i];
                const char *id;
                size_t n;

                if (e->type != MSGPACK_OBJECT_MAP || mp_map_get_str(e, "id", &id, &n) < 0)
                        continue;
                if (q->created && n == strlen(q->created) && memcmp(id, q->created, n) == 0)
                        out = context_json(q, e);
                else if (!q->created)
                        (void) json_array_append_new(out, context_json(q, e));
        }
        if (!out)
                respond_error(q->conn, 500, "InternalError", "the new context is not listed");
        else
                (void) http_conn_respond_json(q->conn, 200, out);
        request_finish(q);
}

static void on_done(RpcCall *call, const char *event, const uint8_t *data, size_t size, void *userdata) {
        _cleanup_buffer_ Buffer args = BUFFER_NULL, kwargs = BUFFER_NULL;
        CodeRequest *q = userdata;
        const msgpack_object *value = NULL;
        msgpack_unpacked u;

        q->call = NULL;
        if (streq(event, "call:error") || !data) {
                finish_with_error(q, data, size);
                return;
        }
        if (q->route == ROUTE_EXECUTE) {
                if (!q->conn->streaming)
                        (void) http_conn_stream_begin(q->conn, 200, "application/x-ndjson");
                (void) http_conn_stream_write(q->conn, "{\"type\":\"end_of_execution\"}\n", 28);
                (void) http_conn_stream_end(q->conn);
                request_finish(q);
                return;
        }
        if (q->route == ROUTE_DELETE || q->route == ROUTE_RESTART) {
                (void) http_conn_respond(q->conn, 204, NULL, NULL);
                request_finish(q);
                return;
        }

        msgpack_unpacked_init(&u);
        if (envelope_value(data, size, &u, &value) < 0 || !value) {
                msgpack_unpacked_destroy(&u);
                respond_error(q->conn, 500, "InternalError", "the worker's answer cannot be read");
                request_finish(q);
                return;
        }
        if (q->route == ROUTE_CREATE && !q->looking_up) {
                /* Made: its language and directory come from the list. */
                if (value->type != MSGPACK_OBJECT_STR || !(q->created = strndup(value->via.str.ptr, value->via.str.size))) {
                        msgpack_unpacked_destroy(&u);
                        respond_error(q->conn, 500, "InternalError", "code::create_context gave no id");
                        request_finish(q);
                        return;
                }
                msgpack_unpacked_destroy(&u);
                q->looking_up = true;
                if (pack_args(&args, NULL) < 0 || buffer_append(&kwargs, "\x80", 1) < 0) {
                        respond_error(q->conn, 500, "InternalError", "out of memory");
                        request_finish(q);
                        return;
                }
                if (start_call(q, "code::contexts", "unary", &args, &kwargs) < 0)
                        request_finish(q);
                return;
        }
        answer_contexts(q, value);
        msgpack_unpacked_destroy(&u);
}

static const RpcLocalHandlers call_handlers = {
        .item = on_item,
        .done = on_done,
};

/* ---- requests -------------------------------------------------------------------------------- */

/* Pack a JSON object's members as a msgpack map, renamed: names[i] → names[i+1] (NULL-ended),
 * each a string (or, for env, a map of strings) when present and not null. */
static int pack_kwargs(Buffer *b, json_t *body, const char *const *names, const char **ret_bad) {
        msgpack_packer pk;
        uint32_t n = 0;

        for (const char *const *k = names; *k; k += 2)
                n += json_object_get(body, k[0]) && !json_is_null(json_object_get(body, k[0]));
        mp_packer_init_buffer(&pk, b);
        if (msgpack_pack_map(&pk, n) < 0)
                return -ENOMEM;
        for (const char *const *k = names; *k; k += 2) {
                json_t *v = json_object_get(body, k[0]);

                if (!v || json_is_null(v))
                        continue;
                if (streq(k[0], "env_vars")) {
                        const char *key;
                        json_t *s;

                        if (!json_is_object(v)) {
                                *ret_bad = k[0];
                                return -EINVAL;
                        }
                        json_object_foreach(v, key, s)
                                if (!json_is_string(s)) {
                                        *ret_bad = k[0];
                                        return -EINVAL;
                                }
                } else if (!json_is_string(v)) {
                        *ret_bad = k[0];
                        return -EINVAL;
                }
                if (mp_pack_cstr(&pk, k[1]) < 0 || json_to_msgpack_plain(v, &pk) < 0)
                        return -ENOMEM;
        }
        return 0;
}

static void on_request(HttpConn *c, void *data) {
        static const char *const execute_names[] = { "context_id", "context", "language", "language",
                                                     "env_vars", "env", NULL };
        static const char *const create_names[] = { "language", "language", "cwd", "cwd", NULL };
        _cleanup_buffer_ Buffer args = BUFFER_NULL, kwargs = BUFFER_NULL;
        CodeRequest *q = data;
        const char *bad = NULL, *callable = NULL;
        json_t *body = NULL;
        json_error_t e;
        int r = 0;

        if (c->body_oversized) {
                respond_error(c, 413, "BadRequest", "the request body is larger than 8 MiB");
                request_finish(q);
                return;
        }
        if (q->route == ROUTE_EXECUTE || q->route == ROUTE_CREATE) {
                body = c->body.len > 0 ? json_loadb((const char *) buffer_data(&c->body), c->body.len, 0, &e)
                                       : json_object();
                if (!json_is_object(body)) {
                        json_decref(body);
                        respond_error(c, 400, "BadRequest", "the body must be a JSON object");
                        request_finish(q);
                        return;
                }
        }
        switch (q->route) {
        case ROUTE_EXECUTE: {
                json_t *code = json_object_get(body, "code");

                callable = "code::run";
                if (!json_is_string(code))
                        bad = "code";
                else if (json_is_string(json_object_get(body, "context_id")) &&
                         json_is_string(json_object_get(body, "language"))) {
                        json_decref(body);
                        respond_error(c, 400, "BadRequest", "give context_id or language, not both: a context has its language");
                        request_finish(q);
                        return;
                } else {
                        r = pack_args(&args, json_string_value(code));
                        if (r >= 0)
                                r = pack_kwargs(&kwargs, body, execute_names, &bad);
                }
                break;
        }
        case ROUTE_CREATE:
                callable = "code::create_context";
                r = pack_args(&args, NULL);
                if (r >= 0)
                        r = pack_kwargs(&kwargs, body, create_names, &bad);
                break;
        case ROUTE_LIST:
                callable = "code::contexts";
                r = pack_args(&args, NULL);
                break;
        case ROUTE_DELETE:
        case ROUTE_RESTART:
                callable = q->route == ROUTE_DELETE ? "code::delete_context" : "code::restart";
                r = pack_args(&args, q->context_id);
                break;
        }
        json_decref(body);
        if (bad || r == -EINVAL) {
                char message[128];

                snprintf(message, sizeof(message), "'%s' must be a string%s", strna(bad),
                         bad && streq(bad, "env_vars") ? " → string map" : "");
                respond_error(c, 400, "BadRequest", message);
                request_finish(q);
                return;
        }
        if (r >= 0 && kwargs.len == 0)
                r = buffer_append(&kwargs, "\x80", 1); /* {} */
        if (r < 0) {
                respond_error(c, 500, "InternalError", "out of memory");
                request_finish(q);
                return;
        }
        if (start_call(q, callable, q->route == ROUTE_EXECUTE ? "stream" : "unary", &args, &kwargs) < 0)
                request_finish(q);
}

static void on_drained(HttpConn *c, void *data) {
        CodeRequest *q = data;

        if (q->call && q->due > 0) {
                rpc_call_local_credit(q->call, q->due);
                q->due = 0;
        }
}

static void on_closed(HttpConn *c, void *data) {
        CodeRequest *q = data;

        q->conn = NULL;
        rpc_call_local_abandon(q->call);
        request_free(q);
}

static const HttpHandler request_handler = {
        .request = on_request,
        .drained = on_drained,
        .closed = on_closed,
};

/* Which route a method and path are: 0, or an answer already given (<0). */
static int match(HttpConn *c, const char *path, CodeRoute *ret, char id[static CONTEXT_ID_MAX + 1]) {
        const char *rest;
        size_t n;

        if (streq(path, "/execute")) {
                if (c->method != HTTP_METHOD_POST)
                        return respond_error(c, 405, NULL, "POST /execute"), -EINVAL;
                *ret = ROUTE_EXECUTE;
                return 0;
        }
        if (streq(path, "/contexts") || streq(path, "/contexts/")) {
                if (c->method != HTTP_METHOD_GET && c->method != HTTP_METHOD_POST)
                        return respond_error(c, 405, NULL, "GET or POST /contexts"), -EINVAL;
                *ret = c->method == HTTP_METHOD_GET ? ROUTE_LIST : ROUTE_CREATE;
                return 0;
        }
        if (!startswith(path, "/contexts/"))
                return respond_error(c, 404, NULL, "no such path"), -ENOENT;
        rest = path + strlen("/contexts/");
        n = strcspn(rest, "/");
        if (n == 0 || n > CONTEXT_ID_MAX)
                return respond_error(c, 404, "ContextNotFound", "no such context"), -ENOENT;
        memcpy(id, rest, n);
        id[n] = 0;
        if (rest[n] == 0) {
                if (c->method != HTTP_METHOD_DELETE)
                        return respond_error(c, 405, NULL, "DELETE /contexts/ID"), -EINVAL;
                *ret = ROUTE_DELETE;
                return 0;
        }
        if (streq(rest + n, "/restart")) {
                if (c->method != HTTP_METHOD_POST)
                        return respond_error(c, 405, NULL, "POST /contexts/ID/restart"), -EINVAL;
                *ret = ROUTE_RESTART;
                return 0;
        }
        return respond_error(c, 404, NULL, "no such path"), -ENOENT;
}

static void route(HttpConn *c, const char *path, void *userdata) {
        CodeInterpreterApi *api = userdata;
        char id[CONTEXT_ID_MAX + 1] = "";
        CodeRoute r;
        CodeRequest *q;

        if (c->method == HTTP_METHOD_OPTIONS) {
                (void) http_conn_respond(c, 204, NULL, NULL);
                return;
        }
        if (!rpc_request_token_ok(api->rpc, c->access_token, http_conn_bearer_token(c))) {
                respond_error(c, 401, NULL, "this runtime wants its token: Authorization: Bearer TOKEN or X-Access-Token");
                return;
        }
        if (match(c, path, &r, id) < 0)
                return;
        q = calloc(1, sizeof(*q));
        if (!q) {
                (void) http_conn_respond_error(c, 500, 500, "out of memory");
                return;
        }
        *q = (CodeRequest) { .api = api, .conn = c, .route = r };
        memcpy(q->context_id, id, sizeof(q->context_id));
        /* Routes that take no body still get one read (and ignored): `{}` on a restart, say. */
        http_conn_set_handler(c, &request_handler, q,
                              r == ROUTE_EXECUTE || r == ROUTE_CREATE ? CODE_BODY_MAX : IGNORED_BODY_MAX);
}

int code_interpreter_api_new(Rpc *rpc, HttpServer *http, CodeInterpreterApi **ret) {
        CodeInterpreterApi *api = calloc(1, sizeof(*api));
        int r;

        if (!api)
                return -ENOMEM;
        api->rpc = rpc;
        api->cwd = getcwd(NULL, 0);
        if (!api->cwd && !(api->cwd = strdup("/"))) {
                free(api);
                return -ENOMEM;
        }
        r = http_server_add_route(http, "/execute", route, api);
        if (r >= 0)
                r = http_server_add_route(http, "/contexts", route, api);
        if (r < 0) {
                code_interpreter_api_free(api);
                return r;
        }
        *ret = api;
        return 0;
}

CodeInterpreterApi *code_interpreter_api_free(CodeInterpreterApi *api) {
        if (!api)
                return NULL;
        free(api->cwd);
        free(api);
        return NULL;
}

/* SPDX-License-Identifier: MIT */
/* The unary calls of E2B's envd Filesystem service (Connect RPC, JSON over HTTP/1.1), on the
 * worker's fs:: module: what the unmodified `e2b` SDK's files.getInfo/exists/makeDir/rename/
 * remove send to a sandbox's port 49983, which agentix-e2b forwards here.
 *
 *   POST /filesystem.Filesystem/Stat     {path}                   {entry}
 *   POST /filesystem.Filesystem/MakeDir  {path}                   {entry}  (already_exists if there)
 *   POST /filesystem.Filesystem/Move     {source, destination}    {entry}  (of the destination)
 *   POST /filesystem.Filesystem/Remove   {path}                   {}
 *   POST /filesystem.Filesystem/ListDir  {path, depth}            {entries}  (e2b-envd-listdir.c)
 *   WatchDir, CreateWatcher, GetWatcherEvents, RemoveWatcher                  (e2b-envd-watch.c)
 *
 * An entry is envd's EntryInfo: {name, type (FILE_TYPE_FILE, _DIRECTORY, _SYMLINK), path, size
 * (int64, as a string), mode, permissions ("-rw-r--r--"), owner, group, modifiedTime (RFC 3339),
 * symlinkTarget}. Relative paths are the user's: below the home of the account that
 * "Authorization: Basic base64(USER:)" names (else the default: e2b-envd-entry.h), and every
 * fs:: call runs as that account (fs-as-user.h). Errors are Connect's:
 * the HTTP status of the code and {"code", "message"}. Authenticated like the code interpreter
 * (e2b-code-interpreter.c). */
#include <errno.h>
#include <jansson.h>
#include <string.h>

#include "e2b-envd-entry.h"
#include "e2b-envd-filesystem.h"
#include "e2b-envd-listdir.h"
#include "e2b-envd-watch.h"
#include "envelope.h"
#include "json-msgpack.h"
#include "log.h"
#include "macro.h"
#include "mp-check.h"

#define PREFIX "/filesystem.Filesystem/"
#define ENVD_BODY_MAX (1024u * 1024u)

typedef enum EnvdMethod {
        METHOD_STAT,
        METHOD_MAKE_DIR,
        METHOD_MOVE,
        METHOD_REMOVE,
} EnvdMethod;

/* Where a request is: each step is one fs:: call. */
typedef enum EnvdStep {
        STEP_CHECK_ABSENT, /* MakeDir: stat, which must say file_not_found */
        STEP_ACT,          /* mkdir, move or remove */
        STEP_DESCRIBE,     /* stat of the result, for the entry */
} EnvdStep;

struct EnvdFilesystemApi {
        Rpc *rpc;
        EnvdWatchApi *watch;
};

typedef struct EnvdRequest {
        EnvdFilesystemApi *api;
        HttpConn *conn;
        EnvdMethod method;
        EnvdStep step;
        char *path;        /* absolute: Stat, MakeDir, Remove, and Move's destination */
        char *source;      /* Move */
        EnvdUser user;     /* every call runs as them; what MakeDir makes is theirs */
        RpcCall *call;
} EnvdRequest;

static void request_free(EnvdRequest *q) {
        if (!q)
                return;
        free(q->path);
        free(q->source);
        free(q);
}

static void request_finish(EnvdRequest *q) {
        if (q->conn)
                http_conn_detach_handler(q->conn);
        request_free(q);
}

/* ---- calls ---------------------------------------------------------------------------------- */

static const RpcLocalHandlers call_handlers;

/* fs::FUNCTION with [strings…] (as_list: the strings as one list argument), run as owner
 * (fs-as-user.h; NULL: the runtime's own account): what it makes is owner's. */
static int call_fs(EnvdRequest *q, const char *function, bool as_list, const char *a, const char *b,
                   const EnvdUser *owner) {
        _cleanup_buffer_ Buffer args = BUFFER_NULL, kwargs = BUFFER_NULL;
        char callable[32];
        msgpack_packer pk;
        int r = 0;

        mp_packer_init_buffer(&pk, &args);
        if (as_list)
                r |= msgpack_pack_array(&pk, 1);
        r |= msgpack_pack_array(&pk, b ? 2 : 1);
        r |= mp_pack_cstr(&pk, a);
        if (b)
                r |= mp_pack_cstr(&pk, b);
        mp_packer_init_buffer(&pk, &kwargs);
        r |= envd_pack_owner_kwargs(&pk, owner, 0);
        if (r != 0)
                return -ENOMEM;
        snprintf(callable, sizeof(callable), "fs::%s", function);
        r = rpc_call_local(q->api->rpc, callable, "unary", &args, &kwargs, &call_handlers, q, &q->call);
        if (r == -EBUSY)
                envd_respond_error(q->conn, "resource_exhausted", "the runtime runs as many calls as it takes");
        else if (r < 0)
                envd_respond_error(q->conn, "unavailable", "the worker cannot take the call now");
        return r;
}

static int step(EnvdRequest *q) {
        switch (q->step) {
        /* Each as the user: what it reaches is what the user may (links it planted included). */
        case STEP_CHECK_ABSENT:
                return call_fs(q, "stat", true, q->path, NULL, &q->user);
        case STEP_ACT:
                return q->method == METHOD_MAKE_DIR ? call_fs(q, "mkdir", true, q->path, NULL, &q->user)
                     : q->method == METHOD_MOVE     ? call_fs(q, "move", false, q->source, q->path, &q->user)
                                                    : call_fs(q, "remove", true, q->path, NULL, &q->user);
        case STEP_DESCRIBE:
                return call_fs(q, "stat", true, q->path, NULL, &q->user);
        }
        return -EINVAL;
}

static void on_item(RpcCall *c, const uint8_t *payload, size_t size, void *userdata) {
        rpc_call_local_credit(c, size); /* unary calls have none */
}

/* The one map of a result: the first of a list, or the map itself. */
static const msgpack_object *result_map(const msgpack_object *value) {
        if (value && value->type == MSGPACK_OBJECT_ARRAY && value->via.array.size == 1)
                value = &value->via.array.ptr[0];
        return value && value->type == MSGPACK_OBJECT_MAP ? value : NULL;
}

static void on_done(RpcCall *call, const char *event, const uint8_t *data, size_t size, void *userdata) {
        EnvdRequest *q = userdata;
        const msgpack_object *m = NULL;
        const char *error = NULL, *message = NULL;
        size_t error_n = 0, message_n = 0, off = 0;
        char code[64] = "", text[512] = "";
        msgpack_unpacked u;

        q->call = NULL;
        msgpack_unpacked_init(&u);
        if (!data || !streq(event, "call:result") || mp_check(data, size) < 0 ||
            msgpack_unpack_next(&u, (const char *) data, size, &off) != MSGPACK_UNPACK_SUCCESS ||
            !(m = result_map(mp_map_get(&u.data, "value")))) {
                msgpack_unpacked_destroy(&u);
                envd_respond_error(q->conn, "internal", "the worker could not do it");
                request_finish(q);
                return;
        }
        if (mp_map_get_str(m, "error", &error, &error_n) >= 0 && error_n < sizeof(code)) {
                memcpy(code, error, error_n);
                if (mp_map_get_str(m, "message", &message, &message_n) >= 0)
                        snprintf(text, sizeof(text), "%.*s", (int) message_n, message);
        }

        if (q->step == STEP_CHECK_ABSENT) {
                msgpack_unpacked_destroy(&u);
                if (!code[0]) {
                        envd_respond_error(q->conn, "already_exists", "the path exists already");
                        request_finish(q);
                        return;
                }
                if (!streq(code, "file_not_found")) {
                        envd_respond_error(q->conn, envd_code_of(code), text);
                        request_finish(q);
                        return;
                }
                q->step = STEP_ACT;
                if (step(q) < 0)
                        request_finish(q);
                return;
        }
        if (code[0]) {
                msgpack_unpacked_destroy(&u);
                envd_respond_error(q->conn, envd_code_of(code), text);
                request_finish(q);
                return;
        }
        if (q->step == STEP_ACT && q->method != METHOD_REMOVE) {
                msgpack_unpacked_destroy(&u);
                q->step = STEP_DESCRIBE;
                if (step(q) < 0)
                        request_finish(q);
                return;
        }
        if (q->method == METHOD_REMOVE)
                (void) http_conn_respond_json(q->conn, 200, json_object());
        else {
                json_t *entry = envd_entry_json(m);

                if (entry)
                        (void) http_conn_respond_json(q->conn, 200, json_pack("{s:o}", "entry", entry));
                else
                        envd_respond_error(q->conn, "internal", "the worker's answer cannot be read");
        }
        msgpack_unpacked_destroy(&u);
        request_finish(q);
}

static const RpcLocalHandlers call_handlers = {
        .item = on_item,
        .done = on_done,
};

/* ---- requests ------------------------------------------------------------------------------- */

static void on_request(HttpConn *c, void *data) {
        EnvdRequest *q = data;
        const char *path, *source = NULL;
        json_error_t e;
        json_t *body;

        if (c->body_oversized) {
                envd_respond_error(c, "invalid_argument", "the request is larger than 1 MiB");
                request_finish(q);
                return;
        }
        body = json_loadb((const char *) buffer_data(&c->body), c->body.len, 0, &e);
        if (!json_is_object(body)) {
                json_decref(body);
                envd_respond_error(c, "invalid_argument", "the request must be a JSON object");
                request_finish(q);
                return;
        }
        path = json_string_value(json_object_get(body, q->method == METHOD_MOVE ? "destination" : "path"));
        if (q->method == METHOD_MOVE)
                source = json_string_value(json_object_get(body, "source"));
        if (!path || !path[0] || (q->method == METHOD_MOVE && (!source || !source[0]))) {
                json_decref(body);
                envd_respond_error(c, "invalid_argument",
                                      q->method == METHOD_MOVE ? "source and destination must be paths" : "path must be a path");
                request_finish(q);
                return;
        }
        if (envd_request_user(c, &q->user) < 0) {
                json_decref(body);
                envd_respond_error(c, "invalid_argument", "no such user in this sandbox");
                request_finish(q);
                return;
        }
        q->path = envd_absolute_path(q->user.home, path);
        if (source)
                q->source = envd_absolute_path(q->user.home, source);
        json_decref(body);
        if (!q->path || (q->method == METHOD_MOVE && !q->source)) {
                envd_respond_error(c, "internal", "out of memory");
                request_finish(q);
                return;
        }
        q->step = q->method == METHOD_MAKE_DIR ? STEP_CHECK_ABSENT : q->method == METHOD_STAT ? STEP_DESCRIBE : STEP_ACT;
        if (step(q) < 0)
                request_finish(q);
}

static void on_closed(HttpConn *c, void *data) {
        EnvdRequest *q = data;

        q->conn = NULL;
        rpc_call_local_abandon(q->call);
        request_free(q);
}

static const HttpHandler request_handler = {
        .request = on_request,
        .closed = on_closed,
};

static void route(HttpConn *c, const char *path, void *userdata) {
        static const struct {
                const char *name;
                EnvdMethod method;
        } methods[] = {
                { "Stat", METHOD_STAT },
                { "MakeDir", METHOD_MAKE_DIR },
                { "Move", METHOD_MOVE },
                { "Remove", METHOD_REMOVE },
        };
        EnvdFilesystemApi *api = userdata;
        const char *name = path + strlen(PREFIX);
        EnvdRequest *q;

        if (c->method == HTTP_METHOD_OPTIONS) {
                (void) http_conn_respond(c, 204, NULL, NULL);
                return;
        }
        if (!rpc_request_token_ok(api->rpc, c->access_token, http_conn_bearer_token(c))) {
                envd_respond_error(c, "unauthenticated", "this runtime wants its token: X-Access-Token");
                return;
        }
        if (c->method != HTTP_METHOD_POST) {
                (void) http_conn_respond_json(c, 405, json_pack("{s:s,s:s}", "code", "unimplemented", "message", "Connect calls are POSTs"));
                return;
        }
        if (streq(name, "ListDir")) {
                envd_listdir_take(api->rpc, c);
                return;
        }
        if (envd_watch_take(api->watch, c, name))
                return;
        for (size_t i = 0; i < ELEMENTSOF(methods); i++) {
                if (!streq(name, methods[i].name))
                        continue;
                q = calloc(1, sizeof(*q));
                if (!q) {
                        envd_respond_error(c, "internal", "out of memory");
                        return;
                }
                *q = (EnvdRequest) { .api = api, .conn = c, .method = methods[i].method };
                http_conn_set_handler(c, &request_handler, q, ENVD_BODY_MAX);
                return;
        }
        envd_respond_error(c, "unimplemented", "this call of the Filesystem service is not served here (yet)");
}

int envd_filesystem_api_new(Rpc *rpc, HttpServer *http, EnvdFilesystemApi **ret) {
        EnvdFilesystemApi *api = calloc(1, sizeof(*api));
        int r;

        if (!api)
                return -ENOMEM;
        api->rpc = rpc;
        r = envd_watch_api_new(rpc, &api->watch);
        if (r >= 0)
                r = http_server_add_route(http, PREFIX, route, api);
        if (r < 0) {
                envd_watch_api_free(api->watch);
                free(api);
                return r;
        }
        *ret = api;
        return 0;
}

EnvdFilesystemApi *envd_filesystem_api_free(EnvdFilesystemApi *api) {
        if (api)
                envd_watch_api_free(api->watch);
        free(api);
        return NULL;
}

/* SPDX-License-Identifier: MIT */
/* envd's Filesystem/ListDir {path, depth} → {entries: [EntryInfo]} (e2b-envd-listdir.h): what the
 * `e2b` SDK's files.list(path, {depth}) sends. The entries below path down to depth levels (1:
 * the directory's own), found with fs::ls one directory at a time, breadth first, then
 * described all at once by one fs::stat of every path found; each call as the request's user. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "e2b-envd-entry.h"
#include "e2b-envd-listdir.h"
#include "envelope.h"
#include "json-msgpack.h"
#include "macro.h"
#include "mp-check.h"
#include "strv.h"

#define LISTDIR_BODY_MAX (64u * 1024u)
#define LISTDIR_MAX_ENTRIES 10000u  /* more: the first ones (breadth first) */
#define LISTDIR_MAX_DEPTH 64u

typedef struct ListDir {
        Rpc *rpc;
        HttpConn *conn;
        RpcCall *call;
        unsigned depth;
        char **dirs;            /* to list, in order; dirs[i] is at level levels[i] */
        unsigned *levels;
        size_t n_dirs, next_dir;
        char **paths;           /* found */
        size_t n_paths;
        bool describing;        /* the fs::stat of every path is under way */
        EnvdUser user;          /* every call runs as them (fs-as-user.h) */
} ListDir;

static void listdir_free(ListDir *l) {
        if (!l)
                return;
        strv_free(l->dirs);
        free(l->levels);
        strv_free(l->paths);
        free(l);
}

static void listdir_finish(ListDir *l) {
        if (l->conn)
                http_conn_detach_handler(l->conn);
        listdir_free(l);
}

static const RpcLocalHandlers call_handlers;

/* fs::ls(path), or fs::stat([paths…]). */
static int call(ListDir *l) {
        _cleanup_buffer_ Buffer args = BUFFER_NULL, kwargs = BUFFER_NULL;
        msgpack_packer pk;
        int r = 0;

        mp_packer_init_buffer(&pk, &args);
        r |= msgpack_pack_array(&pk, 1);
        if (l->describing) {
                r |= msgpack_pack_array(&pk, l->n_paths);
                for (size_t i = 0; i < l->n_paths; i++)
                        r |= mp_pack_cstr(&pk, l->paths[i]);
        } else
                r |= mp_pack_cstr(&pk, l->dirs[l->next_dir]);
        mp_packer_init_buffer(&pk, &kwargs);
        r |= envd_pack_owner_kwargs(&pk, &l->user, 0);
        if (r != 0)
                return -ENOMEM;
        r = rpc_call_local(l->rpc, l->describing ? "fs::stat" : "fs::ls", "unary", &args, &kwargs, &call_handlers, l,
                           &l->call);
        if (r == -EBUSY)
                envd_respond_error(l->conn, "resource_exhausted", "the runtime runs as many calls as it takes");
        else if (r < 0)
                envd_respond_error(l->conn, "unavailable", "the worker cannot take the call now");
        return r;
}

/* The next directory, or once all are listed, the description of what they hold. */
static int next(ListDir *l) {
        if (l->next_dir < l->n_dirs && l->n_paths < LISTDIR_MAX_ENTRIES)
                return call(l);
        if (l->n_paths == 0) {
                (void) http_conn_respond_json(l->conn, 200, json_pack("{s:[]}", "entries"));
                return -ECANCELED; /* answered */
        }
        l->describing = true;
        return call(l);
}

/* An fs::ls result: its entries go to the list, its directories (above the depth) to be listed. */
static int listed(ListDir *l, const msgpack_object *m) {
        const msgpack_object *entries = mp_map_get(m, "entries");
        unsigned level = l->levels[l->next_dir];

        for (uint32_t i = 0; entries && entries->type == MSGPACK_OBJECT_ARRAY && i < entries->via.array.size; i++) {
                const msgpack_object *e = &entries->via.array.ptr[i], *is_dir = mp_map_get(e, "is_dir");
                const char *path;
                size_t n;
                char *p;

                if (l->n_paths >= LISTDIR_MAX_ENTRIES)
                        break;
                if (mp_map_get_str(e, "path", &path, &n) < 0)
                        continue;
                p = strndup(path, n);
                if (!p || strv_consume_n(&l->paths, &l->n_paths, p) < 0)
                        return -ENOMEM;
                if (is_dir && is_dir->type == MSGPACK_OBJECT_BOOLEAN && is_dir->via.boolean && level < l->depth) {
                        unsigned *levels = realloc(l->levels, (l->n_dirs + 1) * sizeof(unsigned));

                        if (!levels)
                                return -ENOMEM;
                        l->levels = levels;
                        l->levels[l->n_dirs] = level + 1;
                        size_t n_dirs = l->n_dirs;
                        if (strv_consume_n(&l->dirs, &n_dirs, strndup(path, n)) < 0)
                                return -ENOMEM;
                        l->n_dirs = n_dirs;
                }
        }
        l->next_dir++;
        return 0;
}

static void on_item(RpcCall *c, const uint8_t *payload, size_t size, void *userdata) {
        rpc_call_local_credit(c, size); /* unary calls have none */
}

static void on_done(RpcCall *c, const char *event, const uint8_t *data, size_t size, void *userdata) {
        ListDir *l = userdata;
        const msgpack_object *value = NULL;
        const char *error, *message;
        size_t error_n, message_n, off = 0;
        char code[64] = "", text[512] = "";
        msgpack_unpacked u;
        int r;

        l->call = NULL;
        msgpack_unpacked_init(&u);
        if (!data || !streq(event, "call:result") || mp_check(data, size) < 0 ||
            msgpack_unpack_next(&u, (const char *) data, size, &off) != MSGPACK_UNPACK_SUCCESS ||
            !(value = mp_map_get(&u.data, "value"))) {
                msgpack_unpacked_destroy(&u);
                envd_respond_error(l->conn, "internal", "the worker could not do it");
                listdir_finish(l);
                return;
        }
        if (l->describing) {
                json_t *entries = json_array();

                for (uint32_t i = 0; entries && value->type == MSGPACK_OBJECT_ARRAY && i < value->via.array.size; i++) {
                        const msgpack_object *m = &value->via.array.ptr[i];

                        /* One gone since it was listed is not listed. */
                        if (m->type != MSGPACK_OBJECT_MAP || mp_map_get_str(m, "error", &error, &error_n) >= 0)
                                continue;
                        (void) json_array_append_new(entries, envd_entry_json(m));
                }
                msgpack_unpacked_destroy(&u);
                if (entries)
                        (void) http_conn_respond_json(l->conn, 200, json_pack("{s:o}", "entries", entries));
                else
                        envd_respond_error(l->conn, "internal", "out of memory");
                listdir_finish(l);
                return;
        }
        if (value->type == MSGPACK_OBJECT_MAP && mp_map_get_str(value, "error", &error, &error_n) >= 0 &&
            error_n < sizeof(code)) {
                memcpy(code, error, error_n);
                if (mp_map_get_str(value, "message", &message, &message_n) >= 0)
                        snprintf(text, sizeof(text), "%.*s", (int) message_n, message);
        }
        if (code[0] && l->next_dir == 0) {
                /* The directory asked for: its error is the answer. */
                msgpack_unpacked_destroy(&u);
                envd_respond_error(l->conn, streq(code, "not_a_directory") ? "invalid_argument" : envd_code_of(code),
                                   streq(code, "not_a_directory") ? "path is not a directory" : text);
                listdir_finish(l);
                return;
        }
        r = code[0] ? (l->next_dir++, 0) : listed(l, value); /* one below it that cannot be read: skipped */
        msgpack_unpacked_destroy(&u);
        if (r >= 0)
                r = next(l);
        else
                envd_respond_error(l->conn, "internal", "out of memory");
        if (r < 0)
                listdir_finish(l);
}

static const RpcLocalHandlers call_handlers = {
        .item = on_item,
        .done = on_done,
};

static void on_request(HttpConn *c, void *data) {
        ListDir *l = data;
        json_t *body = NULL, *depth;
        const char *path;
        json_error_t e;
        size_t n = 0;

        if (!c->body_oversized)
                body = json_loadb((const char *) buffer_data(&c->body), c->body.len, 0, &e);
        path = json_string_value(json_object_get(body, "path"));
        depth = json_object_get(body, "depth");
        if (!json_is_object(body) || !path || !path[0] ||
            (depth && !json_is_null(depth) &&
             (!json_is_integer(depth) || json_integer_value(depth) < 0 || json_integer_value(depth) > LISTDIR_MAX_DEPTH))) {
                json_decref(body);
                envd_respond_error(c, "invalid_argument", "ListDir takes {path, depth (0 to 64)}");
                listdir_finish(l);
                return;
        }
        /* envd's depth 0 is its default, 1. */
        l->depth = depth && json_integer_value(depth) > 0 ? (unsigned) json_integer_value(depth) : 1;
        if (envd_request_user(c, &l->user) < 0) {
                json_decref(body);
                envd_respond_error(c, "invalid_argument", "no such user in this sandbox");
                listdir_finish(l);
                return;
        }
        l->levels = calloc(1, sizeof(unsigned));
        if (!l->levels || strv_consume_n(&l->dirs, &n, envd_absolute_path(l->user.home, path)) < 0) {
                json_decref(body);
                envd_respond_error(c, "internal", "out of memory");
                listdir_finish(l);
                return;
        }
        json_decref(body);
        l->levels[0] = 1;
        l->n_dirs = 1;
        if (next(l) < 0)
                listdir_finish(l);
}

static void on_closed(HttpConn *c, void *data) {
        ListDir *l = data;

        l->conn = NULL;
        rpc_call_local_abandon(l->call);
        listdir_free(l);
}

static const HttpHandler handler = {
        .request = on_request,
        .closed = on_closed,
};

void envd_listdir_take(Rpc *rpc, HttpConn *c) {
        ListDir *l = calloc(1, sizeof(ListDir));

        if (!l) {
                envd_respond_error(c, "internal", "out of memory");
                return;
        }
        *l = (ListDir) { .rpc = rpc, .conn = c };
        http_conn_set_handler(c, &handler, l, LISTDIR_BODY_MAX);
}

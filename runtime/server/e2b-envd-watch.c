/* SPDX-License-Identifier: MIT */
/* envd's directory watches (e2b-envd-watch.h), on fs::watch (with ready: its first item says the
 * watches are set, so a change made once the client heard "start" is never missed):
 *
 *   WatchDir          (server stream)  {path, recursive}  {start: {}}, then {filesystem: {name,
 *                                      type}} and {keepalive: {}} until the client goes
 *   CreateWatcher     {path, recursive}       {watcherId}
 *   GetWatcherEvents  {watcherId}             {events: [{name, type}]}  (those since the last)
 *   RemoveWatcher     {watcherId}             {}
 *
 * name is the changed path relative to the watched one; type EVENT_TYPE_CREATE (created, and
 * the new name of a move), _WRITE, _REMOVE, or _RENAME (the old name of a move). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "e2b-envd-entry.h"
#include "e2b-envd-watch.h"
#include "envelope.h"
#include "json-msgpack.h"
#include "macro.h"
#include "mp-check.h"

#define WATCH_BODY_MAX (64u * 1024u)
/* Watchers and WatchDir streams together: each is an inotify instance of the worker's (and the
 * kernel allows 128 a user by default). */
#define WATCHERS_MAX 64u
#define WATCHER_EVENTS_MAX 10000u

typedef struct Watch Watch;

struct EnvdWatchApi {
        Rpc *rpc;
        Watch *watchers;        /* the polled ones */
        unsigned n_watchers;
        unsigned n_streams;     /* WatchDir's */
};

struct Watch {
        EnvdWatchApi *api;
        RpcCall *call;
        char *root;             /* the watched path, absolute */
        EnvdUser user;          /* whose the watch is: it is made with that account's credentials */
        bool ready;
        /* WatchDir: the stream */
        HttpConn *conn;
        sd_event_source *keepalive;
        uint64_t keepalive_usec;
        uint64_t uncredited;
        bool counted;           /* in n_streams */
        /* CreateWatcher: the events kept for GetWatcherEvents */
        bool polled;
        HttpConn *creating;     /* CreateWatcher's request, answered once the watches are set */
        char id[33];
        json_t *events;
        bool overflowed;
        Watch *prev, *next;
};

static void watch_unlist(Watch *w) {
        if (!w->polled)
                return;
        if (w->prev)
                w->prev->next = w->next;
        else if (w->api->watchers == w)
                w->api->watchers = w->next;
        if (w->next)
                w->next->prev = w->prev;
        w->api->n_watchers--;
        w->polled = false;
}

static Watch *watch_free(Watch *w) {
        if (!w)
                return NULL;
        watch_unlist(w);
        if (w->counted)
                w->api->n_streams--;
        rpc_call_local_abandon(w->call);
        sd_event_source_disable_unref(w->keepalive);
        if (w->conn)
                http_conn_detach_handler(w->conn);
        free(w->root);
        json_decref(w->events);
        free(w);
        return NULL;
}

/* ---- fs::watch's items --------------------------------------------------------------------- */

static const char *event_type(const char *fs_event, size_t n) {
        static const struct {
                const char *fs, *envd;
        } map[] = {
                { "created", "EVENT_TYPE_CREATE" },     { "modified", "EVENT_TYPE_WRITE" },
                { "deleted", "EVENT_TYPE_REMOVE" },     { "moved_from", "EVENT_TYPE_RENAME" },
                { "moved_to", "EVENT_TYPE_CREATE" },
        };

        for (size_t i = 0; i < ELEMENTSOF(map); i++)
                if (strlen(map[i].fs) == n && memcmp(map[i].fs, fs_event, n) == 0)
                        return map[i].envd;
        return NULL;
}

/* {name, type} of an fs::watch change, or NULL. */
static json_t *change_json(const Watch *w, const msgpack_object *value) {
        const char *path, *event, *type;
        size_t path_n, event_n, root_n = strlen(w->root);

        if (mp_map_get_str(value, "path", &path, &path_n) < 0 || mp_map_get_str(value, "event", &event, &event_n) < 0 ||
            !(type = event_type(event, event_n)))
                return NULL;
        /* Relative to the watched path ("/" watches name their changes without the slash). */
        if (path_n > root_n && memcmp(path, w->root, root_n) == 0) {
                path += root_n;
                path_n -= root_n;
                if (path_n > 0 && path[0] == '/')
                        path++, path_n--;
        }
        return json_pack("{s:s%,s:s}", "name", path, path_n, "type", type);
}

static void answer_created(Watch *w) {
        HttpConn *c = TAKE_PTR(w->creating);

        (void) http_conn_respond_json(c, 200, json_pack("{s:s}", "watcherId", w->id));
        http_conn_detach_handler(c);
}

static void on_item(RpcCall *call, const uint8_t *payload, size_t size, void *userdata) {
        Watch *w = userdata;
        const msgpack_object *value, *ready;
        msgpack_unpacked u;
        size_t off = 0;
        json_t *change;

        msgpack_unpacked_init(&u);
        if (mp_check(payload, size) < 0 ||
            msgpack_unpack_next(&u, (const char *) payload, size, &off) != MSGPACK_UNPACK_SUCCESS ||
            !(value = mp_map_get(&u.data, "value")) || value->type != MSGPACK_OBJECT_MAP) {
                msgpack_unpacked_destroy(&u);
                rpc_call_local_credit(call, size);
                return;
        }
        if ((ready = mp_map_get(value, "ready")) && ready->type == MSGPACK_OBJECT_BOOLEAN) {
                w->ready = true;
                if (w->creating)
                        answer_created(w);
                else if (w->conn)
                        (void) envd_stream_send(w->conn, 0, json_pack("{s:{}}", "start"));
        } else if ((change = change_json(w, value))) {
                if (w->conn)
                        (void) envd_stream_send(w->conn, 0, json_pack("{s:o}", "filesystem", change));
                else if (json_array_size(w->events) < WATCHER_EVENTS_MAX)
                        (void) json_array_append_new(w->events, change);
                else {
                        json_decref(change);
                        w->overflowed = true; /* said at the next GetWatcherEvents */
                }
        }
        msgpack_unpacked_destroy(&u);
        /* A stream's bytes are credited once its client took them; a watcher keeps its events. */
        if (w->conn && http_conn_pending(w->conn) > 0)
                w->uncredited += size;
        else
                rpc_call_local_credit(call, size);
}

static void on_done(RpcCall *call, const char *event, const uint8_t *data, size_t size, void *userdata) {
        Watch *w = userdata;
        _cleanup_free_ char *type = NULL, *message = NULL;

        w->call = NULL;
        if (streq(event, "call:error"))
                rpc_error_of(data, size, &type, &message);
        if (w->creating) {
                envd_respond_error(w->creating, type ? envd_code_of(type) : "internal", message ?: "the watch failed");
                http_conn_detach_handler(TAKE_PTR(w->creating));
                watch_free(w);
                return;
        }
        if (w->conn) {
                /* The watched path went (or the watch failed): the stream ends, saying why. */
                envd_stream_end(w->conn, type ? envd_code_of(type) : NULL, message);
                watch_free(w);
                return;
        }
        /* A polled watcher stays until removed; its events are still there to get. */
}

static const RpcLocalHandlers watch_handlers = {
        .item = on_item,
        .done = on_done,
};

/* fs::watch(root, recursive, ready=True) for w, as its account: a link the account planted
 * shows only what the account may see. */
static int watch_start(Watch *w, bool recursive) {
        _cleanup_buffer_ Buffer args = BUFFER_NULL, kwargs = BUFFER_NULL;
        msgpack_packer pk;
        int r = 0;

        mp_packer_init_buffer(&pk, &args);
        r |= msgpack_pack_array(&pk, 1);
        r |= mp_pack_cstr(&pk, w->root);
        mp_packer_init_buffer(&pk, &kwargs);
        r |= envd_pack_owner_kwargs(&pk, &w->user, 2);
        r |= mp_pack_cstr(&pk, "recursive");
        r |= recursive ? msgpack_pack_true(&pk) : msgpack_pack_false(&pk);
        r |= mp_pack_cstr(&pk, "ready");
        r |= msgpack_pack_true(&pk);
        if (r != 0)
                return -ENOMEM;
        return rpc_call_local(w->api->rpc, "fs::watch", "stream", &args, &kwargs, &watch_handlers, w, &w->call);
}

/* ---- WatchDir -------------------------------------------------------------------------------- */

static int on_keepalive(sd_event_source *source, uint64_t usec, void *userdata) {
        Watch *w = userdata;

        if (w->ready)
                (void) envd_stream_send(w->conn, 0, json_pack("{s:{}}", "keepalive"));
        (void) sd_event_source_set_time(source, usec + w->keepalive_usec);
        (void) sd_event_source_set_enabled(source, SD_EVENT_ON);
        return 0;
}

static void stream_drained(HttpConn *c, void *userdata) {
        Watch *w = userdata;

        if (w->call && w->uncredited > 0 && http_conn_pending(c) == 0) {
                rpc_call_local_credit(w->call, w->uncredited);
                w->uncredited = 0;
        }
}

static void stream_closed(HttpConn *c, void *userdata) {
        Watch *w = userdata;

        w->conn = NULL;
        watch_free(w); /* the watch goes with its stream */
}

static const HttpHandler stream_handler = {
        .drained = stream_drained,
        .closed = stream_closed,
};

/* The path and recursive flag of a WatchDir or CreateWatcher message, the path made absolute,
 * and the account the request is for. */
static int watch_target(HttpConn *c, json_t *msg, EnvdUser *ret_user, char **ret_root, bool *ret_recursive) {
        const char *path = json_string_value(json_object_get(msg, "path"));

        if (!path || !path[0])
                return -EINVAL;
        if (envd_request_user(c, ret_user) < 0)
                return -ENOENT;
        *ret_root = envd_absolute_path(ret_user->home, path);
        *ret_recursive = json_is_true(json_object_get(msg, "recursive"));
        return *ret_root ? 0 : -ENOMEM;
}

typedef struct WatchRequest {
        EnvdWatchApi *api;
        char name[32];
        uint64_t keepalive_usec;
} WatchRequest;

static void watch_dir(WatchRequest *q, HttpConn *c, json_t *msg) {
        Watch *w;
        bool recursive = false;
        int r;

        if (q->api->n_watchers + q->api->n_streams >= WATCHERS_MAX) {
                envd_stream_end(c, "resource_exhausted", "this sandbox has as many watchers as it takes (64)");
                return;
        }
        w = calloc(1, sizeof(Watch));
        if (!w) {
                envd_stream_end(c, "internal", "out of memory");
                return;
        }
        *w = (Watch) { .api = q->api, .conn = c, .keepalive_usec = q->keepalive_usec, .counted = true };
        q->api->n_streams++;
        r = watch_target(c, msg, &w->user, &w->root, &recursive);
        if (r < 0) {
                w->conn = NULL;
                watch_free(w);
                envd_stream_end(c, "invalid_argument", r == -ENOENT ? "no such user in this sandbox" :
                                                                      "WatchDir takes {path, recursive}");
                return;
        }
        http_conn_set_handler(c, &stream_handler, w, 0);
        r = http_conn_stream_begin(c, 200, "application/connect+json");
        if (r >= 0 && w->keepalive_usec > 0)
                r = sd_event_add_time_relative(http_server_event(c->server), &w->keepalive, CLOCK_MONOTONIC,
                                               w->keepalive_usec, 0, on_keepalive, w);
        if (r >= 0)
                r = watch_start(w, recursive);
        if (r < 0) {
                envd_stream_end(c, r == -EBUSY ? "resource_exhausted" : "unavailable", "the worker cannot take the call now");
                watch_free(w);
        }
}

/* ---- the polled watchers --------------------------------------------------------------------- */

static Watch *watcher_find(EnvdWatchApi *api, json_t *msg) {
        const char *id = json_string_value(json_object_get(msg, "watcherId"));

        for (Watch *w = api->watchers; id && w; w = w->next)
                if (streq(w->id, id))
                        return w;
        return NULL;
}

static void watcher_closed(HttpConn *c, void *userdata) {
        Watch *w = userdata;

        /* CreateWatcher's client left before its answer: nobody knows the watcher. */
        w->creating = NULL;
        watch_free(w);
}

static const HttpHandler creating_handler = {
        .closed = watcher_closed,
};

static void create_watcher(EnvdWatchApi *api, HttpConn *c, json_t *msg) {
        uint8_t random[16];
        Watch *w;
        bool recursive = false;
        int r;

        if (api->n_watchers + api->n_streams >= WATCHERS_MAX) {
                envd_respond_error(c, "resource_exhausted", "this sandbox has as many watchers as it takes (64)");
                return;
        }
        w = calloc(1, sizeof(Watch));
        if (!w || getrandom(random, sizeof(random), 0) != (ssize_t) sizeof(random)) {
                free(w);
                envd_respond_error(c, "internal", "out of memory");
                return;
        }
        *w = (Watch) { .api = api, .polled = true, .creating = c, .events = json_array(), .next = api->watchers };
        for (size_t i = 0; i < sizeof(random); i++)
                snprintf(w->id + 2 * i, 3, "%02x", random[i]);
        if (api->watchers)
                api->watchers->prev = w;
        api->watchers = w;
        api->n_watchers++;
        r = w->events ? watch_target(c, msg, &w->user, &w->root, &recursive) : -ENOMEM;
        if (r < 0) {
                w->creating = NULL;
                watch_free(w);
                envd_respond_error(c, r == -ENOMEM ? "internal" : "invalid_argument",
                                   r == -ENOENT ? "no such user in this sandbox" : "CreateWatcher takes {path, recursive}");
                return;
        }
        http_conn_set_handler(c, &creating_handler, w, 0);
        r = watch_start(w, recursive);
        if (r < 0) {
                http_conn_detach_handler(c);
                w->creating = NULL;
                watch_free(w);
                envd_respond_error(c, r == -EBUSY ? "resource_exhausted" : "unavailable", "the worker cannot take the call now");
        }
}

static void unary(EnvdWatchApi *api, HttpConn *c, const char *name, json_t *msg) {
        Watch *w;

        if (streq(name, "CreateWatcher")) {
                create_watcher(api, c, msg);
                return;
        }
        w = watcher_find(api, msg);
        if (!w) {
                envd_respond_error(c, "not_found", "no such watcher");
                return;
        }
        if (streq(name, "GetWatcherEvents")) {
                json_t *events = TAKE_PTR(w->events);

                w->events = json_array();
                if (w->overflowed) {
                        w->overflowed = false;
                        json_decref(events);
                        envd_respond_error(c, "resource_exhausted",
                                           "more than 10000 events since the last GetWatcherEvents: some were lost");
                        return;
                }
                (void) http_conn_respond_json(c, 200, json_pack("{s:o}", "events", events ?: json_array()));
                return;
        }
        watch_free(w); /* RemoveWatcher */
        (void) http_conn_respond_json(c, 200, json_object());
}

/* ---- requests --------------------------------------------------------------------------------- */

static void on_request(HttpConn *c, void *data) {
        _cleanup_free_ WatchRequest *q = data;
        bool stream = streq(q->name, "WatchDir");
        json_error_t e;
        json_t *msg = c->body_oversized ? NULL :
                      stream ? envd_stream_request(c) :
                               json_loadb((const char *) buffer_data(&c->body), c->body.len, 0, &e);

        http_conn_detach_handler(c);
        if (!json_is_object(msg)) {
                if (stream)
                        envd_stream_end(c, "invalid_argument", "the request is not one Connect message of JSON");
                else
                        envd_respond_error(c, "invalid_argument", "the request must be a JSON object");
        } else if (stream)
                watch_dir(q, c, msg);
        else
                unary(q->api, c, q->name, msg);
        json_decref(msg);
}

static void on_closed(HttpConn *c, void *data) {
        free(data);
}

static const HttpHandler request_handler = {
        .request = on_request,
        .closed = on_closed,
};

bool envd_watch_take(EnvdWatchApi *api, HttpConn *c, const char *name) {
        WatchRequest *q;

        if (!streq(name, "WatchDir") && !streq(name, "CreateWatcher") && !streq(name, "GetWatcherEvents") &&
            !streq(name, "RemoveWatcher"))
                return false;
        q = calloc(1, sizeof(WatchRequest));
        if (!q) {
                envd_respond_error(c, "internal", "out of memory");
                return true;
        }
        q->api = api;
        strcpy(q->name, name);
        q->keepalive_usec = envd_keepalive_usec(c);
        http_conn_set_handler(c, &request_handler, q, WATCH_BODY_MAX);
        return true;
}

int envd_watch_api_new(Rpc *rpc, EnvdWatchApi **ret) {
        EnvdWatchApi *api = calloc(1, sizeof(EnvdWatchApi));

        if (!api)
                return -ENOMEM;
        api->rpc = rpc;
        *ret = api;
        return 0;
}

EnvdWatchApi *envd_watch_api_free(EnvdWatchApi *api) {
        if (!api)
                return NULL;
        while (api->watchers)
                watch_free(api->watchers);
        free(api);
        return NULL;
}

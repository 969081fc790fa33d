/* SPDX-License-Identifier: MIT */
/* E2B's envd Process service (e2b-envd-process.h): what the `e2b` SDK's commands and pty send to
 * a sandbox's port 49983. Each process is a bidi sandbox::exec of the worker's (report_pid: its
 * first item is the pid), kept in a table of the server's by pid and tag, so that it outlives
 * the request that started it:
 *
 *   Start        (server stream)  {process: {cmd, args, envs, cwd}, pty?, tag?, stdin?}
 *   Connect      (server stream)  {process: {pid} | {tag}}
 *   List         {}                               {processes: [{config, pid, tag}]}
 *   SendInput    {process, input: {stdin|pty}}    (base64)
 *   CloseStdin   {process}
 *   SendSignal   {process, signal: SIGNAL_SIGKILL | SIGNAL_SIGTERM}
 *   Update       {process, pty: {size: {cols, rows}}}
 *
 * A stream's messages are Connect's envelopes (a flag byte, a 4-byte length, JSON): events
 * {"event": {"start": {pid}}}, {"data": {stdout|stderr|pty: base64}}, {"keepalive": {}} every
 * Keepalive-Ping-Interval seconds, {"end": {exitCode, exited, status}}; then the end of the
 * stream (flag 0x02), {} or {"error": {code, message}}. Every stream attached to a process gets
 * its output from then on; a stream that goes leaves the process running (with no stream, its
 * output is read and dropped). Connect-Timeout-Ms on Start is the command's timeout (it is killed
 * then, as E2B's commands are). The command runs as `exec CMD ARGS…` under the worker's
 * /bin/sh; an absolute CMD the image lacks (E2B's /bin/bash on a busybox image) is looked up by
 * its name on PATH, where the bundle's tools are. */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "e2b-envd-entry.h"
#include "e2b-envd-process.h"
#include "envelope.h"
#include "json-msgpack.h"
#include "log.h"
#include "macro.h"
#include "mp-check.h"

#define PREFIX "/process.Process/"
#define PROCESS_BODY_MAX (1024u * 1024u)
#define PROCESSES_MAX 256u
#define SUBSCRIBERS_MAX 16u
#define UNLIMITED_OUTPUT (1ULL << 62)

typedef struct EnvdProcess EnvdProcess;
typedef struct Subscriber Subscriber;

struct EnvdProcessApi {
        Rpc *rpc;
        sd_event *event;
        EnvdProcess *processes;
        unsigned n_processes;
};

/* A stream attached to a process: Start's own, or Connect's. */
struct Subscriber {
        EnvdProcess *process;
        HttpConn *conn;
        sd_event_source *keepalive;
        uint64_t keepalive_usec;
        Subscriber *prev, *next;
};

struct EnvdProcess {
        EnvdProcessApi *api;
        EnvdProcess *prev, *next;
        RpcCall *call;          /* the sandbox::exec; NULL once it ended */
        int64_t pid;            /* 0 until the worker says */
        char *tag;
        json_t *config;         /* {cmd, args, envs, cwd}, for List */
        bool pty, stdin_open;
        Subscriber *subscribers;
        unsigned n_subscribers;
        uint64_t uncredited;    /* output bytes sent on, not yet credited to the worker */
        int exit_code;
        bool have_exit;
};

/* ---- subscribers --------------------------------------------------------------------------- */

static const HttpHandler stream_handler;

static Subscriber *subscriber_free(Subscriber *s) {
        EnvdProcess *p;

        if (!s)
                return NULL;
        p = s->process;
        if (s->prev)
                s->prev->next = s->next;
        else if (p->subscribers == s)
                p->subscribers = s->next;
        if (s->next)
                s->next->prev = s->prev;
        p->n_subscribers--;
        sd_event_source_disable_unref(s->keepalive);
        if (s->conn)
                http_conn_detach_handler(s->conn);
        free(s);
        return NULL;
}

/* Credit the worker for what every stream has sent on (or all of it when none listens). */
static void credit(EnvdProcess *p) {
        if (!p->call || p->uncredited == 0)
                return;
        for (Subscriber *s = p->subscribers; s; s = s->next)
                if (http_conn_pending(s->conn) > 0)
                        return;
        rpc_call_local_credit(p->call, p->uncredited);
        p->uncredited = 0;
}

static int on_keepalive(sd_event_source *source, uint64_t usec, void *userdata) {
        Subscriber *s = userdata;

        envd_stream_event(s->conn, json_pack("{s:{}}", "keepalive"));
        (void) sd_event_source_set_time(source, usec + s->keepalive_usec);
        (void) sd_event_source_set_enabled(source, SD_EVENT_ON);
        return 0;
}

/* Attach c's stream to p: the head goes out, and the start event once the pid is known. */
static int subscribe(EnvdProcess *p, HttpConn *c, uint64_t keepalive_usec) {
        Subscriber *s;
        int r;

        if (p->n_subscribers >= SUBSCRIBERS_MAX)
                return -E2BIG;
        s = calloc(1, sizeof(Subscriber));
        if (!s)
                return -ENOMEM;
        *s = (Subscriber) { .process = p, .conn = c, .keepalive_usec = keepalive_usec, .next = p->subscribers };
        if (p->subscribers)
                p->subscribers->prev = s;
        p->subscribers = s;
        p->n_subscribers++;
        http_conn_set_handler(c, &stream_handler, s, 0);
        r = http_conn_stream_begin(c, 200, "application/connect+json");
        if (r >= 0 && keepalive_usec > 0)
                r = sd_event_add_time_relative(p->api->event, &s->keepalive, CLOCK_MONOTONIC, keepalive_usec, 0,
                                               on_keepalive, s);
        if (r < 0) {
                subscriber_free(s);
                return r;
        }
        if (p->pid > 0)
                envd_stream_event(c, json_pack("{s:{s:I}}", "start", "pid", (json_int_t) p->pid));
        return 0;
}

static void stream_drained(HttpConn *c, void *userdata) {
        Subscriber *s = userdata;

        credit(s->process);
}

static void stream_closed(HttpConn *c, void *userdata) {
        Subscriber *s = userdata;
        EnvdProcess *p = s->process;

        s->conn = NULL; /* the connection is going: nothing to detach */
        subscriber_free(s);
        credit(p);
}

static const HttpHandler stream_handler = {
        .drained = stream_drained,
        .closed = stream_closed,
};

/* ---- the process table --------------------------------------------------------------------- */

static EnvdProcess *process_free(EnvdProcess *p) {
        if (!p)
                return NULL;
        while (p->subscribers)
                subscriber_free(p->subscribers);
        if (p->prev)
                p->prev->next = p->next;
        else if (p->api->processes == p)
                p->api->processes = p->next;
        if (p->next)
                p->next->prev = p->prev;
        p->api->n_processes--;
        rpc_call_local_abandon(p->call);
        free(p->tag);
        json_decref(p->config);
        free(p);
        return NULL;
}

/* The process a request's {process: {pid} | {tag}} names, or NULL. */
static EnvdProcess *process_find(EnvdProcessApi *api, json_t *selector) {
        json_t *pid = json_object_get(selector, "pid");
        const char *tag = json_string_value(json_object_get(selector, "tag"));

        for (EnvdProcess *p = api->processes; p; p = p->next)
                if ((json_is_integer(pid) && p->pid > 0 && p->pid == json_integer_value(pid)) ||
                    (tag && p->tag && streq(tag, p->tag)))
                        return p;
        return NULL;
}

/* One inbox item of the exec: {key: value}. */
static int process_inbox(EnvdProcess *p, const char *key, const void *data, size_t size, int rows, int cols) {
        _cleanup_buffer_ Buffer item = BUFFER_NULL;
        msgpack_packer pk;
        int r = 0;

        mp_packer_init_buffer(&pk, &item);
        r |= msgpack_pack_map(&pk, 1);
        r |= mp_pack_cstr(&pk, key);
        if (streq(key, "stdin")) {
                r |= msgpack_pack_bin(&pk, size);
                r |= msgpack_pack_bin_body(&pk, data, size);
        } else if (streq(key, "resize")) {
                r |= msgpack_pack_array(&pk, 2);
                r |= msgpack_pack_int(&pk, rows);
                r |= msgpack_pack_int(&pk, cols);
        } else if (streq(key, "signal"))
                r |= mp_pack_cstr(&pk, data);
        else
                r |= msgpack_pack_true(&pk);
        if (r != 0)
                return -ENOMEM;
        return rpc_call_local_send(p->call, &item);
}

/* ---- the exec's output --------------------------------------------------------------------- */

static void on_item(RpcCall *c, const uint8_t *payload, size_t size, void *userdata) {
        EnvdProcess *p = userdata;
        const msgpack_object *value, *pid, *data, *exit_code;
        int64_t number;
        const char *stream;
        size_t stream_n, off = 0;
        msgpack_unpacked u;

        msgpack_unpacked_init(&u);
        if (mp_check(payload, size) < 0 ||
            msgpack_unpack_next(&u, (const char *) payload, size, &off) != MSGPACK_UNPACK_SUCCESS ||
            !(value = mp_map_get(&u.data, "value")) || value->type != MSGPACK_OBJECT_MAP) {
                msgpack_unpacked_destroy(&u);
                rpc_call_local_credit(c, size);
                return;
        }
        p->uncredited += size;
        if ((pid = mp_map_get(value, "pid")) && mp_get_int(pid, 1, INT32_MAX, &number) >= 0) {
                p->pid = number;
                for (Subscriber *s = p->subscribers; s; s = s->next)
                        envd_stream_event(s->conn, json_pack("{s:{s:I}}", "start", "pid", (json_int_t) p->pid));
                /* No stdin: EOF at once, as an item (closing the inbox would also shut out the
                 * signals and resizes that may come later). */
                if (!p->stdin_open)
                        (void) process_inbox(p, "eof", NULL, 0, 0, 0);
        } else if ((data = mp_map_get(value, "data")) && data->type == MSGPACK_OBJECT_BIN &&
                   mp_map_get_str(value, "stream", &stream, &stream_n) >= 0) {
                _cleanup_free_ char *b64 = NULL;
                char key[8];

                snprintf(key, sizeof(key), "%.*s", (int) MIN(stream_n, sizeof(key) - 1), stream);
                if (p->subscribers && base64_encode(data->via.bin.ptr, data->via.bin.size, &b64) >= 0)
                        for (Subscriber *s = p->subscribers; s; s = s->next)
                                envd_stream_event(s->conn, json_pack("{s:{s:s}}", "data", key, b64));
        } else if ((exit_code = mp_map_get(value, "exit_code")) && mp_get_int(exit_code, INT_MIN, INT_MAX, &number) >= 0) {
                p->exit_code = (int) number;
                p->have_exit = true;
        }
        msgpack_unpacked_destroy(&u);
        credit(p);
}

static void on_done(RpcCall *c, const char *event, const uint8_t *data, size_t size, void *userdata) {
        EnvdProcess *p = userdata;
        char status[64];

        p->call = NULL;
        if (p->have_exit) {
                /* exec says 128+N for a signal N, as a shell does; envd says "signal: N". */
                if (p->exit_code > 128 && p->exit_code < 128 + 65)
                        snprintf(status, sizeof(status), "signal: %d", p->exit_code - 128);
                else
                        snprintf(status, sizeof(status), "exit status %d", p->exit_code);
                for (Subscriber *s = p->subscribers; s; s = s->next) {
                        envd_stream_event(s->conn, json_pack("{s:{s:i,s:b,s:s}}", "end", "exitCode", p->exit_code, "exited",
                                                      p->exit_code <= 128, "status", status));
                        envd_stream_end(s->conn, NULL, NULL);
                }
        } else {
                _cleanup_free_ char *type = NULL, *message = NULL;

                rpc_error_of(data, size, &type, &message);
                for (Subscriber *s = p->subscribers; s; s = s->next)
                        envd_stream_end(s->conn,
                                   type && (streq(type, "FileNotFoundError") || streq(type, "NotADirectoryError") ||
                                            streq(type, "ValueError")) ? "invalid_argument" : "internal",
                                   message ?: "the process could not be run");
        }
        process_free(p);
}

static const RpcLocalHandlers exec_handlers = {
        .item = on_item,
        .done = on_done,
};

/* ---- Start ---------------------------------------------------------------------------------- */

/* s in single quotes, for /bin/sh. */
static int append_quoted(Buffer *b, const char *s) {
        int r = buffer_append(b, " '", 2);

        for (; r >= 0 && *s; s++)
                r = *s == '\'' ? buffer_append(b, "'\\''", 4) : buffer_append(b, s, 1);
        return r < 0 ? r : buffer_append(b, "'", 1);
}

/* `exec CMD ARGS…`; an absolute CMD that is not there by its name on PATH. */
static int command_line(const char *cmd, json_t *args, Buffer *ret) {
        const char *slash = strrchr(cmd, '/');
        size_t i;
        json_t *a;
        int r;

        if (cmd[0] == '/' && access(cmd, X_OK) < 0 && slash[1])
                cmd = slash + 1;
        r = buffer_append(ret, "exec", 4);
        if (r >= 0)
                r = append_quoted(ret, cmd);
        json_array_foreach(args, i, a)
                if (r >= 0)
                        r = append_quoted(ret, json_string_value(a) ?: "");
        return r < 0 ? r : buffer_append(ret, "", 1);
}

static int pack_env(msgpack_packer *pk, json_t *envs) {
        const char *k;
        json_t *v;
        int r = msgpack_pack_map(pk, json_object_size(envs));

        json_object_foreach(envs, k, v) {
                r |= mp_pack_cstr(pk, k);
                r |= mp_pack_cstr(pk, json_string_value(v) ?: "");
        }
        return r;
}

typedef struct StreamRequest {
        EnvdProcessApi *api;
        bool connect;           /* Connect; else Start */
        uint64_t keepalive_usec;
        uint64_t timeout_ms;    /* Connect-Timeout-Ms (Start), 0: none */
} StreamRequest;

static void start(StreamRequest *q, HttpConn *c, json_t *msg) {
        _cleanup_buffer_ Buffer command = BUFFER_NULL, args = BUFFER_NULL, kwargs = BUFFER_NULL;
        _cleanup_free_ char *cwd = NULL;
        json_t *proc = json_object_get(msg, "process"), *pty = json_object_get(msg, "pty"),
               *size = json_object_get(pty, "size"), *envs = json_object_get(proc, "envs"),
               *argv = json_object_get(proc, "args");
        const char *cmd = json_string_value(json_object_get(proc, "cmd")),
                   *tag = json_string_value(json_object_get(msg, "tag")),
                   *want_cwd = json_string_value(json_object_get(proc, "cwd"));
        json_t *stdin_flag = json_object_get(msg, "stdin");
        EnvdProcess *p;
        EnvdUser user;
        msgpack_packer pk;
        int r = 0;

        if (!cmd || !cmd[0] || (argv && !json_is_array(argv)) || (envs && !json_is_object(envs))) {
                envd_stream_end(c, "invalid_argument", "Start takes {process: {cmd, args, envs, cwd}, pty, tag, stdin}");
                return;
        }
        if (q->api->n_processes >= PROCESSES_MAX) {
                envd_stream_end(c, "resource_exhausted", "this sandbox runs as many processes as it takes (256)");
                return;
        }
        if (tag) {
                json_t *selector = json_pack("{s:s}", "tag", tag);
                bool taken = process_find(q->api, selector);

                json_decref(selector);
                if (taken) {
                        envd_stream_end(c, "already_exists", "a process with this tag runs already");
                        return;
                }
        }
        if (envd_request_user(c, &user) < 0) {
                envd_stream_end(c, "invalid_argument", "no such user in this sandbox");
                return;
        }
        cwd = envd_absolute_path(user.home, want_cwd && want_cwd[0] ? want_cwd : ".");
        if (!cwd || command_line(cmd, argv, &command) < 0) {
                envd_stream_end(c, "internal", "out of memory");
                return;
        }

        mp_packer_init_buffer(&pk, &args);
        r |= msgpack_pack_array(&pk, 1);
        r |= mp_pack_cstr(&pk, (const char *) buffer_data(&command));
        mp_packer_init_buffer(&pk, &kwargs);
        r |= msgpack_pack_map(&pk, 7 + !!envs + !user.own);
        r |= mp_pack_cstr(&pk, "timeout");
        r |= msgpack_pack_double(&pk, (double) q->timeout_ms / 1000.0);
        r |= mp_pack_cstr(&pk, "cwd");
        r |= mp_pack_cstr(&pk, cwd);
        r |= mp_pack_cstr(&pk, "max_output");
        r |= msgpack_pack_uint64(&pk, UNLIMITED_OUTPUT);
        r |= mp_pack_cstr(&pk, "pty");
        r |= pty && !json_is_null(pty) ? msgpack_pack_true(&pk) : msgpack_pack_false(&pk);
        r |= mp_pack_cstr(&pk, "rows");
        r |= msgpack_pack_int(&pk, json_is_integer(json_object_get(size, "rows")) ?
                                           (int) json_integer_value(json_object_get(size, "rows")) : 24);
        r |= mp_pack_cstr(&pk, "cols");
        r |= msgpack_pack_int(&pk, json_is_integer(json_object_get(size, "cols")) ?
                                           (int) json_integer_value(json_object_get(size, "cols")) : 80);
        r |= mp_pack_cstr(&pk, "report_pid");
        r |= msgpack_pack_true(&pk);
        if (envs) {
                r |= mp_pack_cstr(&pk, "env");
                r |= pack_env(&pk, envs);
        }
        /* Another account than the runtime's: the worker starts the command as that one. */
        if (!user.own) {
                r |= mp_pack_cstr(&pk, "user");
                r |= mp_pack_cstr(&pk, user.name);
        }
        if (r != 0) {
                envd_stream_end(c, "internal", "out of memory");
                return;
        }

        p = calloc(1, sizeof(EnvdProcess));
        if (!p) {
                envd_stream_end(c, "internal", "out of memory");
                return;
        }
        *p = (EnvdProcess) { .api = q->api, .pty = pty && !json_is_null(pty), .next = q->api->processes,
                             /* E2B's SDK says stdin: false for commands that take none (envd 0.3.0+). */
                             .stdin_open = !stdin_flag || json_is_true(stdin_flag) };
        if (q->api->processes)
                q->api->processes->prev = p;
        q->api->processes = p;
        q->api->n_processes++;
        p->tag = tag ? strdup(tag) : NULL;
        p->config = json_pack("{s:s,s:o,s:o,s:s}", "cmd", cmd, "args", argv ? json_incref(argv) : json_array(), "envs",
                              envs ? json_incref(envs) : json_object(), "cwd", cwd);
        r = !p->config || (tag && !p->tag) ? -ENOMEM :
            rpc_call_local(q->api->rpc, "sandbox::exec", "bidi", &args, &kwargs, &exec_handlers, p, &p->call);
        if (r < 0) {
                envd_stream_end(c, r == -EBUSY ? "resource_exhausted" : "unavailable", "the worker cannot take the call now");
                process_free(p);
                return;
        }
        r = subscribe(p, c, q->keepalive_usec);
        if (r < 0)
                envd_stream_end(c, "internal", "out of memory");
}

static void connect_to(StreamRequest *q, HttpConn *c, json_t *msg) {
        EnvdProcess *p = process_find(q->api, json_object_get(msg, "process"));
        int r;

        if (!p) {
                envd_stream_end(c, "not_found", "no such process");
                return;
        }
        r = subscribe(p, c, q->keepalive_usec);
        if (r < 0)
                envd_stream_end(c, r == -E2BIG ? "resource_exhausted" : "internal",
                           r == -E2BIG ? "this process has as many streams as it takes (16)" : "out of memory");
}

static void on_stream_request(HttpConn *c, void *data) {
        StreamRequest *q = data;
        _cleanup_free_ StreamRequest *owned = q;
        json_t *msg = c->body_oversized ? NULL : envd_stream_request(c);

        http_conn_detach_handler(c);
        if (!json_is_object(msg))
                envd_stream_end(c, "invalid_argument", "the request is not one Connect message of JSON");
        else if (q->connect)
                connect_to(q, c, msg);
        else
                start(q, c, msg);
        json_decref(msg);
}

static void on_stream_request_closed(HttpConn *c, void *data) {
        free(data);
}

static const HttpHandler stream_request_handler = {
        .request = on_stream_request,
        .closed = on_stream_request_closed,
};

/* ---- unary calls ---------------------------------------------------------------------------- */

static void unary(EnvdProcessApi *api, HttpConn *c, const char *name, json_t *msg) {
        EnvdProcess *p = NULL;
        const char *text;
        int r = 0;

        if (streq(name, "List")) {
                json_t *list = json_array();

                for (EnvdProcess *i = api->processes; list && i; i = i->next)
                        if (i->pid > 0)
                                (void) json_array_append_new(list, json_pack("{s:O,s:I,s:s*}", "config", i->config, "pid",
                                                                             (json_int_t) i->pid, "tag", i->tag));
                (void) http_conn_respond_json(c, 200, json_pack("{s:o}", "processes", list));
                return;
        }
        p = process_find(api, json_object_get(msg, "process"));
        if (!p || !p->call) {
                envd_respond_error(c, "not_found", "no such process");
                return;
        }
        if (streq(name, "SendInput")) {
                json_t *input = json_object_get(msg, "input");
                _cleanup_free_ void *bytes = NULL;
                size_t size = 0;

                text = json_string_value(json_object_get(input, "stdin")) ?: json_string_value(json_object_get(input, "pty"));
                if (!text || base64_decode(text, strlen(text), &bytes, &size) < 0) {
                        envd_respond_error(c, "invalid_argument", "SendInput takes {process, input: {stdin | pty}}");
                        return;
                }
                r = process_inbox(p, "stdin", bytes, size, 0, 0);
        } else if (streq(name, "CloseStdin"))
                r = process_inbox(p, "eof", NULL, 0, 0, 0);
        else if (streq(name, "SendSignal")) {
                text = json_string_value(json_object_get(msg, "signal"));
                /* envd's enum names: SIGNAL_SIGKILL, SIGNAL_SIGTERM; numbers too. */
                if (text && strncmp(text, "SIGNAL_", 7) == 0)
                        r = process_inbox(p, "signal", text + 7, 0, 0, 0);
                else if (json_is_integer(json_object_get(msg, "signal")) &&
                         json_integer_value(json_object_get(msg, "signal")) == 9)
                        r = process_inbox(p, "signal", "SIGKILL", 0, 0, 0);
                else if (json_is_integer(json_object_get(msg, "signal")) &&
                         json_integer_value(json_object_get(msg, "signal")) == 15)
                        r = process_inbox(p, "signal", "SIGTERM", 0, 0, 0);
                else {
                        envd_respond_error(c, "invalid_argument", "SendSignal takes SIGNAL_SIGKILL or SIGNAL_SIGTERM");
                        return;
                }
        } else if (streq(name, "Update")) {
                json_t *size = json_object_get(json_object_get(msg, "pty"), "size");

                if (!p->pty || !json_is_integer(json_object_get(size, "rows")) ||
                    !json_is_integer(json_object_get(size, "cols"))) {
                        envd_respond_error(c, "invalid_argument", "Update takes {process, pty: {size: {cols, rows}}} of a PTY");
                        return;
                }
                r = process_inbox(p, "resize", NULL, 0, (int) json_integer_value(json_object_get(size, "rows")),
                                  (int) json_integer_value(json_object_get(size, "cols")));
        } else {
                envd_respond_error(c, "unimplemented", "this call of the Process service is not served here");
                return;
        }
        if (r < 0)
                envd_respond_error(c, r == -ESRCH ? "not_found" : "internal", r == -ESRCH ? "the process ended" : "out of memory");
        else
                (void) http_conn_respond_json(c, 200, json_object());
}

typedef struct UnaryRequest {
        EnvdProcessApi *api;
        char name[32];
} UnaryRequest;

static void on_unary_request(HttpConn *c, void *data) {
        _cleanup_free_ UnaryRequest *q = data;
        json_error_t e;
        json_t *msg = c->body_oversized ? NULL :
                      json_loadb((const char *) buffer_data(&c->body), c->body.len, 0, &e);

        http_conn_detach_handler(c);
        if (!json_is_object(msg))
                envd_respond_error(c, "invalid_argument", "the request must be a JSON object");
        else
                unary(q->api, c, q->name, msg);
        json_decref(msg);
}

static void on_unary_closed(HttpConn *c, void *data) {
        free(data);
}

static const HttpHandler unary_handler = {
        .request = on_unary_request,
        .closed = on_unary_closed,
};

/* ---- routing -------------------------------------------------------------------------------- */

static void route(HttpConn *c, const char *path, void *userdata) {
        EnvdProcessApi *api = userdata;
        const char *name = path + strlen(PREFIX);
        char v[32];

        if (!rpc_request_token_ok(api->rpc, c->access_token, http_conn_bearer_token(c))) {
                envd_respond_error(c, "unauthenticated", "this runtime wants its token: X-Access-Token");
                return;
        }
        if (c->method != HTTP_METHOD_POST) {
                envd_respond_error(c, "unimplemented", "Connect calls are POSTs");
                return;
        }
        if (streq(name, "Start") || streq(name, "Connect")) {
                StreamRequest *q = calloc(1, sizeof(StreamRequest));

                if (!q) {
                        envd_respond_error(c, "internal", "out of memory");
                        return;
                }
                *q = (StreamRequest) { .api = api, .connect = streq(name, "Connect") };
                q->keepalive_usec = envd_keepalive_usec(c);
                if (http_conn_header(c, "Connect-Timeout-Ms", v, sizeof(v)) > 0)
                        q->timeout_ms = strtoull(v, NULL, 10);
                http_conn_set_handler(c, &stream_request_handler, q, PROCESS_BODY_MAX);
                return;
        }
        if (strlen(name) < sizeof(((UnaryRequest *) NULL)->name)) {
                UnaryRequest *q = calloc(1, sizeof(UnaryRequest));

                if (!q) {
                        envd_respond_error(c, "internal", "out of memory");
                        return;
                }
                q->api = api;
                strcpy(q->name, name);
                http_conn_set_handler(c, &unary_handler, q, PROCESS_BODY_MAX);
                return;
        }
        envd_respond_error(c, "unimplemented", "this call of the Process service is not served here");
}

int envd_process_api_new(Rpc *rpc, sd_event *event, HttpServer *http, EnvdProcessApi **ret) {
        EnvdProcessApi *api = calloc(1, sizeof(EnvdProcessApi));
        int r;

        if (!api)
                return -ENOMEM;
        *api = (EnvdProcessApi) { .rpc = rpc, .event = sd_event_ref(event) };
        r = http_server_add_route(http, PREFIX, route, api);
        if (r < 0) {
                sd_event_unref(api->event);
                free(api);
                return r;
        }
        *ret = api;
        return 0;
}

EnvdProcessApi *envd_process_api_free(EnvdProcessApi *api) {
        if (!api)
                return NULL;
        while (api->processes)
                process_free(api->processes);
        sd_event_unref(api->event);
        free(api);
        return NULL;
}

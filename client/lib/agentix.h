/* SPDX-License-Identifier: MIT */
#pragma once

/* agentix.h — libagentix, the C client of agentix-server. See agentix(3).
 *
 * A client connects to one runtime server (a sandbox) by URL and token, over WebSocket with a
 * fallback to HTTP long-polling, and makes remote calls: unary, stream or bidi. Many calls can
 * be in flight on one connection. A dropped connection is re-established behind the scenes
 * and every unfinished call is resumed (the server keeps results until they are acknowledged),
 * so no finished result is lost.
 *
 * Two ways to use it, freely mixed on one client:
 *  - blocking: agentix_call(), agentix_request_next(), the typed helpers (agentix_exec(), …)
 *    run the client's event loop until their answer is there;
 *  - event loop: give agentix_client_new() your sd_event and use the *_async() functions; the
 *    handlers run from that loop.
 * A client is not thread-safe: use it from one thread (its event loop's).
 *
 * Values are msgpack: arguments are passed as packed bytes (an array for positional args, a
 * map for keyword args), results come back as msgpack_object trees. The typed helpers for the
 * built-in modules (sandbox::exec, fs::*) take and return C types.
 *
 * Functions return 0 or a negative errno; when they take an agentix_error *, it is filled on
 * failure (may be NULL when you only want the errno). Initialize it with AGENTIX_ERROR_NULL:
 * a filled error is released (agentix_error_done()) before it is filled again. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <msgpack.h>
#include <systemd/sd-event.h>

#ifdef __cplusplus
extern "C" {
#endif

#define AGENTIX_API __attribute__((visibility("default")))

typedef struct agentix_client agentix_client;
typedef struct agentix_request agentix_request;

/* ---- errors ------------------------------------------------------------------------------ */

/* What went wrong, as a switchable value. The remote ones mirror the wire protocol's error
 * types; AGENTIX_E_REMOTE is an error a module raised (its type is in .type). */
typedef enum agentix_error_kind {
        AGENTIX_E_NONE = 0,
        AGENTIX_E_UNAUTHORIZED,       /* the token was refused */
        AGENTIX_E_BAD_REQUEST,
        AGENTIX_E_NO_SUCH_CALLABLE,
        AGENTIX_E_ARGUMENT,           /* ArgumentError: names the parameter */
        AGENTIX_E_CANCELLED,
        AGENTIX_E_DEADLINE_EXCEEDED,
        AGENTIX_E_WORKER_DIED,        /* .returncode: exit status or -signal */
        AGENTIX_E_RESULT_UNAVAILABLE,
        AGENTIX_E_MESSAGE_TOO_LARGE,
        AGENTIX_E_TOO_MANY_CALLS,
        AGENTIX_E_REMOTE,             /* raised by the called function: .type says what */
        AGENTIX_E_FILE,               /* an fs helper's per-file error: .type is the code
                                       * ("file_not_found", "permission_denied", …) */
        AGENTIX_E_CONNECTION,         /* cannot reach the server, or lost it for good */
        AGENTIX_E_TIMEOUT,            /* a client-side timeout (connect, or a blocking wait) */
        AGENTIX_E_PROTOCOL,           /* the server sent something this client cannot use */
        AGENTIX_E_INVALID,            /* a bad argument to a libagentix function */
        AGENTIX_E_OVERFLOW,           /* a bounded client-side queue is full (unread stream
                                       * items, calls waiting for a reconnect) */
        AGENTIX_E_SANDBOX,            /* agentd said no: .type is its error's name without
                                       * "org.agentix.Agentd1." (NoSuchSandbox, InvalidConfig,
                                       * ImageNotFound, BundleNotFound, BackendUnavailable,
                                       * StartFailed, TooManySandboxes, NotOwner) */
} agentix_error_kind;

typedef struct agentix_error {
        agentix_error_kind kind;
        int code;          /* the negative errno the function returned */
        char *type;        /* the wire type ("WorkerDied", "ValueError", "file_not_found", …) */
        char *message;     /* one line a person can act on */
        char *traceback;   /* may be NULL */
        bool cancelled;
        bool has_returncode;
        int returncode;
} agentix_error;

#define AGENTIX_ERROR_NULL ((agentix_error) { .kind = AGENTIX_E_NONE })

AGENTIX_API void agentix_error_done(agentix_error *e);
AGENTIX_API const char *agentix_error_kind_name(agentix_error_kind kind);

/* ---- clients ------------------------------------------------------------------------------ */

typedef enum agentix_transport {
        AGENTIX_TRANSPORT_AUTO = 0,   /* WebSocket, falling back to polling */
        AGENTIX_TRANSPORT_WEBSOCKET,
        AGENTIX_TRANSPORT_POLLING,
} agentix_transport;

typedef struct agentix_options {
        const char *url;                /* http://, ws://, https:// or wss://host:port (required) */
        const char *token;              /* NULL: none */
        agentix_transport transport;
        uint64_t connect_timeout_usec;  /* 0: 10 s */
        bool no_reconnect;              /* fail calls when the connection drops */
        uint64_t reconnect_timeout_usec;/* give up reconnecting after this; 0: 60 s */
        size_t max_message;             /* 0: 256 MiB */
        const char *ca_pem;             /* https://, wss://: the CA (PEM) the runtime's certificate
                                         * must chain to and name the URL's host, the only one
                                         * trusted (agentd's, agentix_manager_runtime_ca()); NULL:
                                         * the file $AGENTIX_CA_FILE names. Without either such a
                                         * URL fails with -ENOKEY. */
} agentix_options;

/* Create a client. event: the loop to run on, or NULL for a private one (blocking use). */
AGENTIX_API int agentix_client_new(const agentix_options *o, sd_event *event, agentix_client **ret);
/* The sandbox (its id) this client means to reach, from its next connection on: an https://
 * runtime's certificate must then name it (ID.sandbox.agentix) as well as the URL's address,
 * so that another sandbox's runtime on the same address (a swarm node's) is refused. Give it
 * whenever the id is known. NULL: the address alone. -EINVAL: not an id agentd makes. */
AGENTIX_API int agentix_client_set_sandbox_id(agentix_client *c, const char *id);
AGENTIX_API agentix_client *agentix_client_ref(agentix_client *c);
AGENTIX_API agentix_client *agentix_client_unref(agentix_client *c);

/* Connect and join /rpc. Blocking: returns once connected (or failed: a server that cannot be
 * reached or refuses the token is reported at once, not retried). Once connected, drops are
 * reconnected and the calls resumed behind the scenes. */
AGENTIX_API int agentix_client_connect(agentix_client *c, agentix_error *ret_error);
typedef void (*agentix_connect_handler)(agentix_client *c, const agentix_error *error, void *userdata);
AGENTIX_API int agentix_client_connect_async(agentix_client *c, agentix_connect_handler h, void *userdata);
AGENTIX_API bool agentix_client_is_connected(agentix_client *c);
/* The transport in use right now ("websocket", "polling"), or NULL. */
AGENTIX_API const char *agentix_client_transport(agentix_client *c);
/* Close the connection; calls in flight fail with AGENTIX_E_CONNECTION (on the server they
 * keep running: cancel them first if they should stop). Connecting again is allowed. */
AGENTIX_API void agentix_client_close(agentix_client *c);
AGENTIX_API sd_event *agentix_client_get_event(agentix_client *c);
/* Called once each time the connection is gone for good (not for drops that are reconnected
 * behind the scenes): the server refused the token, reconnecting gave up, or close. */
typedef void (*agentix_disconnect_handler)(agentix_client *c, const agentix_error *error, void *userdata);
AGENTIX_API void agentix_client_set_disconnect_handler(agentix_client *c, agentix_disconnect_handler h,
                                                       void *userdata);

/* ---- calls -------------------------------------------------------------------------------- */

typedef enum agentix_call_shape {
        AGENTIX_CALL_UNARY = 0,
        AGENTIX_CALL_STREAM = 1,
        AGENTIX_CALL_BIDI = 2,
} agentix_call_shape;

typedef struct agentix_call_options {
        agentix_call_shape shape;
        uint64_t deadline_ms;   /* 0: none; enforced by the server (DeadlineExceeded) */
        const char *call_id;    /* NULL: a fresh random one */
} agentix_call_options;

/* A call's arguments: msgpack-packed bytes of an array (args) and a map (kwargs); NULL/0 for
 * none. */
typedef struct agentix_args {
        const void *args;
        size_t args_size;
        const void *kwargs;
        size_t kwargs_size;
} agentix_args;

/* Blocking unary call. On success *ret_result holds the value (msgpack_unpacked_destroy() it). */
AGENTIX_API int agentix_call(agentix_client *c, const char *callable, const agentix_args *args,
                             const agentix_call_options *o, msgpack_unpacked *ret_result, agentix_error *ret_error);

/* Start a call of any shape (o->shape; NULL o: unary) for blocking use: read its items with
 * agentix_request_next() (a unary call yields its result as the one item). Other requests
 * may be started meanwhile; their answers are kept until read (bounded: AGENTIX_E_OVERFLOW). */
AGENTIX_API int agentix_call_start(agentix_client *c, const char *callable, const agentix_args *args,
                                   const agentix_call_options *o, agentix_request **ret);

/* Next item: 1 with *ret_item set (msgpack_unpacked_destroy() it), 0 at the end of the stream,
 * or a negative errno with *ret_error (the call's error, again on every later call;
 * -ETIMEDOUT/AGENTIX_E_TIMEOUT when timeout_usec passed first: the call goes on).
 * timeout_usec: 0 waits forever. */
AGENTIX_API int agentix_request_next(agentix_request *r, msgpack_unpacked *ret_item, uint64_t timeout_usec,
                                     agentix_error *ret_error);

typedef struct agentix_request_handlers {
        /* One stream/bidi item; the value lives until the handler returns. */
        void (*item)(agentix_request *r, const msgpack_object *value, void *userdata);
        /* Exactly once: the unary result (NULL for stream/bidi), or the error. */
        void (*done)(agentix_request *r, const msgpack_object *result, const agentix_error *error, void *userdata);
} agentix_request_handlers;

/* Event-loop call of any shape. The request stays valid until unref'd (done has run or not);
 * ret may be NULL. Dropping your reference does not stop the call: the handlers still run
 * until done (cancel to stop it). A request without handlers (agentix_call_start()) is
 * cancelled when its last reference is dropped before its end. */
AGENTIX_API int agentix_call_async(agentix_client *c, const char *callable, const agentix_args *args,
                                   const agentix_call_options *o, const agentix_request_handlers *h, void *userdata,
                                   agentix_request **ret);

/* Bidi inbox: one msgpack-packed item; then close it (the end goes out behind every item sent
 * before). Flow control: the server's inbox holds 64 items per call, so at most that many are
 * sent unacknowledged (and 16 MiB); the server says when the function has taken them. Items
 * beyond that wait in the client, up to 64 more (16 MiB). When those are full too, a request
 * started with agentix_call_start() waits (running the loop); one started with
 * agentix_call_async() (or any call from inside a handler) gets -EAGAIN, nothing is queued,
 * and the writable handler runs once that item would fit. Sent items are kept until taken
 * and sent again after a reconnect: none is lost or doubled. */
AGENTIX_API int agentix_request_send(agentix_request *r, const void *item, size_t item_size);
AGENTIX_API int agentix_request_close_inbox(agentix_request *r);
/* An item that goes ahead of the items still waiting in the client (not of those already sent)
 * and may use a few slots of the window that are kept for such items: a signal, a resize.
 * At most 64 KiB (-EMSGSIZE); -EAGAIN when 16 urgent items wait already. */
AGENTIX_API int agentix_request_send_urgent(agentix_request *r, const void *item, size_t item_size);
/* Called from the loop when a send that said -EAGAIN would now succeed (at most once per
 * -EAGAIN). NULL: none. */
typedef void (*agentix_writable_handler)(agentix_request *r, void *userdata);
AGENTIX_API void agentix_request_set_writable_handler(agentix_request *r, agentix_writable_handler h,
                                                      void *userdata);
/* Cancel: the call ends with AGENTIX_E_CANCELLED (or its result, if that came first). A call
 * not sent yet, or cancelled while the connection is down, ends at once: done may run before
 * this returns. */
AGENTIX_API int agentix_request_cancel(agentix_request *r);
AGENTIX_API const char *agentix_request_id(agentix_request *r);
AGENTIX_API bool agentix_request_is_done(agentix_request *r);
AGENTIX_API agentix_request *agentix_request_ref(agentix_request *r);
AGENTIX_API agentix_request *agentix_request_unref(agentix_request *r);

/* Run the client's loop until `r` is done (0) or timeout_usec (0: none) passes (-ETIMEDOUT),
 * for blocking callers that started several requests. Like every blocking function it runs
 * the loop itself, so it must not be called from inside one of the loop's handlers (-EBUSY). */
AGENTIX_API int agentix_request_wait(agentix_request *r, uint64_t timeout_usec);

/* ---- typed helpers for the built-in modules (blocking) ------------------------------------ */

typedef struct agentix_exec_options {
        const char *cwd;                /* NULL: the worker's */
        const char *const *env;         /* "KEY=VALUE" (a bare "KEY" unsets), NULL-terminated */
        const void *stdin_data;
        size_t stdin_size;
        double timeout_sec;             /* 0: the server's default (1800 s); < 0: none */
        size_t max_output;              /* 0: the server's default (10 MiB) */
        uint64_t deadline_ms;
} agentix_exec_options;

typedef struct agentix_exec_result {
        int exit_code;
        char *output;                   /* stdout + stderr, NUL-terminated, valid UTF-8 */
        size_t output_size;
        bool truncated;
        bool timed_out;
} agentix_exec_result;

AGENTIX_API int agentix_exec(agentix_client *c, const char *command, const agentix_exec_options *o,
                             agentix_exec_result *ret, agentix_error *ret_error);
AGENTIX_API void agentix_exec_result_done(agentix_exec_result *r);

/* Persistent shell sessions (shell::, agentix-server(8)): one bash in the sandbox whose working
 * directory, variables, functions and background jobs stay between runs. */
typedef struct agentix_shell_options {
        const char *cwd;                /* NULL: the worker's */
        const char *const *env;         /* "KEY=VALUE" (a bare "KEY" unsets), NULL-terminated */
        const char *name;               /* the session's id (letters, digits, _.-); NULL: a made-up one */
} agentix_shell_options;

typedef struct agentix_shell_result {
        int exit_code;                  /* the command's status; -1 when the shell ended without one */
        char *output;                   /* stdout + stderr as they came, NUL-terminated, valid UTF-8 */
        size_t output_size;
        bool timed_out;                 /* interrupted at the timeout (the session goes on) */
        bool truncated;
        bool ended;                     /* the session is over (`exit`) */
} agentix_shell_result;

/* Open a session; *ret_id (free() it) names it in the other calls. */
AGENTIX_API int agentix_shell_open(agentix_client *c, const agentix_shell_options *o, char **ret_id,
                                   agentix_error *ret_error);
/* Run one or more lines in it; timeout_sec > 0: interrupted then (and killed if it does not
 * stop). A second run while one is in progress fails with type "SessionBusy". */
AGENTIX_API int agentix_shell_run(agentix_client *c, const char *id, const char *command, double timeout_sec,
                                  agentix_shell_result *ret, agentix_error *ret_error);
AGENTIX_API void agentix_shell_result_done(agentix_shell_result *r);
/* Bytes to the running command's input; ^C to it; end the session (type "SessionNotFound" for
 * one that is not open). */
AGENTIX_API int agentix_shell_input(agentix_client *c, const char *id, const void *data, size_t size,
                                    agentix_error *ret_error);
AGENTIX_API int agentix_shell_interrupt(agentix_client *c, const char *id, agentix_error *ret_error);
AGENTIX_API int agentix_shell_close(agentix_client *c, const char *id, agentix_error *ret_error);

/* Code contexts (code::, agentix-server(8)): Jupyter kernels in the sandbox whose variables,
 * imports and figures stay between runs. */
typedef struct agentix_code_context_options {
        const char *language;           /* a kernelspec's name or language; NULL: python */
        const char *cwd;                /* NULL: the worker's */
        const char *const *env;         /* "KEY=VALUE" (a bare "KEY" unsets), NULL-terminated */
} agentix_code_context_options;

/* Start a context's kernel; *ret_id (free() it) names it in the other calls. */
AGENTIX_API int agentix_code_create_context(agentix_client *c, const agentix_code_context_options *o, char **ret_id,
                                            agentix_error *ret_error);

typedef enum agentix_code_item_type {
        AGENTIX_CODE_STDOUT,
        AGENTIX_CODE_STDERR,
        AGENTIX_CODE_RESULT,            /* a value or a display: its MIME bundle */
        AGENTIX_CODE_ERROR,             /* an exception: name, value, traceback */
        AGENTIX_CODE_EXECUTION_COUNT,
} agentix_code_item_type;

typedef struct agentix_code_data {
        char *mime;                     /* "text/plain", "image/png", "application/json", … */
        char *data;                     /* text (NUL-terminated) or bytes (image/png, …); NULL for a
                                         * JSON value (application/json, …+json): see value */
        size_t size;
        msgpack_object value;           /* the value as sent */
} agentix_code_data;

typedef struct agentix_code_item {
        agentix_code_item_type type;
        char *text;                     /* stdout, stderr: the text; error: its value */
        size_t text_size;
        agentix_code_data *data;        /* result: the MIME bundle */
        size_t n_data;
        bool is_main_result;            /* result: the value of the last line (not a display) */
        char *name;                     /* error: the exception's class */
        char *traceback;                /* error: lines joined with '\n' (may be empty) */
        int64_t execution_count;        /* execution_count; result: or -1 */
        bool truncated;                 /* stderr: the run's output reached max_output */
        msgpack_unpacked raw;           /* the item as received (data[].value points into it) */
} agentix_code_item;

/* One item of code::run's stream (from agentix_request_next()) as a C struct. */
AGENTIX_API int agentix_code_item_parse(const msgpack_object *value, agentix_code_item *ret, agentix_error *ret_error);
AGENTIX_API void agentix_code_item_done(agentix_code_item *item);
/* The bundle entry for mime in a result item, or NULL. */
AGENTIX_API const agentix_code_data *agentix_code_item_get(const agentix_code_item *item, const char *mime);

typedef struct agentix_code_run_options {
        const char *context;            /* NULL: the language's default context (made on first use) */
        const char *language;           /* without a context; NULL: python */
        const char *const *env;         /* for this run only (python kernels) */
        double timeout_sec;             /* 0: none; then ^C, and the context keeps its state */
        size_t max_output;              /* 0: the server's default (16 MiB) */
} agentix_code_run_options;

/* Called for each item, in order; the item lives until the handler returns. A negative return
 * cancels the run (the kernel gets ^C) and is what agentix_code_run() returns. */
typedef int (*agentix_code_item_handler)(const agentix_code_item *item, void *userdata);

/* Run code and wait for its end. An exception in the code is an AGENTIX_CODE_ERROR item, not a
 * failure; failures are the call's (type "ContextNotFound", "KernelNotFound", "ContextBusy", …). */
AGENTIX_API int agentix_code_run(agentix_client *c, const char *code, const agentix_code_run_options *o,
                                 agentix_code_item_handler h, void *userdata, agentix_error *ret_error);
/* The same on the client's event loop (agentix_call_async()): h->item gets each item's value
 * (agentix_code_item_parse() it), h->done the end; agentix_request_cancel() stops the run. */
AGENTIX_API int agentix_code_run_async(agentix_client *c, const char *code, const agentix_code_run_options *o,
                                       const agentix_request_handlers *h, void *userdata, agentix_request **ret,
                                       agentix_error *ret_error);
/* ^C to the context's run; a fresh kernel (state gone); end the context and its kernel. */
AGENTIX_API int agentix_code_interrupt(agentix_client *c, const char *context, agentix_error *ret_error);
AGENTIX_API int agentix_code_restart(agentix_client *c, const char *context, agentix_error *ret_error);
AGENTIX_API int agentix_code_delete_context(agentix_client *c, const char *context, agentix_error *ret_error);

typedef struct agentix_file {
        const char *path;
        const void *data;
        size_t size;
} agentix_file;

/* Per-file outcome of a batch: error is NULL or the code ("file_not_found", …). */
typedef struct agentix_file_result {
        char *path;
        void *content;                  /* download only */
        size_t size;
        char *error;
        char *message;
} agentix_file_result;

AGENTIX_API int agentix_upload(agentix_client *c, const agentix_file *files, size_t n_files,
                               agentix_file_result **ret_results, agentix_error *ret_error);
AGENTIX_API int agentix_download(agentix_client *c, const char *const *paths, size_t n_paths,
                                 agentix_file_result **ret_results, agentix_error *ret_error);
AGENTIX_API void agentix_file_results_free(agentix_file_result *r, size_t n);

typedef struct agentix_read_result {
        char *content;                  /* numbered lines (cat -n style), or NULL for binary */
        void *data;                     /* binary files: the bytes */
        size_t data_size;
        int64_t total_lines;            /* -1 when unknown */
        int64_t start_line, end_line;
        int64_t next_offset;            /* -1 at the end of the file */
        bool truncated;
        size_t content_size;            /* bytes in content (it may hold NUL bytes) */
        char *message;                  /* e.g. the empty-file reminder; may be NULL */
} agentix_read_result;

/* Single-file operations: an fs error (file_not_found, …) is returned as AGENTIX_E_FILE. */
AGENTIX_API int agentix_read(agentix_client *c, const char *path, int64_t offset, int64_t limit,
                             agentix_read_result *ret, agentix_error *ret_error);
AGENTIX_API void agentix_read_result_done(agentix_read_result *r);
AGENTIX_API int agentix_write(agentix_client *c, const char *path, const void *content, size_t size, bool overwrite,
                              agentix_error *ret_error);
AGENTIX_API int agentix_edit(agentix_client *c, const char *path, const char *old_text, const char *new_text,
                             bool replace_all, unsigned *ret_occurrences, agentix_error *ret_error);

typedef struct agentix_entry {
        char *path;
        bool is_dir;
        uint64_t size;
        char *modified_at;              /* ISO 8601 UTC */
        int mode;                       /* permission bits (07777), -1 when the server does not say */
} agentix_entry;

typedef struct agentix_entries {
        agentix_entry *entries;
        size_t n_entries;
        bool truncated;
} agentix_entries;

AGENTIX_API int agentix_ls(agentix_client *c, const char *path, agentix_entries *ret, agentix_error *ret_error);
/* glob(pattern, path): matching regular files and directories (is_dir), sorted by path. */
AGENTIX_API int agentix_glob(agentix_client *c, const char *pattern, const char *path, agentix_entries *ret,
                             agentix_error *ret_error);
AGENTIX_API void agentix_entries_done(agentix_entries *e);

typedef struct agentix_match {
        char *path;
        uint64_t line;
        char *text;
} agentix_match;

typedef struct agentix_matches {
        agentix_match *matches;
        size_t n_matches;
        bool truncated;
} agentix_matches;

/* Literal search; path/glob may be NULL, max_count < 0 for no limit. */
AGENTIX_API int agentix_grep(agentix_client *c, const char *pattern, const char *path, const char *glob,
                             int64_t max_count, agentix_matches *ret, agentix_error *ret_error);
AGENTIX_API void agentix_matches_done(agentix_matches *m);

/* ---- sandboxes, through agentd on D-Bus ----------------------------------------------------
 *
 * Blocking calls to agentd (org.agentix.Agentd1(5)): create a sandbox, list, look at and
 * delete sandboxes, and get a sandbox's runtime URL and token to give agentix_client_new().
 * The caller's uid owns what it creates. */

typedef struct agentix_manager agentix_manager;

/* Connect to agentd on the system bus ($DBUS_SYSTEM_BUS_ADDRESS honoured), or on the session
 * bus when user is true. AGENTIX_E_CONNECTION when the bus cannot be reached. */
AGENTIX_API int agentix_manager_open(bool user, agentix_manager **ret, agentix_error *ret_error);
AGENTIX_API agentix_manager *agentix_manager_free(agentix_manager *m);

typedef struct agentix_sandbox_config {
        const char *image;              /* the task image (required) */
        const char *bundle;             /* the bundle image (required) */
        const char *platform;           /* NULL: the image's */
        const char *backend;            /* NULL: docker */
        const char *network;            /* NULL: agentd's isolated network */
        const char *workdir;            /* NULL: the image's */
        const char *setup;              /* a command run once before the create returns */
        const char *const *env;         /* "NAME=VALUE", NULL-terminated; NULL: none */
        const char *const *labels;      /* "key=value", NULL-terminated; NULL: none */
        uint64_t ttl_sec;               /* 0: agentd's default */
        double cpus;                    /* 0: agentd's default */
        uint64_t memory;                /* bytes; 0: agentd's default */
        uint64_t pids;                  /* 0: agentd's default */
        bool bind_to_caller;            /* delete it when this connection to the bus closes */
        const char *runtime;            /* the OCI runtime: "runc", "runsc" (gVisor); NULL: agentd's default */
        bool read_only;                 /* a read-only root; /tmp and the workdir writable */
        const char *user;               /* USER[:GROUP] the runtime and its commands run as; NULL: root */
        /* CIDRs it may reach ("10.0.0.0/8", "2001:db8::/32"), NULL-terminated; an empty list
         * (a NULL first) is no network at all, the runtime still answering; NULL: no egress
         * list (agentd's isolated network: no host, no private ranges, the rest of the world). */
        const char *const *egress;
        uint64_t timeout_usec;          /* how long to wait for the create; 0: 120 s */
} agentix_sandbox_config;

/* Create a sandbox; returns once its runtime answers. *ret_id: its id (free() it). */
AGENTIX_API int agentix_sandbox_create(agentix_manager *m, const agentix_sandbox_config *c, char **ret_id,
                                       agentix_error *ret_error);
/* Remove the sandbox's container and the sandbox; returns once it is gone. */
AGENTIX_API int agentix_sandbox_delete(agentix_manager *m, const char *id, agentix_error *ret_error);
/* Move its expiry later by seconds. */
AGENTIX_API int agentix_sandbox_extend(agentix_manager *m, const char *id, uint64_t seconds, agentix_error *ret_error);
/* The last `lines` lines its runtime wrote (1 to 100000; owner or root only). free() it. */
AGENTIX_API int agentix_sandbox_logs(agentix_manager *m, const char *id, uint64_t lines, char **ret_text,
                                     agentix_error *ret_error);
/* Freeze every process of the sandbox (its state becomes "paused"; calls to its runtime wait),
 * and thaw them. Either on a sandbox in that state already is success. Owner or root only. */
AGENTIX_API int agentix_sandbox_pause(agentix_manager *m, const char *id, agentix_error *ret_error);
AGENTIX_API int agentix_sandbox_resume(agentix_manager *m, const char *id, agentix_error *ret_error);
/* Save its processes, memory and files to disk and stop it (state "hibernated": it holds no
 * memory); agentix_sandbox_resume() runs it again from there, its runtime URL perhaps changed
 * (clients reconnect). gVisor (runtime runsc) sandboxes only: others fail NotSupported. A TCP
 * connection into or out of the sandbox that is open fails it with CheckpointFailed naming
 * it, the sandbox running on untouched. Owner or root only. */
AGENTIX_API int agentix_sandbox_hibernate(agentix_manager *m, const char *id, agentix_error *ret_error);
/* Its filesystem (not the bundle, not its token) as an image a create can name: *ret_image
 * (free() it). tag: REPOSITORY[:TAG], or NULL for agentix-snapshot/<id>:<n>. */
AGENTIX_API int agentix_sandbox_snapshot(agentix_manager *m, const char *id, const char *tag, char **ret_image,
                                         agentix_error *ret_error);
/* A port inside the sandbox through its runtime's proxy: *ret_url (http://HOST:PORT/proxy/N/)
 * takes *ret_token as `Authorization: Bearer`, or once as ?agentix_token= (a browser then has
 * it as a cookie). Owner or root only. free() both. */
AGENTIX_API int agentix_sandbox_port_url(agentix_manager *m, const char *id, uint16_t port, char **ret_url,
                                         char **ret_token, agentix_error *ret_error);
/* The runtime's URL and token (owner or root only): what agentix_options wants. free() both. */
/* agentd's runtime CA (Manager.RuntimeCA, PEM; malloc'ed): what agentix_options.ca_pem wants for
 * an https:// runtime URL. -ENOKEY when agentd has none (TLS=no). */
AGENTIX_API int agentix_manager_runtime_ca(agentix_manager *m, char **ret_pem, agentix_error *ret_error);
AGENTIX_API int agentix_sandbox_access(agentix_manager *m, const char *id, char **ret_url, char **ret_token,
                                       agentix_error *ret_error);

/* What a sandbox uses now (Sandbox.GetStats; owner or root only). A number agentd's backend
 * cannot tell is AGENTIX_STATS_UNKNOWN; memory_limit is that also when there is no limit. */
#define AGENTIX_STATS_UNKNOWN UINT64_MAX
typedef struct agentix_stats {
        uint64_t time_usec;             /* when read, since the epoch */
        uint64_t cpu_usec;              /* CPU time used since it started */
        double cpu_percent;             /* since the last reading (or since it was made): 100 = one CPU */
        uint64_t memory_current, memory_peak, memory_limit; /* bytes (page cache included) */
        uint64_t pids_current, pids_limit;
        uint64_t net_rx_bytes, net_tx_bytes;
        uint64_t io_read_bytes, io_write_bytes;
} agentix_stats;
AGENTIX_API int agentix_sandbox_stats(agentix_manager *m, const char *id, agentix_stats *ret,
                                      agentix_error *ret_error);

typedef struct agentix_sandbox_info {
        char *id, *backend, *image, *bundle, *platform, *state, *runtime_url, *container_id, *path;
        uint32_t owner;                 /* uid */
        uint64_t created_at_usec, expires_at_usec; /* since the epoch */
        char *pool;                     /* the warm pool it was claimed from, "" when made for the create */
} agentix_sandbox_info;

AGENTIX_API int agentix_sandbox_get(agentix_manager *m, const char *id, agentix_sandbox_info *ret,
                                    agentix_error *ret_error);
/* Every sandbox agentd shows the caller. */
AGENTIX_API int agentix_sandbox_list(agentix_manager *m, agentix_sandbox_info **ret, size_t *ret_n,
                                     agentix_error *ret_error);
AGENTIX_API void agentix_sandbox_info_done(agentix_sandbox_info *i);
AGENTIX_API void agentix_sandbox_list_free(agentix_sandbox_info *l, size_t n);

/* agentd's warm pools (pools.d/NAME.pool): how many sandboxes each has ready, of its Size=. */
typedef struct agentix_pool_info {
        char *name;
        uint32_t ready, size;
        char *error;                    /* why it cannot make sandboxes now, or NULL */
} agentix_pool_info;

AGENTIX_API int agentix_pool_list(agentix_manager *m, agentix_pool_info **ret, size_t *ret_n, agentix_error *ret_error);
AGENTIX_API void agentix_pool_list_free(agentix_pool_info *l, size_t n);

/* A user's usage and quotas (Manager.GetUsage, GetUsageOf): the caller's (uid AGENTIX_CALLER),
 * or (root only) uid's. A quota
 * that is not set, and snapshots when no backend could count them, are AGENTIX_STATS_UNKNOWN
 * (max_cpus: 0). */
#define AGENTIX_CALLER ((int64_t) -1)
typedef struct agentix_usage {
        uint32_t uid;
        uint64_t sandboxes;
        double cpus;
        uint64_t memory;                /* bytes: the sum of the sandboxes' memory limits */
        uint64_t snapshots;
        uint64_t max_sandboxes;
        double max_cpus;
        uint64_t max_memory;
        uint64_t max_snapshots;
} agentix_usage;
AGENTIX_API int agentix_usage_get(agentix_manager *m, int64_t uid, agentix_usage *ret, agentix_error *ret_error);

/* Snapshots (agentix_sandbox_snapshot()): the caller's, root's list has everyone's. */
typedef struct agentix_snapshot_info {
        char *image;                    /* what a create names as its image */
        char *sandbox_id;               /* the sandbox it was taken of */
        uint32_t owner;                 /* uid */
        uint64_t created_at;            /* unix time, seconds */
        uint64_t size;                  /* bytes, with its base image */
} agentix_snapshot_info;

AGENTIX_API int agentix_snapshot_list(agentix_manager *m, agentix_snapshot_info **ret, size_t *ret_n,
                                      agentix_error *ret_error);
AGENTIX_API void agentix_snapshot_list_free(agentix_snapshot_info *l, size_t n);
/* Remove a snapshot image (not while a sandbox runs from it). */
AGENTIX_API int agentix_snapshot_delete(agentix_manager *m, const char *image, agentix_error *ret_error);

#ifdef __cplusplus
}
#endif

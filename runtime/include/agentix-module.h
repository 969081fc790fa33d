/* SPDX-License-Identifier: MIT */
#pragma once

/* agentix-module.h — the interface between the agentix worker and the functions it runs.
 *
 * A module is a shared object in the module directory (default
 * /nix/runtime/lib/agentix/modules, AGENTIX_MODULE_DIR overrides) that exports one symbol,
 * `agentix_module_v1`, describing its functions. The built-in modules `sandbox` and `fs` use
 * the same table, compiled into the worker. See agentix-module(3).
 *
 * A callable is addressed as "module::function". Before a function runs, the worker binds the
 * call's positional and keyword arguments to the function's signature, fills in defaults and
 * checks types; a mismatch fails the call with ArgumentError naming the parameter. So the
 * function receives exactly one msgpack_object per declared parameter, in declaration order.
 *
 * Signature grammar (a Python-like subset):
 *
 *   signature := "(" [ param { "," param } ] ")" [ "->" type ]
 *   param     := name ":" type [ "=" default ]
 *   type      := alt { "|" alt } [ "?" ]            "?" (or a None default) also admits nil
 *   alt       := "str" | "bytes" | "int" | "float" | "bool" | "map" | "any" | "none"
 *              | "list" [ "[" type "]" ]
 *   default   := "None" | "True" | "False" | integer | float | '"' chars '"' | "[]" | "{}"
 *
 *   e.g. "(path: str, offset: int = 0, limit: int = 2000) -> map"
 *
 * An int argument is accepted where float is expected. Every function runs on its own thread,
 * so functions must be thread-safe; concurrent calls never wait for each other.
 */

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <msgpack.h>

#ifdef __cplusplus
extern "C" {
#endif

#define AGENTIX_MODULE_ABI 1

/* The worker exports these functions to modules it dlopen()s. */
#define AGENTIX_EXPORT __attribute__((visibility("default")))

typedef struct agentix_call agentix_call;

typedef enum agentix_shape {
        AGENTIX_SHAPE_UNARY = 0,  /* one result */
        AGENTIX_SHAPE_STREAM = 1, /* zero or more items, then end */
        AGENTIX_SHAPE_BIDI = 2,   /* like stream, plus an inbox of items from the caller */
} agentix_shape;

/* Return 0 on success. On failure return agentix_call_raise(...) (a typed error) or a negative
 * errno (reported as type "OSError" with strerror's text). */
typedef int (*agentix_function_impl)(agentix_call *call, const msgpack_object *argv, size_t argc);

/* agentix_function.flags */
enum {
        /* The function is quick and never blocks (no I/O waits, no sleeping, no inbox): the
         * worker runs it on its reader thread instead of handing it to a call thread, which
         * saves a thread wake-up each way. Unary functions only; ignored for other shapes.
         * A slow function marked inline delays every other call: mark only what returns in
         * microseconds. */
        AGENTIX_FUNCTION_INLINE = 1u << 0,
        /* Calls start in the order they arrived (among the calls of every ORDERED function):
         * each waits to start until the one before it called agentix_call_let_next_start() or
         * returned. For functions that queue their calls, so that a client's burst is served
         * in the order it was sent: take the place in the queue, then let the next start. The
         * time before that holds up every later ORDERED call: keep it short, never blocking. */
        AGENTIX_FUNCTION_ORDERED = 1u << 1,
};

typedef struct agentix_function {
        const char *name;       /* function name, [A-Za-z_][A-Za-z0-9_]* */
        agentix_shape shape;
        const char *signature;  /* see grammar above */
        agentix_function_impl impl;
        const char *doc;        /* one line, optional */
        unsigned flags;         /* AGENTIX_FUNCTION_*, 0 for none */
} agentix_function;

typedef struct agentix_module {
        unsigned abi;                       /* AGENTIX_MODULE_ABI */
        const char *name;                   /* must equal the file name without ".so" */
        const char *doc;                    /* optional */
        const agentix_function *functions;  /* terminated by an entry whose name is NULL */
        int (*init)(void);                  /* optional; runs once, after loading; <0 fails the load */
} agentix_module;

/* Define the exported descriptor of a module:
 *   AGENTIX_MODULE(.name = "example", .functions = example_functions); */
#define AGENTIX_MODULE(...)                                                             \
        __attribute__((visibility("default"))) const agentix_module agentix_module_v1 = { \
                .abi = AGENTIX_MODULE_ABI, __VA_ARGS__                                  \
        }
#define AGENTIX_MODULE_SYMBOL "agentix_module_v1"

/* ---- results ---------------------------------------------------------------------------- */

/* Unary: pack exactly one value into this packer and return 0. Packing nothing sends nil. */
AGENTIX_EXPORT msgpack_packer *agentix_call_result(agentix_call *call);

/* Stream and bidi: pack exactly one value between begin and end; end sends it. Returns 0, or
 * -ECANCELED once the call was cancelled, its deadline passed or the worker is shutting down
 * (the item is dropped: stop producing and return). Returning 0 from the function ends the
 * stream.
 *
 * Flow control: a call may have a window of a few MiB of items on their way to a client that
 * has not taken them yet. While the window is full, end waits (before sending) until the
 * client has read enough — a function that produces faster than the client reads is slowed
 * down to the client's pace, and the server never buffers more than the window per call.
 * While no client is attached (it reconnects and resumes later) the call simply waits. The
 * wait ends with -ECANCELED as above. One item may overshoot the window. */
AGENTIX_EXPORT msgpack_packer *agentix_call_item_begin(agentix_call *call);
AGENTIX_EXPORT int agentix_call_item_end(agentix_call *call);

/* For functions that wait on several things in one poll() (a child's pipes, the inbox, the
 * clock) and so must not block in agentix_call_item_end(): after
 * agentix_call_set_output_blocking(call, false), end never waits; the function paces itself
 * instead — it produces only while agentix_call_output_ready() is true, and otherwise polls
 * agentix_call_output_fd() (POLLIN: the window has room again, or the call was cancelled, or
 * its deadline passed). A function that ignores the window is not stopped, but a client that
 * does not read then makes the server drop the connection. Unary calls have no window
 * (always ready). Do not read or close the fd. */
AGENTIX_EXPORT void agentix_call_set_output_blocking(agentix_call *call, bool blocking);
AGENTIX_EXPORT bool agentix_call_output_ready(agentix_call *call);
AGENTIX_EXPORT int agentix_call_output_fd(agentix_call *call);

/* Pack `size` bytes read from `fd` as one msgpack bin value, reading straight into the
 * outgoing frame (no intermediate copy). If the file yields fewer bytes (it shrank) or a read
 * fails, the rest is zero-filled, so what was packed stays well-formed, and -EIO (short) or
 * the read's error is returned: report that content as invalid. -EMSGSIZE and -ENOMEM are
 * fatal for the result. */
AGENTIX_EXPORT int agentix_pack_bin_from_fd(msgpack_packer *pk, int fd, size_t size);

/* Fail the call with an error of the given type ("ValueError", "FileNotFoundError", …).
 * Returns a negative value to be returned from the function:
 *     return agentix_call_raise(call, "ValueError", "bad mode %d", mode); */
AGENTIX_EXPORT int agentix_call_raise(agentix_call *call, const char *type, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));
AGENTIX_EXPORT int agentix_call_raisev(agentix_call *call, const char *type, const char *fmt, va_list ap);

/* ---- cancellation and the bidi inbox ------------------------------------------------------ */

/* True once the caller cancelled, the deadline passed or the server is shutting down. */
AGENTIX_EXPORT bool agentix_call_cancelled(agentix_call *call);

/* Next inbox item of a bidi call. Waits up to timeout_ms (-1 = forever, 0 = poll).
 * Returns 1 with *ret_item set (valid until the next agentix_call_inbox_next() or the end of
 * the function), 0 when the caller closed the inbox, -ETIMEDOUT, or -ECANCELED. */
AGENTIX_EXPORT int agentix_call_inbox_next(agentix_call *call, msgpack_object *ret_item, int timeout_ms);

/* The next inbox item only if the caller marked it urgent (call:in with urgent: true: a
 * signal, a terminal resize). Urgent items are queued ahead of the ordinary ones, so a function
 * that cannot take ordinary input right now (its own buffer is full) can still act on them.
 * Never waits: 1 with *ret_item set (valid as for agentix_call_inbox_next()), -ETIMEDOUT when
 * no urgent item is next, -ECANCELED. */
AGENTIX_EXPORT int agentix_call_inbox_next_urgent(agentix_call *call, msgpack_object *ret_item);

/* A file descriptor that polls readable (POLLIN) while agentix_call_inbox_next(…, 0) would
 * return something other than -ETIMEDOUT, or the call is cancelled (or its deadline passed).
 * Unary and stream calls have no inbox: for them it polls readable only on cancellation.
 * Lets a function wait on its own fds (child pipes), the inbox and cancellation in one
 * poll(). Do not read or close it. */
AGENTIX_EXPORT int agentix_call_wait_fd(agentix_call *call);

/* AGENTIX_FUNCTION_ORDERED: this call has its place; the next ORDERED call may start. Once is
 * enough; later calls (and calls for other functions) do nothing. */
AGENTIX_EXPORT void agentix_call_let_next_start(agentix_call *call);

/* ---- metadata ---------------------------------------------------------------------------- */

AGENTIX_EXPORT const char *agentix_call_id(agentix_call *call);
AGENTIX_EXPORT agentix_shape agentix_call_shape(agentix_call *call);
/* Milliseconds left until the call's deadline, or -1 if it has none. */
AGENTIX_EXPORT int64_t agentix_call_remaining_ms(agentix_call *call);

/* ---- small helpers for reading arguments ---------------------------------------------------- */

static inline bool agentix_arg_is_nil(const msgpack_object *o) {
        return o->type == MSGPACK_OBJECT_NIL;
}

/* Copy a str/bin argument into a malloc()ed NUL-terminated string; NULL for nil. Sets errno
 * to ENOMEM or EINVAL (embedded NUL) on failure. */
AGENTIX_EXPORT char *agentix_arg_strdup(const msgpack_object *o);

/* Look up a key in a map object; NULL when absent or when o is not a map. */
AGENTIX_EXPORT const msgpack_object *agentix_map_get(const msgpack_object *o, const char *key);

/* Pack a NUL-terminated string (nil for NULL). */
AGENTIX_EXPORT int agentix_pack_cstr(msgpack_packer *pk, const char *s);
/* Pack "key" then a string value / int / bool; for building result maps. */
AGENTIX_EXPORT int agentix_pack_kv_str(msgpack_packer *pk, const char *key, const char *value);
AGENTIX_EXPORT int agentix_pack_kv_int(msgpack_packer *pk, const char *key, int64_t value);
AGENTIX_EXPORT int agentix_pack_kv_bool(msgpack_packer *pk, const char *key, bool value);

#ifdef __cplusplus
}
#endif

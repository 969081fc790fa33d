/* SPDX-License-Identifier: MIT */
#pragma once

/* A test harness for the worker: runs worker_main() in a forked child on one end of a
 * socketpair and lets a test talk frames to it, with values written as JSON text (or as raw
 * msgpack when a test needs bin values). Test-only; link `worker_harness_dep`.
 *
 *   _cleanup_(worker_harness_freep) WorkerHarness *h = NULL;
 *   _cleanup_(worker_frame_done) WorkerFrame f = {};
 *   assert(worker_harness_start(&(WorkerOptions) { .module_dir = DIR }, &h) >= 0);
 *   assert(worker_harness_call(h, "c1", "testmod::echo", "unary", "[42]", NULL, -1) >= 0);
 *   assert(worker_harness_read_for(h, "c1", 5000, &f) >= 0);
 *   assert(f.kind == FRAME_RESULT && streq(f.value_json, "42"));
 *
 * JSON conventions: {"$bin": "text"} packs a msgpack bin holding the string's bytes; in
 * frames read back, a bin value is rendered as {"$bin": "text"} when its bytes are valid
 * UTF-8 without NULs, else as {"$bin_size": N}. */

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include <msgpack.h>

#include "frame.h"
#include "worker.h"

typedef struct WorkerHarness WorkerHarness;

/* One frame read back from the worker, decoded. */
typedef struct WorkerFrame {
        uint8_t kind;                  /* FRAME_READY, FRAME_RESULT, … */
        uint8_t *payload;              /* raw payload (malloc()ed, NUL-terminated) */
        size_t size;
        msgpack_zone zone;
        msgpack_object root;           /* the decoded map */
        char *call_id;                 /* NULL when the frame has none (READY) */
        const msgpack_object *value;   /* RESULT/ITEM value, else NULL */
        char *value_json;              /* value rendered as compact JSON, else NULL */
        const msgpack_object *error;   /* ERROR error map, else NULL */
        char *error_type;              /* ERROR fields, else NULL */
        char *error_message;
        bool cancelled;
        int64_t pid;                   /* READY pid, else 0 */
} WorkerFrame;

void worker_frame_done(WorkerFrame *f);

/* Fork a worker. `opts` may be NULL (defaults). Returns once the child is forked; the first
 * frame is READY (see worker_harness_wait_ready()). */
int worker_harness_start(const WorkerOptions *opts, WorkerHarness **ret);
/* Same, but the child runs `child_setup(userdata)` right before worker_main(), e.g. to open
 * an fd the worker must close, or set an environment variable. */
int worker_harness_start_full(const WorkerOptions *opts, void (*child_setup)(void *userdata),
                              void *userdata, WorkerHarness **ret);
WorkerHarness *worker_harness_free(WorkerHarness *h); /* SIGKILLs the worker if still running */
static inline void worker_harness_freep(WorkerHarness **h) {
        if (*h)
                *h = worker_harness_free(*h);
}

pid_t worker_harness_pid(WorkerHarness *h);
int worker_harness_fd(WorkerHarness *h);

/* Read the READY frame (and check it carries the worker's pid). */
int worker_harness_wait_ready(WorkerHarness *h, int timeout_ms);

/* CALL. args_json/kwargs_json: JSON array/object text, NULL for []/{}; deadline_ms < 0: none. */
int worker_harness_call(WorkerHarness *h, const char *call_id, const char *callable, const char *shape,
                        const char *args_json, const char *kwargs_json, int64_t deadline_ms);
/* A bidi CALL with in_ack: true: the worker reports taken inbox items in IN_TAKEN frames. */
int worker_harness_call_in_ack(WorkerHarness *h, const char *call_id, const char *callable, const char *args_json,
                               const char *kwargs_json);
/* CALL with args (array) and kwargs (map) given as msgpack bytes (NULL: empty). */
int worker_harness_call_mp(WorkerHarness *h, const char *call_id, const char *callable, const char *shape,
                           const void *args, size_t args_size, const void *kwargs, size_t kwargs_size,
                           int64_t deadline_ms);
int worker_harness_send_in(WorkerHarness *h, const char *call_id, const char *item_json);
int worker_harness_send_in_mp(WorkerHarness *h, const char *call_id, const void *item, size_t item_size);
/* IN {call_id, item, urgent: true}: queued ahead of the ordinary items (a signal, a resize). */
int worker_harness_send_in_urgent(WorkerHarness *h, const char *call_id, const char *item_json);
int worker_harness_end_in(WorkerHarness *h, const char *call_id);
int worker_harness_cancel(WorkerHarness *h, const char *call_id, const char *reason /* NULL: none */);
int worker_harness_shutdown_frame(WorkerHarness *h);
/* OUT_CREDIT {call_id, bytes}: let the call send `bytes` more of its output. */
int worker_harness_credit(WorkerHarness *h, const char *call_id, uint64_t bytes);
/* By default every ITEM frame read is credited at once (as the server does once the client has
 * it), so output flows; off, the test credits with worker_harness_credit() itself. */
void worker_harness_set_auto_credit(WorkerHarness *h, bool on);
/* Any frame, verbatim (for malformed-input tests). */
int worker_harness_send_raw(WorkerHarness *h, uint8_t kind, const void *payload, size_t size);

/* Next frame from the worker, whatever its call. -ETIMEDOUT, -EPIPE on EOF, -EBADMSG. */
int worker_harness_read(WorkerHarness *h, int timeout_ms, WorkerFrame *ret);
/* Next frame of this call; frames of other calls read meanwhile are kept for later. */
int worker_harness_read_for(WorkerHarness *h, const char *call_id, int timeout_ms, WorkerFrame *ret);
/* Read the frames of one call up to its terminal frame: the ITEM values as one JSON array
 * text in *ret_items_json (may be NULL), the terminal frame in *ret_terminal. */
int worker_harness_collect(WorkerHarness *h, const char *call_id, int timeout_ms, char **ret_items_json,
                           WorkerFrame *ret_terminal);

/* Send SHUTDOWN and wait for the worker to exit; *ret_status is the waitpid() status. */
int worker_harness_shutdown(WorkerHarness *h, int timeout_ms, int *ret_status);
/* Wait for the worker to exit on its own (crash tests). -ETIMEDOUT if it does not. */
int worker_harness_wait_exit(WorkerHarness *h, int timeout_ms, int *ret_status);

/* Helpers for building values. */
int worker_json_to_msgpack(const char *json, msgpack_packer *pk, char **ret_error);
char *worker_json_from_object(const msgpack_object *o); /* malloc()ed compact JSON */

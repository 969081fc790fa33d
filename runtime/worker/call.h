/* SPDX-License-Identifier: MIT */
#pragma once

/* One call in the worker: the request (a private copy of the CALL frame, decoded), the state
 * the module API (agentix-module.h) works on — result and item packing, raise, cancellation,
 * deadline, the bidi inbox — and the terminal frame it ends with.
 *
 * Life of a call: the reader thread makes it (call_new, call_parse_request), resolves and binds
 * it, and hands it to a pool thread, which runs call_run(): the function, then the terminal
 * frame assembled in c->out (sent by the worker once the call left the call table). */

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <msgpack.h>

#include "agentix-module.h"
#include "buffer.h"
#include "envelope.h"
#include "frame-sink.h"
#include "inbox.h"
#include "out-window.h"
#include "start-order.h"

/* Why a call was asked to stop; the first reason wins. */
typedef enum CallStop {
        CALL_STOP_NONE = 0,
        CALL_STOP_CANCELLED,  /* CANCEL {reason: "cancelled"} or no reason */
        CALL_STOP_DEADLINE,   /* deadline_ms passed, or CANCEL {reason: "deadline"} */
        CALL_STOP_SHUTDOWN,   /* SHUTDOWN, CANCEL {reason: "shutdown"}, or the server went away */
        CALL_STOP_OVERFLOW,   /* the caller overflowed the bidi inbox */
} CallStop;

/* Error type of a call whose bidi inbox overflowed. */
#define CALL_ERR_INBOX_OVERFLOW "InboxOverflow"

struct agentix_call {
        agentix_call *table_next;          /* CallTable chain */
        void *owner;                       /* the Worker running it */

        char id[RPC_CALL_ID_MAX + 1];
        size_t id_len;
        agentix_shape shape;
        const agentix_function *function;
        msgpack_object *argv;
        size_t argc;
        uint64_t deadline_usec;            /* CLOCK_MONOTONIC µs, 0: none */
        StartOrder *start_order;           /* AGENTIX_FUNCTION_ORDERED: start in arrival order */
        uint64_t start_ticket;
        bool start_pending;                /* holds up later ordered calls until it passes */
        _Atomic int stop;                  /* CallStop */
        Inbox inbox;
        Buffer taken_frame;                /* IN_TAKEN reports (in_ack: true), apart from c->out: a
                                            * function may take items while it packs one */
        OutWindow out_window;              /* flow control of ITEM frames (stream, bidi) */
        bool output_blocking;              /* item_end waits while the window is full (default) */

        FrameSink *sink;
        size_t max_frame;                  /* largest frame payload we may send */
        Buffer out;                        /* the frame being assembled (FRAME_HEADER_SIZE headroom) */
        msgpack_packer pk;                 /* packs into out */
        bool result_started;
        bool item_open;
        int pack_error;                    /* first packing failure: -ENOMEM, -EMSGSIZE */
        char *raise_type, *raise_message;

        msgpack_zone zone;                 /* decoded request and bound arguments */
        msgpack_object request;
        size_t payload_size;
        uint8_t payload[];                 /* the CALL payload; request points into it */
};

/* Copy and decode a CALL payload. -EBADMSG when it is not a map with a usable call_id (then
 * there is nobody to answer). */
int call_new(const void *payload, size_t size, FrameSink *sink, size_t max_frame, agentix_call **ret);
agentix_call *call_free(agentix_call *c);

/* Check the rest of the request: shape, callable (copied into callable/n), args, kwargs,
 * deadline_ms (relative to now), in_ack (bidi: report taken inbox items in IN_TAKEN frames).
 * Stream and bidi calls get their output window here.
 * -EINVAL with a message for a BadRequest. */
int call_parse_request(agentix_call *c, char *callable, size_t n, const msgpack_object **ret_args,
                       const msgpack_object **ret_kwargs, char **ret_error);

/* Ask the call to stop (thread-safe, idempotent: the first reason stays). Wakes the function
 * wherever it waits: its inbox, its output window. */
void call_stop(agentix_call *c, CallStop reason);
CallStop call_stop_reason(agentix_call *c); /* includes a passed deadline */

/* Run the function on the calling thread and leave the terminal frame in c->out, its kind in
 * *ret_kind. */
void call_run(agentix_call *c, uint8_t *ret_kind);

/* Put the terminal ERROR frame for `c` into c->out (for calls that never run). */
int call_build_error(agentix_call *c, const char *type, const char *message, bool cancelled);

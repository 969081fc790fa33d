/* SPDX-License-Identifier: MIT */
#pragma once

/* The /rpc namespace: token auth, the call table, results kept until acked (bounded), resume
 * after reconnects, deadlines, cancellation, and the relay to the worker. Exactly one terminal
 * event per call_id, and a call_id never runs twice. */

#include <systemd/sd-event.h>

#include "sio-server.h"
#include "worker-link.h"

typedef struct Rpc Rpc;

typedef struct RpcConfig {
        const char *token;          /* NULL or "": no authentication */
        size_t max_message;         /* largest call/item message accepted */
        unsigned max_calls;         /* calls in the worker at once */
        unsigned max_results;       /* finished, unacknowledged results kept */
        size_t max_result_bytes;    /* … and their total size */
        size_t max_orphan_bytes;    /* stream output buffered per call while no client is attached */
        unsigned forget_window;     /* acked/evicted call_ids remembered to refuse re-runs */
        uint64_t orphan_timeout_usec; /* a running call with no client for this long is cancelled
                                       * (0: never) */
        bool claimable;             /* agentd keeps it in a pool: runtime::claim is allowed, once */
} RpcConfig;

int rpc_new(sd_event *event, const RpcConfig *config, Rpc **ret);
Rpc *rpc_free(Rpc *rpc);

/* The namespace to register with the Socket.IO server ("/rpc"). */
const SioNamespace *rpc_namespace(Rpc *rpc);
/* The token clients authenticate with now (a claim changes it), or NULL: none. */
const char *rpc_token(Rpc *rpc);
/* Whether `token` is that token (compared in constant time); true when there is none. */
bool rpc_token_accepts(Rpc *rpc, const char *token);
/* An HTTP face's request: the token in X-Access-Token or as a Bearer (either may be NULL). */
bool rpc_request_token_ok(Rpc *rpc, const char *access_token, const char *bearer);

/* Callbacks for the WorkerLink (userdata = the Rpc), and the link itself. */
extern const WorkerLinkCallbacks rpc_worker_callbacks;
void rpc_set_worker(Rpc *rpc, WorkerLink *worker);

/* Calls of the server's own, for its HTTP faces (e2b-code.c): no socket, no call_id a client
 * could name, not kept once answered. `item` gets each ITEM frame's payload ({call_id, value})
 * and must pass the bytes back with rpc_call_local_credit() once it has sent them on (stream
 * output is flow-controlled); `done` gets the end ("call:result", "call:end" or "call:error"
 * and that envelope; NULL data when out of memory), once, and the call is gone after it. */
typedef struct RpcCall RpcCall;
typedef struct RpcLocalHandlers {
        void (*item)(RpcCall *c, const uint8_t *payload, size_t size, void *userdata);
        void (*done)(RpcCall *c, const char *event, const uint8_t *envelope, size_t size, void *userdata);
} RpcLocalHandlers;

/* args: a packed msgpack array, kwargs a packed map. -ESHUTDOWN, -EBUSY (max_calls), or the
 * worker could not be started or reached. */
int rpc_call_local(Rpc *rpc, const char *callable, const char *shape, const Buffer *args, const Buffer *kwargs,
                   const RpcLocalHandlers *h, void *userdata, RpcCall **ret);
void rpc_call_local_credit(RpcCall *c, uint64_t bytes);
/* The error in a failed call's envelope ({call_id, error: {type, message}}, what `done` gets
 * with "call:error"): type and message, malloc'ed, each NULL when absent. */
void rpc_error_of(const uint8_t *envelope, size_t size, char **ret_type, char **ret_message);
/* One item (a packed msgpack object) for a bidi call's inbox. -ESRCH once the call is done. */
int rpc_call_local_send(RpcCall *c, const Buffer *item);
/* The caller is gone: no more callbacks; the call is cancelled in the worker. */
void rpc_call_local_abandon(RpcCall *c);

/* Server shutdown: fail every running call with Cancelled, refuse new ones, stop respawning
 * the worker. */
void rpc_stop(Rpc *rpc, const char *message);
unsigned rpc_n_running(const Rpc *rpc);

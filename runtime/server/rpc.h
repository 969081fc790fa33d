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

/* Callbacks for the WorkerLink (userdata = the Rpc), and the link itself. */
extern const WorkerLinkCallbacks rpc_worker_callbacks;
void rpc_set_worker(Rpc *rpc, WorkerLink *worker);

/* Server shutdown: fail every running call with Cancelled, refuse new ones, stop respawning
 * the worker. */
void rpc_stop(Rpc *rpc, const char *message);
unsigned rpc_n_running(const Rpc *rpc);

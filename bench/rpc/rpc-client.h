/* SPDX-License-Identifier: MIT */
#pragma once

/* The /rpc client of the load generator: Engine.IO v4 over the WebSocket client, Socket.IO
 * v5 CONNECT with the token, and RPC events as BINARY_EVENTs with one msgpack attachment,
 * encoded and decoded with the project's wire codecs (eio-packet.h, sio-packet.h,
 * envelope.h). Speaks the wire protocol of ARCHITECTURE.md, so the same client drives
 * agentix-server and the python-socketio peer. */

#include <msgpack.h>

#include "buffer.h"
#include "ws-client.h"

typedef struct RpcClient RpcClient;

/* A call:result, call:item, call:end or call:error arrived. `env` is the decoded envelope
 * map (valid during the call only); `call_id` points into it. */
typedef int (*rpc_event_cb)(RpcClient *c, const char *event, const char *call_id, size_t call_id_len,
                            const msgpack_object *env, size_t raw_size, void *userdata);

struct RpcClient {
        WsClient ws;
        rpc_event_cb on_event;
        void *userdata;

        bool opened;    /* Engine.IO OPEN seen */
        bool connected; /* /rpc CONNECT answered */
        char *token;
        char event[64]; /* name of the BINARY_EVENT whose attachment comes next */
        bool want_attachment;

        Buffer call_header; /* the text frame 451-/rpc,["call",{placeholder}] */
        Buffer ack_header;
        Buffer scratch;     /* envelope being packed */
        msgpack_zone zone;
        bool zone_initialized;

        unsigned pings;
};

/* Set c->ws.fd = -EBADF (and on_event, userdata) before; rpc_client_done() is safe after any
 * outcome. */
int rpc_client_connect(RpcClient *c, const char *host, const char *port, const char *token, int timeout_ms);

/* Queue a call; `args` and `kwargs` are already msgpack-encoded (an array and a map). */
int rpc_client_queue_call(RpcClient *c, const char *call_id, size_t call_id_len, const char *callable,
                          const char *shape, const Buffer *args, const Buffer *kwargs);
/* Queue an ack: the server may forget the result. */
int rpc_client_queue_ack(RpcClient *c, const char *call_id, size_t call_id_len);

static inline int rpc_client_flush(RpcClient *c) {
        return ws_client_flush(&c->ws);
}
/* Send what is queued, wait up to timeout_ms, dispatch what arrived (see ws_client_pump()). */
static inline int rpc_client_pump(RpcClient *c, int timeout_ms) {
        return ws_client_pump(&c->ws, timeout_ms);
}

/* Engine.IO CLOSE and a WebSocket close handshake, waiting up to timeout_ms. */
int rpc_client_close(RpcClient *c, int timeout_ms);

void rpc_client_done(RpcClient *c);

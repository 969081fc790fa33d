/* SPDX-License-Identifier: MIT */
#pragma once

/* The Engine.IO WebSocket transport of the client: one TCP connection of its own on sd-event
 * (name lookup off the loop, resolve.c; the opening handshake, ws-handshake.c; frames read by
 * ws-receive.c and written with ws-frame.c). One Engine.IO packet per message; incoming
 * messages are reassembled from their fragments, bounded by max_message. wss:// with tls_ctx
 * (tls.h: the runtime's certificate is verified against its CA and the host dialled). */

#include <stdbool.h>

#include <openssl/ssl.h>

#include <systemd/sd-event.h>

#include "eio-transport.h"

typedef struct WsTransport WsTransport;

typedef struct WsTarget {
        const char *host;        /* a name or an address literal (IPv6 without brackets) */
        unsigned port;
        const char *host_header; /* as in the URL: "host:port", "[::1]:port" */
        const char *path;        /* with the query, e.g. "/socket.io/?EIO=4&transport=websocket" */
        bool tls;
        SSL_CTX *tls_ctx;        /* with tls: what verifies the server (required) */
        const char *tls_sandbox_id; /* with tls: the sandbox the certificate must name too, or NULL */
} WsTarget;

/* Start connecting. Handlers run from the event loop, never from inside this call. */
int ws_transport_new(sd_event *event, const WsTarget *target, size_t max_message, OutQueue *queue,
                     const EioTransportHandlers *handlers, void *userdata, WsTransport **ret);

/* The queue has new messages: written at once, as far as the socket takes them. */
void ws_transport_kick(WsTransport *t);

/* Send what is queued, then close the WebSocket cleanly; `closed` follows. */
void ws_transport_shutdown(WsTransport *t);

/* Stop now: the socket is shut down at once (the peer sees the connection end, as after a
 * network failure), no handler runs any more. Safe from inside a handler. */
void ws_transport_close(WsTransport *t);

/* Not from inside a handler: close first, free from a clean context. */
WsTransport *ws_transport_free(WsTransport *t);

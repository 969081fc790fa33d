/* SPDX-License-Identifier: MIT */
#pragma once

/* A Socket.IO v5 client over Engine.IO v4, on sd-event: WebSocket (a socket of its own,
 * ws-transport.h) or HTTP long-polling (libcurl's multi interface glued to sd-event), with the polling → WebSocket upgrade not needed: AUTO
 * tries WebSocket first and falls back to polling when the WebSocket handshake fails.
 *
 * It joins one namespace with an auth payload, answers the server's pings, sends and receives
 * events whose one argument is a binary attachment (the /rpc envelope shape), and reconnects
 * by itself after a dropped connection (backing off), telling its user each time so the user
 * can resume its calls. Every wire parser it uses is the project's (runtime/shared/
 * eio-packet.h, sio-packet.h). Internal to libagentix; not installed. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <systemd/sd-event.h>

typedef struct SioClient SioClient;

typedef enum SioClientTransport {
        SIO_CLIENT_TRANSPORT_AUTO = 0, /* WebSocket, else polling */
        SIO_CLIENT_TRANSPORT_WEBSOCKET,
        SIO_CLIENT_TRANSPORT_POLLING,
} SioClientTransport;

typedef struct SioClientConfig {
        const char *url;                 /* http://host:port or ws://host:port; path defaults to /socket.io/ */
        const char *nsp;                 /* e.g. "/rpc" */
        const char *auth_json;           /* CONNECT payload, e.g. {"token":"…"}; NULL: none */
        SioClientTransport transport;
        uint64_t connect_timeout_usec;   /* per attempt; 0: 10 s */
        bool reconnect;                  /* reconnect after a drop */
        uint64_t reconnect_timeout_usec; /* give up after this long without a connection; 0: 60 s */
        size_t max_message;              /* 0: 256 MiB */
        const char *tls_ca_pem;          /* https:// or wss://: the CA (PEM) the server's
                                          * certificate must chain to; required for those */
        const char *tls_sandbox_id;      /* with TLS: the sandbox the certificate must name
                                          * besides the URL's host (tls.h), or NULL */
} SioClientConfig;

typedef struct SioClientCallbacks {
        /* Joined the namespace: the first time (reconnected false) and after each reconnect. */
        void (*connected)(SioClient *c, bool reconnected, void *userdata);
        /* The connection is gone. final: no more attempts (closed, refused, gave up); then
         * error is a negative errno (-EACCES: the auth was refused, with the server's message;
         * -ECONNREFUSED, -ETIMEDOUT, -EPROTO, …) and message says it for a person, or 0 after
         * sio_client_close(). Not final: a reconnect is under way (error and message say why
         * the connection was lost). */
        void (*disconnected)(SioClient *c, bool final, int error, const char *message, void *userdata);
        /* An EVENT/BINARY_EVENT on our namespace whose single argument is a binary attachment:
         * the event name and the attachment's bytes (valid during the call). Events of any other
         * shape are dropped (logged at debug level). */
        void (*event)(SioClient *c, const char *event, const uint8_t *data, size_t size, void *userdata);
        /* Optional. Such an event whose attachment was larger than max_message: it was skipped,
         * the connection lives on. head holds its first bytes (at most 4096, enough to read the
         * call_id of an /rpc envelope, which the server packs first), size its full size. When
         * the text part of a packet is too large instead, the connection is dropped with
         * -EMSGSIZE (a reconnect follows when enabled). */
        void (*message_too_large)(SioClient *c, const char *event, const uint8_t *head, size_t head_size,
                                  size_t size, void *userdata);
        /* Optional. An emit was refused with -ENOBUFS, and the connection's queue has drained
         * to half its limit since: emitting again is worth a try. */
        void (*writable)(SioClient *c, void *userdata);
} SioClientCallbacks;

/* All callbacks run from the event loop (an sd-event source of the client's), never from
 * inside a sio_client_*() call or a library's callback: any sio_client_*() function may be
 * called from them, sio_client_free() included. A connection attempt that fails is retried
 * with a backoff (100 ms doubling to 5 s) until reconnect_timeout has passed since the last
 * time the client was connected (or since sio_client_start()) when `reconnect` is set; then,
 * or at once without `reconnect`, disconnected(final=true) says why. The first connection is
 * retried the same way. */

int sio_client_new(sd_event *event, const SioClientConfig *config, const SioClientCallbacks *callbacks,
                   void *userdata, SioClient **ret);
SioClient *sio_client_free(SioClient *c);

/* Start connecting (returns at once; the callbacks tell the outcome). */
int sio_client_start(SioClient *c);

/* Emit `event` with one binary attachment. Returns -ENOTCONN when not connected (the caller
 * keeps what it needs for a resume after the next `connected`; a `disconnected` callback may
 * still be on its way), -EMSGSIZE above max_message or the server's maxPayload, -ENOBUFS when
 * more than 2 × max_message bytes wait to be sent, -EINVAL for an event name that would need
 * JSON escaping. */
int sio_client_emit_binary1(SioClient *c, const char *event, const void *data, size_t size);

/* Hold emits back until the matching sio_client_release(): what is emitted in between leaves
 * together, in order (one write over WebSocket when the socket is idle, one POST over
 * polling). Nests. Use it around emits made back to back. */
void sio_client_hold(SioClient *c);
void sio_client_release(SioClient *c);

bool sio_client_is_connected(const SioClient *c);
/* "websocket" or "polling" while connected, else NULL. */
const char *sio_client_transport_name(const SioClient *c);

/* Drop the current connection as if the network had (tests, and agentixctl's debugging). A
 * reconnect follows when enabled. */
void sio_client_drop(SioClient *c);

/* Leave for good: DISCONNECT, close, no reconnect. `disconnected` runs with final=true. */
void sio_client_close(SioClient *c);

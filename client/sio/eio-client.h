/* SPDX-License-Identifier: MIT */
#pragma once

/* One Engine.IO v4 client connection over one transport (WebSocket or HTTP long-polling):
 * waits for the OPEN packet, answers the server's pings and gives up when the server goes
 * quiet for longer than pingInterval + pingTimeout, queues outgoing messages, and hands
 * incoming messages up. Reconnecting is the layer above's business (sio-client.c): a closed
 * EioClient stays closed.
 *
 * Lifetime: as for the transports (eio-transport.h), handlers may run from inside
 * the WebSocket transport's I/O callback or libcurl's, so the owner never frees an EioClient from inside a
 * handler: it calls eio_client_close() there and eio_client_free() later from a clean
 * context. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <systemd/sd-event.h>

#include "buffer.h"
#include "curl-event.h"
#include "ws-transport.h"

typedef struct EioClient EioClient;

typedef enum EioClientTransport {
        EIO_CLIENT_WEBSOCKET,
        EIO_CLIENT_POLLING,
} EioClientTransport;

typedef struct EioClientConfig {
        EioClientTransport transport;
        const WsTarget *ws_target;   /* WEBSOCKET */
        CurlEvent *curl;             /* POLLING */
        const char *polling_url;     /* POLLING: the endpoint without a query */
        const char *tls_ca_pem;      /* POLLING over https://: the CA to verify with */
        const char *tls_sandbox_id;  /* POLLING over https://: the sandbox the certificate must name, or NULL */
        uint64_t connect_timeout_usec;
        size_t max_message;
} EioClientConfig;

typedef struct EioClientHandlers {
        /* The server opened the session (its OPEN packet arrived). */
        void (*open)(void *userdata);
        /* A MESSAGE: text (without the type digit) or binary. Data valid during the call. */
        void (*message)(void *userdata, bool binary, const uint8_t *data, size_t size);
        /* A message above max_message was skipped (see eio-transport.h). */
        void (*too_large)(void *userdata, bool binary, const uint8_t *head, size_t head_size, size_t size);
        /* The connection is gone: a negative errno and a message for a person; upgrade_refused
         * as in eio-transport.h. At most once, never after eio_client_close(). */
        void (*closed)(void *userdata, int error, const char *message, bool upgrade_refused);
        /* Queued messages left; eio_client_queued() is smaller now. Optional. */
        void (*sent)(void *userdata);
} EioClientHandlers;

int eio_client_new(sd_event *event, const EioClientConfig *config, const EioClientHandlers *handlers,
                   void *userdata, EioClient **ret);
EioClient *eio_client_free(EioClient *e);

/* Queue one MESSAGE, taking over `data` (text: "4" + the Socket.IO packet; binary: raw bytes;
 * either with EIO_OUT_HEADROOM bytes of headroom), and send what is queued (over WebSocket at once when
 * the socket is idle and this is not called from inside the transport). */
int eio_client_send(EioClient *e, bool binary, Buffer *data);
/* Queue one MESSAGE as eio_client_send() does, without sending yet: messages queued together
 * and then flushed leave together (one write over WebSocket, one POST over polling). */
int eio_client_queue(EioClient *e, bool binary, Buffer *data);
void eio_client_flush(EioClient *e);

/* Bytes waiting to be sent (queued, or in a POST on its way). */
size_t eio_client_queued(const EioClient *e);
/* The server's maxPayload (0 before OPEN). */
size_t eio_client_max_payload(const EioClient *e);
bool eio_client_is_open(const EioClient *e);
const char *eio_client_transport_name(const EioClient *e);

/* Send what is queued, then close cleanly; `closed` follows. */
void eio_client_shutdown(EioClient *e);
/* Stop now, abruptly (as a network failure would): no handler runs after this. */
void eio_client_close(EioClient *e);

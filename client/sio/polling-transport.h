/* SPDX-License-Identifier: MIT */
#pragma once

/* The Engine.IO HTTP long-polling transport of the client, on libcurl's multi interface glued
 * to sd-event (runtime/shared/curl-event.h): the handshake GET, then one long-poll GET always
 * outstanding, and POSTs for what is queued (batched, in order, one at a time). Responses are
 * decoded packet by packet as they stream in, so memory is bounded by one message. */

#include <stdbool.h>

#include "curl-event.h"
#include "eio-transport.h"

typedef struct PollingTransport PollingTransport;

/* `url` is the Engine.IO endpoint without a query, e.g. "http://127.0.0.1:8000/socket.io/".
 * Handlers run from the event loop, never from inside this call. */
/* ca_pem: for an https:// url, the CA the server's certificate must chain to (the only one);
 * sandbox_id: the sandbox it must name besides the URL's host (tls.h), or NULL. */
int polling_transport_new(sd_event *event, CurlEvent *glue, const char *url, const char *ca_pem, const char *sandbox_id,
                          uint64_t connect_timeout_usec, size_t max_message, OutQueue *queue,
                          const EioTransportHandlers *handlers, void *userdata, PollingTransport **ret);

/* The session from the OPEN packet: the handshake delivers the OPEN packet, the layer above
 * parses it and hands the id (and the server's maxPayload, which bounds a POST body) back
 * before polling can go on. */
int polling_transport_set_sid(PollingTransport *t, const char *sid, size_t max_payload);

/* The queue has new messages. */
void polling_transport_kick(PollingTransport *t);

/* Send what is queued (the caller queued a CLOSE packet last), then report `closed`. */
void polling_transport_shutdown(PollingTransport *t);

/* Stop now: no handler runs any more; requests are stopped soon (from the loop). */
void polling_transport_close(PollingTransport *t);

/* Not from inside a handler: close first, free from a clean context. */
PollingTransport *polling_transport_free(PollingTransport *t);

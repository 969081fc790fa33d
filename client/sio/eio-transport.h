/* SPDX-License-Identifier: MIT */
#pragma once

/* What the two Engine.IO transports (ws-transport.c, polling-transport.c) share with the
 * Engine.IO connection above them (eio-client.c): the handlers they report to, and the queue
 * of messages waiting to go out, which the connection fills and the transport drains.
 *
 * Lifetime rule for the whole client: a transport never frees anything from its handlers'
 * calls, and its owner never frees it from inside one. The owner stops a transport with
 * *_close() (no handler runs after that, from any context) and frees it later with *_free()
 * from a clean context (an sd-event callback of its own, or the client's destructor). That is
 * what lets the transports report from inside their I/O callbacks and libcurl's. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buffer.h"
#include "eio-packet.h"

/* How much of an oversized message is kept for the layer above (enough to name the call). */
#define EIO_TOO_LARGE_HEAD 4096u
/* Headroom every outgoing message is queued with: room for a WebSocket frame header (14). */
#define EIO_OUT_HEADROOM 16u

typedef struct EioTransportHandlers {
        /* Bytes arrived (any part of any message): the peer is alive. */
        void (*activity)(void *userdata);
        /* One Engine.IO packet; data valid during the call. */
        void (*packet)(void *userdata, const EioPacket *p);
        /* A message above max_message was skipped: whether it was binary, its first bytes (at
         * most EIO_TOO_LARGE_HEAD) and its size. */
        void (*too_large)(void *userdata, bool binary, const uint8_t *head, size_t head_size, size_t size);
        /* The transport is gone: a negative errno and a message for a person. upgrade_refused:
         * the server answered the WebSocket upgrade request, but not with 101 (AUTO falls back
         * to polling then). Called at most once, never after *_close(). */
        void (*closed)(void *userdata, int error, const char *message, bool upgrade_refused);
        /* Queued messages left (written to the socket, or their POST answered): there is
         * room again. Optional. */
        void (*sent)(void *userdata);
} EioTransportHandlers;

/* One outgoing Engine.IO packet in WebSocket frame form: text is the type digit + data,
 * binary is the raw bytes of a MESSAGE. `data` has EIO_OUT_HEADROOM bytes of headroom (the WebSocket
 * transport writes the frame header there; polling ignores it). */
typedef struct OutMessage {
        struct OutMessage *next;
        bool binary;
        Buffer data;
} OutMessage;

typedef struct OutQueue {
        OutMessage *head, *tail;
        size_t bytes;    /* data bytes of the queued messages */
        size_t inflight; /* bytes taken off the queue but not yet confirmed sent (a POST) */
} OutQueue;

/* Append a message, taking over `data` (left empty). */
int out_queue_push(OutQueue *q, bool binary, Buffer *data);
/* Remove the first message; the caller frees it with out_message_free(). */
OutMessage *out_queue_pop(OutQueue *q);
void out_message_free(OutMessage *m);
void out_queue_clear(OutQueue *q);

static inline bool out_queue_is_empty(const OutQueue *q) {
        return !q->head;
}

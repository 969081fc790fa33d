/* SPDX-License-Identifier: MIT */
#pragma once

/* The client's reading of server-to-client WebSocket frames (RFC 6455 section 5): frames are
 * parsed as bytes arrive, in any split; data messages are reassembled from their fragments,
 * bounded by max_message; control frames may come between fragments. It knows no socket:
 * the transport feeds it what it read, or — while a large frame's payload is arriving — reads
 * straight into the message's buffer (ws_receiver_direct()), so bulk data is copied once.
 * Server frames are never masked and no extension is negotiated: a masked frame, a set RSV
 * bit or an unknown opcode is a protocol error. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buffer.h"

enum {
        WS_OP_CLOSE = 0x8,
        WS_OP_PING = 0x9,
        WS_OP_PONG = 0xa,
};

#define WS_CONTROL_MAX 125u

/* Each returns 0 to go on, or a negative errno, which ends the feeding (and is returned). */
typedef struct WsReceiverHandlers {
        /* A whole text or binary message; data valid during the call. */
        int (*message)(void *userdata, bool binary, const uint8_t *data, size_t size);
        /* A message above max_message was skipped: its first bytes (at most head_max) and size. */
        int (*too_large)(void *userdata, bool binary, const uint8_t *head, size_t head_size, uint64_t size);
        /* A ping (answer with a pong carrying the same data). */
        int (*ping)(void *userdata, const uint8_t *data, size_t size);
        /* The peer's close frame: its status code (0: none) and reason. */
        int (*close)(void *userdata, unsigned code, const uint8_t *reason, size_t reason_size);
} WsReceiverHandlers;

typedef struct WsReceiver {
        const WsReceiverHandlers *handlers;
        void *userdata;
        size_t max_message, head_max;

        uint8_t header[14];
        size_t header_len;

        /* the frame being received */
        bool in_frame, fin;
        unsigned opcode;
        uint64_t left;
        uint8_t control[WS_CONTROL_MAX];
        size_t control_len;

        /* the data message being reassembled */
        bool in_message, binary, oversized;
        uint64_t total;
        Buffer message;
} WsReceiver;

void ws_receiver_init(WsReceiver *r, size_t max_message, size_t head_max, const WsReceiverHandlers *handlers,
                      void *userdata);
void ws_receiver_done(WsReceiver *r);

/* Take n bytes from the wire (all of them, unless an error or a handler stops it). */
int ws_receiver_feed(WsReceiver *r, const uint8_t *data, size_t n);

/* While a data frame's payload of at least min_size more bytes is due: 1 and where the
 * transport may read it to (space reserved in the message's buffer); 0 when it should read
 * into its own buffer and feed() instead. */
int ws_receiver_direct(WsReceiver *r, size_t min_size, uint8_t **ret_space, size_t *ret_size);
/* n bytes were read into the space ws_receiver_direct() gave. */
int ws_receiver_direct_done(WsReceiver *r, size_t n);

/* Drop a large idle reassembly buffer. */
void ws_receiver_trim(WsReceiver *r);

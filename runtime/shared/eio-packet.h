/* SPDX-License-Identifier: MIT */
#pragma once

/* Engine.IO v4 packets (https://github.com/socketio/engine.io-protocol, v4).
 *
 * Text packets are "<type digit><data>"; binary packets carry raw bytes. Over WebSocket each
 * frame is one packet (a binary frame is a MESSAGE without a type byte). Over HTTP
 * long-polling a payload joins packets with the record separator 0x1e and sends binary
 * packets as "b<base64>". */

#include <stdbool.h>
#include <stdint.h>

#include "buffer.h"

typedef enum EioType {
        EIO_OPEN = 0,
        EIO_CLOSE = 1,
        EIO_PING = 2,
        EIO_PONG = 3,
        EIO_MESSAGE = 4,
        EIO_UPGRADE = 5,
        EIO_NOOP = 6,
        _EIO_TYPE_MAX,
} EioType;

#define EIO_RECORD_SEPARATOR 0x1e

typedef struct EioPacket {
        EioType type;
        bool binary;         /* a binary MESSAGE: data is raw bytes */
        const uint8_t *data; /* the data after the type digit, or the raw bytes */
        size_t size;
} EioPacket;

/* Decode one WebSocket frame. Text frames must start with a type digit 0-6; binary frames
 * become a binary MESSAGE. The packet points into `frame`. -EBADMSG when malformed. */
int eio_ws_decode(const uint8_t *frame, size_t n, bool binary_frame, EioPacket *ret);

/* Decode a long-polling payload (a POST body), calling `cb` for each packet in order.
 * Binary packets ("b<base64>") are decoded into a scratch buffer valid during the callback.
 * An empty payload, an empty packet, an unknown type or bad base64 give -EBADMSG (after the
 * packets before it were delivered). A negative return from `cb` stops and is returned. */
typedef int (*eio_packet_cb)(const EioPacket *p, void *userdata);
int eio_payload_decode(const uint8_t *body, size_t n, eio_packet_cb cb, void *userdata);

/* Append one packet to a polling payload being built (adds the separator when `out` is not
 * empty; binary data is base64-encoded behind a 'b'). */
int eio_payload_append(Buffer *out, EioType type, bool binary, const void *data, size_t n);

/* Append the text form of one packet for a WebSocket text frame: the type digit + data. */
int eio_text_encode(Buffer *out, EioType type, const void *data, size_t n);

/* The OPEN packet's JSON: {"sid":…,"upgrades":[…],"pingInterval":…,"pingTimeout":…,"maxPayload":…} */
int eio_open_json(Buffer *out, const char *sid, bool can_upgrade, unsigned ping_interval_ms,
                  unsigned ping_timeout_ms, size_t max_payload);

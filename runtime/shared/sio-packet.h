/* SPDX-License-Identifier: MIT */
#pragma once

/* Socket.IO v5 packets (https://github.com/socketio/socket.io-protocol, v5), default parser.
 *
 * Text form: <type>[<attachments>-][<namespace>,][<ack id>][<JSON data>]
 * BINARY_EVENT / BINARY_ACK carry `attachments` binary Engine.IO messages after the text
 * packet; inside the data each binary value is the placeholder {"_placeholder":true,"num":N}. */

#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

#include "buffer.h"

typedef enum SioType {
        SIO_CONNECT = 0,
        SIO_DISCONNECT = 1,
        SIO_EVENT = 2,
        SIO_ACK = 3,
        SIO_CONNECT_ERROR = 4,
        SIO_BINARY_EVENT = 5,
        SIO_BINARY_ACK = 6,
        _SIO_TYPE_MAX,
} SioType;

/* Limits a peer cannot exceed. */
#define SIO_NSP_MAX 256u           /* bytes of a namespace name */
#define SIO_ATTACHMENTS_MAX 1024u  /* binary attachments in one packet */

typedef struct SioPacket {
        SioType type;
        char *nsp;          /* owned; "/" when the packet names none */
        int64_t ack_id;     /* -1 when absent */
        unsigned attachments;
        json_t *data;       /* owned reference; NULL when absent */
} SioPacket;

#define SIO_PACKET_NULL ((SioPacket) { .ack_id = -1 })

/* Parse and validate one text packet. Returns -EBADMSG for anything the spec does not allow:
 * unknown type, bad attachment count, namespace not starting with '/', ack id overflow, bad
 * JSON, or a payload of the wrong kind for the type (CONNECT: object or absent; DISCONNECT:
 * absent; EVENT/BINARY_EVENT: non-empty array whose first element is a string; ACK/BINARY_ACK:
 * array; CONNECT_ERROR: object or string). BINARY_* need attachments ≥ 1 and the same number
 * of distinct placeholders num 0..attachments-1; others must have none. */
int sio_packet_decode(const char *s, size_t n, SioPacket *ret);

/* Append the text form of a packet (namespace "/" is omitted, as the reference encoder does). */
int sio_packet_encode(const SioPacket *p, Buffer *out);

void sio_packet_done(SioPacket *p);

/* {"_placeholder":true,"num":N} → N; anything else → -1. */
int sio_placeholder_num(const json_t *v);
json_t *sio_placeholder_new(unsigned num);

/* Fast path for the RPC namespace: append the text packet of a BINARY_EVENT with one
 * attachment and one argument, e.g. 451-/rpc,["call:result",{"_placeholder":true,"num":0}]
 * The leading '4' is the Engine.IO MESSAGE type: the result is a complete WebSocket text frame
 * (for a polling payload, append it after the separator; everything after the '4' equals
 * sio_packet_encode() of the same packet). The one attachment follows as a binary message.
 * Event and namespace must not need JSON escaping (checked: -EINVAL). */
int sio_encode_binary_event1(Buffer *out, const char *nsp, const char *event);

/* SPDX-License-Identifier: MIT */
#pragma once

/* Frames between agentix-server and its worker, over a private socketpair.
 *
 *   u32 little-endian length | u8 kind | payload (length - 1 bytes, one msgpack map)
 *
 * The payload of CALL/IN is the client's msgpack map forwarded verbatim; the payload of
 * RESULT/ITEM/END/ERROR is the exact map the server sends to the client as the event's binary
 * attachment ({call_id, value} / {call_id} / {call_id, error}). So the server never re-encodes
 * values on the hot path: it reads call_id and forwards bytes. */

#include <stdint.h>

#include "blob.h"
#include "buffer.h"

typedef enum FrameKind {
        /* server → worker */
        FRAME_CALL = 'C',     /* {call_id, callable, shape, args, kwargs, deadline_ms?} */
        FRAME_IN = 'I',       /* {call_id, item} */
        FRAME_END_IN = 'E',   /* {call_id} */
        FRAME_CANCEL = 'X',   /* {call_id, reason?} reason: "cancelled" | "deadline" | "shutdown" */
        FRAME_SHUTDOWN = 'Q', /* {} */
        FRAME_OUT_CREDIT = 'o', /* {call_id, bytes} the client has taken `bytes` more of the call's ITEM
                                 * payload off the server's hands (flow control of stream and bidi
                                 * output, see FRAME_OUT_WINDOW) */
        /* worker → server */
        FRAME_READY = 'R',    /* {pid} */
        FRAME_RESULT = 'r',   /* {call_id, value} terminal (unary) */
        FRAME_ITEM = 'i',     /* {call_id, value} */
        FRAME_END = 'e',      /* {call_id} terminal (stream, bidi) */
        FRAME_ERROR = 'x',    /* {call_id, error: {type, message, traceback?, cancelled, returncode?}} terminal */
        FRAME_IN_TAKEN = 't', /* {call_id, count} the function took `count` more IN items (bidi calls
                               * whose CALL asked for it with in_ack: true; see worker.h) */
} FrameKind;

#define FRAME_HEADER_SIZE 5u

/* Flow control of a stream or bidi call's output: the worker lets a call have at most this many
 * bytes of ITEM payload sent and not yet credited (OUT_CREDIT) before the function's next item
 * waits (one item may overshoot it). The server credits bytes once they have left its queue
 * for the client, coalesced: when at least FRAME_OUT_CREDIT_MIN are due. Both sides are built
 * from this header, so they agree. */
#define FRAME_OUT_WINDOW (4u * 1024u * 1024u)
#define FRAME_OUT_CREDIT_MIN (FRAME_OUT_WINDOW / 4u)
/* Largest frame accepted by default; the server raises it to its max message size plus slack. */
#define FRAME_DEFAULT_MAX (256u * 1024u * 1024u + 64u * 1024u)

bool frame_kind_is_valid(uint8_t kind);
bool frame_kind_is_terminal(uint8_t kind);

/* Write the 5-byte header for a payload of `payload_size` bytes. */
void frame_header_write(uint8_t out[FRAME_HEADER_SIZE], uint8_t kind, size_t payload_size);

/* Patch the header of a frame assembled in place: data[0..4] reserved, payload follows. */
int frame_seal(uint8_t *frame, size_t frame_size, uint8_t kind);

/* Incremental reader for a non-blocking stream socket. */
typedef struct FrameReader {
        Buffer buf;
        size_t max_frame; /* payload bytes; 0 = FRAME_DEFAULT_MAX */
        bool taken;       /* the peeked frame was handed out by frame_reader_take() */
} FrameReader;

/* Read whatever is available. Returns >0 bytes read, 0 on EOF, -EAGAIN when nothing is
 * ready, other negative errno on failure. */
ssize_t frame_reader_fill(FrameReader *r, int fd);

/* Return the next complete frame if there is one: 1 and the frame's kind/payload (pointing
 * into the reader's buffer, valid until frame_reader_consume()), 0 when more bytes are
 * needed, -EBADMSG for an unknown kind or empty frame, -EMSGSIZE when it exceeds max_frame. */
int frame_reader_peek(FrameReader *r, uint8_t *ret_kind, const uint8_t **ret_payload, size_t *ret_size);

/* Drop the frame returned by the last successful frame_reader_peek(). */
void frame_reader_consume(FrameReader *r);

/* Keep the payload of the frame returned by the last successful frame_reader_peek() beyond
 * frame_reader_consume(): a large payload is handed over without a copy (the reader's
 * buffer becomes the blob's memory), a small one is copied. Not thread-safe (Blob). */
int frame_reader_take(FrameReader *r, Blob **ret);

void frame_reader_done(FrameReader *r);

/* Blocking helpers for the worker side: write one frame made of a header and payload with
 * one writev(); read one frame into a malloc()ed buffer. */
int frame_write(int fd, uint8_t kind, const void *payload, size_t size);
int frame_read(int fd, size_t max_frame, uint8_t *ret_kind, uint8_t **ret_payload, size_t *ret_size);

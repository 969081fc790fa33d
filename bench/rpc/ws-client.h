/* SPDX-License-Identifier: MIT */
#pragma once

/* A small RFC 6455 WebSocket client for the load generator: one TCP connection, a
 * non-blocking socket driven by poll(), masked client frames, reassembly of fragmented
 * messages, ping → pong and close handling.
 *
 * Hand-written rather than libwebsockets' client so that the generator adds as little as
 * possible to what it measures: one send() per batch of frames, no event library, messages
 * delivered straight from the receive buffer when they arrived in one frame. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buffer.h"

typedef struct WsClient WsClient;

/* Called for each complete message. `data` is valid during the call only. A negative
 * return stops ws_client_pump() and is returned from it. */
typedef int (*ws_message_cb)(WsClient *ws, const uint8_t *data, size_t size, bool binary, void *userdata);

struct WsClient {
        int fd;
        ws_message_cb on_message;
        void *userdata;

        Buffer rx;        /* bytes received, not yet parsed */
        size_t rx_off;    /* parse position in rx */
        bool rx_unparsed; /* rx holds bytes that came with the handshake */
        Buffer msg;       /* reassembly of a fragmented message */
        bool in_fragmented;
        bool msg_binary;
        size_t max_message;

        Buffer tx;        /* frames queued, not yet sent */
        size_t tx_off;

        uint64_t mask_state; /* xorshift state for the masking keys */
        bool closed;         /* a close frame arrived or the peer hung up */

        uint64_t bytes_in, bytes_out;
};

/* Connect to host:port, do the HTTP upgrade for `path` (e.g. "/socket.io/?EIO=4&transport=websocket")
 * and check the server's accept key. The socket is non-blocking afterwards. */
int ws_client_connect(WsClient *ws, const char *host, const char *port, const char *path, int timeout_ms);

/* Queue one frame (FIN set). The payload is masked into the send buffer; nothing is sent
 * until ws_client_flush() or ws_client_pump(). */
int ws_client_queue(WsClient *ws, bool binary, const void *data, size_t size);

/* Send what is queued without blocking. Returns 0 or a negative errno. */
int ws_client_flush(WsClient *ws);

/* Wait up to timeout_ms (−1: forever) for the socket, then send what is queued and read and
 * dispatch every complete message that has arrived. Returns the number of messages
 * delivered (≥ 0), -ECONNRESET when the peer closed, or the callback's error. */
int ws_client_pump(WsClient *ws, int timeout_ms);

/* Send a close frame (1000) and wait up to timeout_ms for the server's answer. */
int ws_client_close(WsClient *ws, int timeout_ms);

void ws_client_done(WsClient *ws);

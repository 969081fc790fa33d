/* SPDX-License-Identifier: MIT */
#pragma once

/* Engine.IO v4 sessions over HTTP long-polling and WebSocket, with the polling → WebSocket
 * upgrade and server-driven heartbeats. The layer above (Socket.IO) sees messages and closes. */

#include <stdbool.h>
#include <stdint.h>

#include <systemd/sd-event.h>

#include "blob.h"
#include "buffer.h"
#include "http-server.h"

typedef struct EioCallbacks {
        /* A new session opened. Return <0 to refuse it. */
        int (*open)(EioSession *s, void *userdata);
        /* One complete message. Data is valid during the call only. */
        void (*message)(EioSession *s, bool binary, const uint8_t *data, size_t size, void *userdata);
        /* A WebSocket message exceeded max_message and was discarded; `head` holds its first
         * bytes (up to EIO_OVERSIZED_HEAD) so the layer above can tell the sender which
         * request it was. The session stays open. */
        void (*message_too_large)(EioSession *s, bool binary, const uint8_t *head, size_t head_size,
                                  size_t total_size, void *userdata);
        /* The session is gone (reason for logs). The session pointer dies after this. */
        void (*close)(EioSession *s, const char *reason, void *userdata);
        /* Queued packets went out (written to the WebSocket, or into a polling response) and at
         * most EioConfig.drain_low_water bytes are still queued: the client is taking what it
         * gets, the layer above may produce more (flow control). Called after each such write,
         * not once per packet; never from inside eio_session_send*(). Optional. */
        void (*drained)(EioSession *s, void *userdata);
} EioCallbacks;

#define EIO_OVERSIZED_HEAD 4096u

typedef struct EioConfig {
        const char *path;             /* e.g. "/socket.io/" */
        unsigned ping_interval_ms;
        unsigned ping_timeout_ms;
        unsigned upgrade_timeout_ms;
        size_t max_payload;           /* advertised maxPayload; bound of a polling POST body */
        size_t max_message;           /* bound of one WebSocket message */
        size_t max_backlog;           /* queued outbound bytes per session before it is closed */
        size_t drain_low_water;       /* see EioCallbacks.drained */
        unsigned max_sessions;
} EioConfig;

int eio_server_new(sd_event *event, const EioConfig *config, const EioCallbacks *callbacks,
                   void *userdata, EioServer **ret);
EioServer *eio_server_free(EioServer *s);
const char *eio_server_path(const EioServer *s);
/* Close every session (server shutdown). */
void eio_server_close_all(EioServer *s, const char *reason);
unsigned eio_server_n_sessions(const EioServer *s);

/* Queue a message. Text data must be UTF-8. */
int eio_session_send(EioSession *s, bool binary, const void *data, size_t size);
/* Queue a message whose body is in `b` (taken over). Text: b starts with the type digit '4'.
 * The buffer must have LWS_PRE bytes of headroom (buffer_set_headroom) so it goes out
 * over WebSocket without another copy. */
int eio_session_send_buffer(EioSession *s, bool binary, Buffer *b);
/* Queue a message shared with others (a reference is taken; the blob is never modified). */
int eio_session_send_blob(EioSession *s, bool binary, Blob *b);
void eio_session_close(EioSession *s, const char *reason);
bool eio_session_is_closed(const EioSession *s);
const char *eio_session_sid(const EioSession *s);
size_t eio_session_backlog(const EioSession *s);
void eio_session_set_userdata(EioSession *s, void *userdata);
void *eio_session_get_userdata(const EioSession *s);

/* The table http_server_add_eio() takes: the entry points below. */
extern const HttpEioOps eio_http_ops;

/* Entry points for http-server.c and http-conn.c (through eio_http_ops). */
void eio_server_handle_request(EioServer *s, HttpConn *c);
void eio_conn_post_chunk(HttpConn *c, const uint8_t *data, size_t size);
void eio_server_handle_body(EioServer *s, HttpConn *c);
void eio_conn_http_closed(HttpConn *c);
/* WebSocket: check before the upgrade (0 accept; <0 refuse, answered when it is still plain
 * HTTP), then established/rx/tx/closed. */
int eio_server_ws_check(EioServer *s, HttpConn *c);
int eio_server_ws_established(EioServer *s, HttpConn *c);
int eio_conn_ws_receive(HttpConn *c, const uint8_t *data, size_t size);
int eio_conn_ws_writeable(HttpConn *c);
void eio_conn_ws_closed(HttpConn *c);

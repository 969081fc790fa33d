/* SPDX-License-Identifier: MIT */
#pragma once

/* Socket.IO v5 on top of Engine.IO sessions: namespaces, CONNECT with auth, events, acks and
 * binary attachments. A malformed packet closes that one connection and nothing else. */

#include <jansson.h>
#include <systemd/sd-event.h>

#include "buffer.h"
#include "eio-server.h"

typedef struct SioServer SioServer;
typedef struct SioSocket SioSocket;

typedef struct SioAttachment {
        const uint8_t *data;
        size_t size;
        bool too_large;    /* discarded: data/size hold only its head */
        size_t total_size; /* the size it had on the wire */
} SioAttachment;

typedef struct SioNamespace {
        const char *name;
        /* Decide on a CONNECT. Return NULL to accept, or the message of the CONNECT_ERROR. */
        const char *(*authorize)(SioServer *server, const json_t *auth, void *userdata);
        /* After the CONNECT reply went out. */
        void (*connected)(SioSocket *s, const json_t *auth, void *userdata);
        /* An EVENT/BINARY_EVENT: args is the whole data array (args[0] is the event name). The
         * attachments stay valid during the call only. ack_id is -1 when no ack was asked. */
        void (*event)(SioSocket *s, const char *event, json_t *args, const SioAttachment *att, size_t n_att,
                      int64_t ack_id, void *userdata);
        /* The socket left the namespace or the connection closed; the pointer dies after this. */
        void (*disconnect)(SioSocket *s, const char *reason, void *userdata);
        /* The connection's queue drained (EioCallbacks.drained): what was emitted on this socket
         * has gone out, but for at most the low-water mark of the connection. Optional. */
        void (*drained)(SioSocket *s, void *userdata);
        void *userdata;
} SioNamespace;

typedef struct SioConfig {
        unsigned connect_timeout_ms;
} SioConfig;

int sio_server_new(sd_event *event, const SioConfig *config, SioServer **ret);
SioServer *sio_server_free(SioServer *s);
int sio_server_add_namespace(SioServer *s, const SioNamespace *ns);
/* The Engine.IO callbacks to create the EioServer with (userdata = the SioServer). */
extern const EioCallbacks sio_eio_callbacks;

const char *sio_socket_id(const SioSocket *s);
const char *sio_socket_nsp(const SioSocket *s);
void sio_socket_set_userdata(SioSocket *s, void *userdata);
void *sio_socket_get_userdata(const SioSocket *s);
size_t sio_socket_backlog(const SioSocket *s);

/* Emit an event: args is the data array, event name first (reference stolen). Binary values
 * are placeholders {"_placeholder":true,"num":i} matching att[i]. */
int sio_socket_emit(SioSocket *s, json_t *args, const SioAttachment *att, size_t n_att);
/* Hot path: emit `event` with one argument, a binary attachment (shared: a reference is
 * taken, the caller keeps its own). */
int sio_socket_emit_binary1(SioSocket *s, const char *event, Blob *attachment);
/* Acknowledge: args is the ack's data array (reference stolen). */
int sio_socket_ack(SioSocket *s, int64_t ack_id, json_t *args, const SioAttachment *att, size_t n_att);
/* Leave the namespace from the server side (sends DISCONNECT). */
void sio_socket_disconnect(SioSocket *s);
/* Close the whole underlying connection. */
void sio_socket_close_connection(SioSocket *s, const char *reason);

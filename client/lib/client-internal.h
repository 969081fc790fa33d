/* SPDX-License-Identifier: MIT */
#pragma once

/* What client.c (the connection) and request.c (the calls) share. */

#include "agentix.h"
#include "buffer.h"
#include "call-envelope.h"
#include "envelope.h"
#include "sio-client.h"
#include "strmap.h"

#define MIB (1024u * 1024u)

/* Calls in flight on one client. */
#define CLIENT_MAX_CALLS 65536u
/* Bytes the client keeps to (re)send after a reconnect: envelopes of calls that are not sent
 * yet or may have to be sent again, and inbox items/cancels waiting for the connection. */
#define CLIENT_MAX_QUEUED_BYTES (64u * MIB)
/* Unread stream items per request (blocking use): at most this many and this many bytes
 * (a single larger item is still taken). */
#define REQUEST_MAX_ITEMS 65536u
#define REQUEST_MAX_ITEM_BYTES (64u * MIB)
/* The server enforces deadline_ms; the client gives it this long on top before it fails the
 * call itself (a server that does not answer at all, e.g. a silent network). */
#define DEADLINE_GRACE_USEC (2u * 1000000u)
/* Acks an unlucky drop may have swallowed (sent, never flushed) are sent again after a
 * reconnect: the last this many. A lost ack only costs the server memory until it evicts
 * the result, so this is bounded, not exhaustive. */
#define ACK_RING 1024u
/* Acks of delivered results wait to go out behind the next message the client sends, or
 * until its loop has nothing else to do (or a close): at most this many. */
#define ACKS_PENDING_MAX 64u
/* call_ids per resume message. */
#define RESUME_BATCH 4096u

/* Flow control of a bidi call's inbox (request-inbox.c). The worker holds 64 items
 * (INBOX_MAX_ITEMS) per inbox and fails the call beyond that, so at most this many items are
 * unacknowledged (sent, not yet taken by the function) at a time, and at most this many bytes
 * (a single larger item goes when nothing else is in flight). The last INBOX_URGENT_RESERVE
 * items of the window are kept for urgent items (signals, resizes), so a full window of data
 * never holds them up. */
#define INBOX_WINDOW_ITEMS 64u
#define INBOX_WINDOW_BYTES (16u * MIB)
#define INBOX_URGENT_RESERVE 8u
/* Items waiting in the client behind a full window (or for the connection): at most this many
 * and this many bytes (a single larger item when none waits), then agentix_request_send() says
 * -EAGAIN (or, for blocking use, waits). Urgent items wait in a queue of their own, at most
 * INBOX_URGENT_MAX of at most INBOX_URGENT_MAX_BYTES each. */
#define INBOX_QUEUE_ITEMS 64u
#define INBOX_QUEUE_BYTES (16u * MIB)
#define INBOX_URGENT_MAX 16u
#define INBOX_URGENT_MAX_BYTES (64u * 1024u)
/* A server older than flow control never sends call:in_ack; a current one sends the first
 * right after it accepts the call, before any item of it. When the window is full and none
 * came within this long (or an item came first), the call goes on without flow control. */
#define INBOX_ACK_TIMEOUT_USEC (3u * 1000000u)

typedef enum ClientState {
        CLIENT_IDLE,         /* never connected, or gone for good */
        CLIENT_CONNECTING,   /* the first connection of this session */
        CLIENT_CONNECTED,
        CLIENT_RECONNECTING, /* dropped; the Socket.IO client is reconnecting */
} ClientState;

/* A message waiting for the connection (call:in, call:end_in, cancel, ack). */
typedef struct OutMsg {
        struct OutMsg *next;
        const char *event;
        size_t size;
        uint8_t data[];
} OutMsg;

/* One inbox item of a bidi call: its call:in envelope, the seq filled in when it is sent. Kept
 * until the function has taken it, to send again when a drop may have lost it. */
typedef struct InboxMsg {
        struct InboxMsg *next;
        uint64_t seq;
        size_t size;
        uint8_t data[];
} InboxMsg;

typedef struct InboxQueue {
        InboxMsg *head, *tail;
        size_t n, bytes;
} InboxQueue;

/* One unread item of a blocking-use request. */
typedef struct QueuedItem {
        struct QueuedItem *next;
        msgpack_unpacked value;
        size_t size;
} QueuedItem;

struct agentix_client {
        unsigned n_ref;
        bool freeing;

        sd_event *event;
        bool own_event;

        char *url;
        char *auth_json;
        agentix_options options; /* url/token/ca_pem point at our copies (token: NULL, it is in auth_json) */
        char *ca_pem;
        char *sandbox_id;              /* over TLS: the sandbox the certificate must name too */

        SioClient *sio;
        bool sio_reconnects;           /* sio retries by itself (after the first drop) */
        ClientState state;
        bool connected_once;           /* in this session */
        bool closing;                  /* agentix_client_close() under way */

        /* The first connection of a session. */
        agentix_connect_handler connect_handler;
        void *connect_userdata;
        sd_event_source *connect_timer;
        bool connect_timed_out;

        agentix_disconnect_handler disconnect_handler;
        void *disconnect_userdata;

        /* Every live request (finished ones too, while someone holds them), in start order;
         * the unfinished ones are also in `calls` by call_id. */
        agentix_request *requests_head, *requests_tail;
        StrMap *calls;

        CallIdPool call_ids;           /* randomness for the call_ids made here */

        char *acked[ACK_RING];         /* recent acks, see ACK_RING */
        unsigned acked_next;
        char pending_acks[ACKS_PENDING_MAX][RPC_CALL_ID_MAX + 1]; /* not sent yet */
        unsigned n_pending_acks;
        sd_event_source *ack_source;   /* idle-priority defer that sends them */

        OutMsg *out_head, *out_tail;
        size_t queued_bytes;

        /* The last reference may be dropped from a handler we called: the free then waits until
         * the outermost of our frames that call user code has returned. */
        unsigned dispatching;
        bool free_pending;
};

struct agentix_request {
        unsigned n_ref;
        agentix_client *client;        /* NULL once the client is gone */
        agentix_request *prev, *next;  /* client->requests */
        bool in_table;

        char id[RPC_CALL_ID_MAX + 1];
        agentix_call_shape shape;
        uint64_t deadline_ms;

        bool async;
        agentix_request_handlers handlers;
        void *userdata;

        /* The call envelope, kept while it may have to be sent (again): until the server
         * shows it has the call (an item, the end), or dropped when over the client's budget. */
        Buffer envelope;
        bool sent;                     /* emitted on some connection */
        bool resuming;                 /* named in a resume on this connection */
        bool resent;                   /* sent again after ResultUnavailable from a resume */
        bool inbox_closed;
        bool cancel_requested;

        sd_event_source *deadline_timer;

        /* The end. */
        bool done;
        agentix_error error;           /* kind NONE: success */
        bool has_result;               /* blocking use: the unary result, until taken */
        msgpack_unpacked result;

        /* Blocking use: unread items. */
        QueuedItem *items_head, *items_tail;
        size_t n_items, items_bytes;

        /* The bidi inbox (request-inbox.c). */
        InboxQueue in_flight;          /* sent, not yet taken by the function */
        InboxQueue in_resend;          /* sent on an older connection, to be sent again: first */
        InboxQueue in_waiting;         /* not sent yet: the window is full, or no connection */
        InboxQueue in_urgent;          /* the same for urgent items, which go first */
        uint64_t in_next_seq;          /* of the next item sent */
        uint64_t in_taken;             /* items the function has taken, as the server last said */
        bool in_acked;                 /* the server does flow control: it sent call:in_ack */
        bool in_unlimited;             /* it does not (an older server): items go out at once */
        bool end_in_waiting;           /* closed: call:end_in goes out behind the waiting items */
        bool end_in_sent;              /* … on this connection */
        bool want_writable;            /* a send said -EAGAIN: call `writable` when there is room… */
        bool blocked_urgent;           /* … in this queue … */
        size_t blocked_size;           /* … for an item of this size */
        agentix_writable_handler writable;
        void *writable_userdata;
        sd_event_source *ack_timer;    /* see INBOX_ACK_TIMEOUT_USEC */
        bool transport_full;           /* the connection's queue refused an item: wait for writable */
};

/* client.c */
bool client_is_connected(agentix_client *c);
/* Bracket code that may run user handlers (see `dispatching`). client_leave() may free c. */
void client_enter(agentix_client *c);
void client_leave(agentix_client *c);
/* Send now, or (queue == true) keep it for the next connection when not connected.
 * -ENOTCONN (not connected, not queued), -ENOBUFS (queue full), -EMSGSIZE. */
int client_emit(agentix_client *c, const char *event, const void *data, size_t size, bool queue);
void client_account(agentix_client *c, ssize_t delta);
/* CLIENT_MAX_QUEUED_BYTES, or max_message when larger (one call of any size may wait). */
size_t client_queue_limit(agentix_client *c);
/* Ack a delivered result (soon, see ACKS_PENDING_MAX; and remember it, see ACK_RING). */
void client_ack(agentix_client *c, const char *id);
/* Send the acks that wait now (see client_ack()). */
void client_flush_acks(agentix_client *c);
/* A call_id starts a new call: no old ack for it may be repeated. */
void client_forget_ack(agentix_client *c, const char *id);
/* Run the client's event loop until cond() holds or timeout_usec (0: none) passes. */
int client_run_until(agentix_client *c, bool (*cond)(void *userdata), void *userdata, uint64_t timeout_usec,
                     agentix_error *ret_error);
/* A one-line description of the connection state for errors ("not connected to …"). */
int client_not_connected_error(agentix_client *c, agentix_error *ret_error);

/* request.c */
void request_dispatch(agentix_request *r, const char *event, const msgpack_object *envelope, const uint8_t *raw,
                      size_t size);
/* End the request here, without the server's word (connection gone, local cancel, …). */
void request_fail(agentix_request *r, const agentix_error *e);
/* (Re)send the call on a fresh connection: emits `call` if never sent, else returns 1 when the
 * call_id must go into a resume. */
int request_on_connected(agentix_request *r);
/* The server sent an event for r larger than max_message (skipped). */
void request_too_large(agentix_request *r, const char *event, size_t size);
void request_detach(agentix_request *r);

/* request-inbox.c */
/* Queue one item (or the end of the inbox) and send what the window allows. */
int request_inbox_send(agentix_request *r, const void *item, size_t item_size, bool urgent);
int request_inbox_close(agentix_request *r);
/* call:in_ack {call_id, taken}. */
void request_inbox_ack(agentix_request *r, const msgpack_object *envelope);
/* A call:item came: a server that does flow control would have acked the call before it. */
void request_inbox_item_seen(agentix_request *r);
/* On a fresh connection (after the call or its resume went out): send the unacknowledged items
 * again — the server drops copies it has (by seq) — then what waits, then the end. */
void request_inbox_on_connected(agentix_request *r);
/* The connection's send queue, full when an item was refused, has room again. */
void request_inbox_on_transport_writable(agentix_request *r);
/* The call ended or the client goes: drop everything. */
void request_inbox_clear(agentix_request *r);

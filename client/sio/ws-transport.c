/* SPDX-License-Identifier: MIT */
#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>

#include <libwebsockets.h>

#include "log.h"
#include "uv-event.h"
#include "ws-context.h"
#include "ws-frame.h"
#include "ws-transport.h"

/* Payload of one frame of a large message, handed to lws at once (what the socket does not
 * take lws copies into its own buffer). */
#define WS_CHUNK (256u * 1024u)
/* Messages whose frames fit in this together are copied into one buffer and written with one
 * send(). */
#define WS_GATHER_MAX (64u * 1024u)
/* Written per writeable callback, to stay fair to other connections on the loop. */
#define WS_WRITE_BUDGET (4u * 1024u * 1024u)
/* Addresses of a name tried in turn ("localhost" is ::1 and 127.0.0.1). */
#define WS_ADDRESSES_MAX 8

/* A name lookup on libuv's thread pool. It outlives its transport when the transport goes
 * first (libuv still calls back): then `owner` is NULL and the callback only frees it. */
typedef struct Resolve {
        uv_getaddrinfo_t req;
        WsTransport *owner;
        WsContext *ctx;
} Resolve;

struct WsTransport {
        WsContext *ctx;
        char *host, *host_header, *path;
        char addresses[WS_ADDRESSES_MAX][INET6_ADDRSTRLEN];
        unsigned n_addresses, next_address;
        unsigned port;
        size_t max_message;
        OutQueue *queue;
        const EioTransportHandlers *handlers;
        void *userdata;

        struct lws *wsi;
        sd_event_source *start;
        Resolve *resolve;
        bool closed;       /* no handler calls any more */
        bool established;
        bool in_callback;  /* lws is calling us about this connection */
        bool shutting_down;
        bool retry_pending; /* the next address is to be tried */

        /* reassembly of the message being received */
        bool rx_active, rx_binary, rx_oversized;
        size_t rx_total;
        Buffer rx;

        size_t tx_offset;  /* payload bytes of the queue head already written */
        Buffer tx_gather;  /* small messages framed into one write */
        WsMaskKeys keys;
};

/* ---- reporting ------------------------------------------------------------------------------- */

/* The wsi is going away (lws frees it after this callback): forget it. */
static void detach_wsi(WsTransport *t, struct lws *wsi) {
        if (wsi)
                lws_set_wsi_user(wsi, NULL);
        if (t->wsi == wsi)
                t->wsi = NULL;
}

static void report_closed(WsTransport *t, int error, const char *message, bool upgrade_refused) {
        if (t->closed)
                return;
        t->closed = true;
        if (t->handlers->closed)
                t->handlers->closed(t->userdata, error, message, upgrade_refused);
}

/* A failure found by us while lws is calling us about `wsi`: report, and tell lws to close. */
static int fail(WsTransport *t, struct lws *wsi, int error, const char *message) {
        detach_wsi(t, wsi);
        report_closed(t, error, message, false);
        return -1;
}

/* ---- receiving ------------------------------------------------------------------------------- */

static int deliver(WsTransport *t, struct lws *wsi, const uint8_t *data, size_t size, bool binary) {
        EioPacket p;

        if (eio_ws_decode(data, size, binary, &p) < 0)
                return fail(t, wsi, -EBADMSG, "malformed Engine.IO packet over WebSocket");
        t->handlers->packet(t->userdata, &p);
        /* The handler may have closed us. */
        return t->closed ? -1 : 0;
}

static void rx_reset(WsTransport *t) {
        t->rx_active = t->rx_oversized = false;
        t->rx_total = 0;
        buffer_clear(&t->rx);
        /* Do not keep a huge reassembly buffer around on an idle connection. */
        if (t->rx.cap > 1024 * 1024)
                buffer_done(&t->rx);
}

static int on_receive(WsTransport *t, struct lws *wsi, const uint8_t *in, size_t len) {
        bool final = lws_is_final_fragment(wsi) && lws_remaining_packet_payload(wsi) == 0;
        int r;

        if (t->handlers->activity)
                t->handlers->activity(t->userdata);

        /* Fast path: a whole message in one callback needs no copy. */
        if (!t->rx_active && final) {
                bool binary = lws_frame_is_binary(wsi);
                if (len > t->max_message) {
                        t->handlers->too_large(t->userdata, binary, in, MIN(len, (size_t) EIO_TOO_LARGE_HEAD), len);
                        return t->closed ? -1 : 0;
                }
                return deliver(t, wsi, in, len, binary);
        }

        if (!t->rx_active) {
                t->rx_active = true;
                t->rx_binary = lws_frame_is_binary(wsi);
                t->rx_total = 0;
        }
        if (size_add_overflows(t->rx_total, len, &t->rx_total))
                return fail(t, wsi, -EMSGSIZE, "message too large");

        if (!t->rx_oversized && t->rx_total > t->max_message) {
                /* Keep only the head: enough for the layer above to name the call. */
                t->rx_oversized = true;
                if (t->rx.len > EIO_TOO_LARGE_HEAD)
                        t->rx.len = EIO_TOO_LARGE_HEAD;
        }
        if (t->rx_oversized)
                r = t->rx.len < EIO_TOO_LARGE_HEAD ? buffer_append(&t->rx, in, MIN(len, EIO_TOO_LARGE_HEAD - t->rx.len))
                                                   : 0;
        else
                r = buffer_append(&t->rx, in, len);
        if (r < 0)
                return fail(t, wsi, r, "out of memory reassembling a message");

        if (!final)
                return 0;

        if (t->rx_oversized) {
                t->handlers->too_large(t->userdata, t->rx_binary, buffer_data(&t->rx), t->rx.len, t->rx_total);
                r = t->closed ? -1 : 0;
        } else
                r = deliver(t, wsi, buffer_data(&t->rx), t->rx.len, t->rx_binary);
        if (!t->closed)
                rx_reset(t);
        return r;
}

/* ---- sending ----------------------------------------------------------------------------- */

/* Frames are made here rather than by lws_write(), which in lws 4.1 reads /dev/urandom for
 * every frame's key, masks byte by byte and sends every frame with a send() of its own (four
 * per call: an event's text and attachment, and an ack's). lws gets raw bytes instead
 * (LWS_WRITE_RAW goes straight to its send path, which keeps what the socket does not take
 * and sends it before anything else, its own control frames included). Small messages are
 * gathered into one buffer, so an event, its attachment and the acks behind it leave in one
 * send(). A large message goes as frames of at most WS_CHUNK, each handed to lws whole, so
 * that a frame lws sends of its own accord (a pong) falls between them. */

static size_t frame_size(const OutMessage *m) {
        return ws_frame_header_size(m->data.len) + m->data.len;
}

static int write_raw(struct lws *wsi, uint8_t *p, size_t n) {
        return lws_write(wsi, p, n, LWS_WRITE_RAW) < (int) n ? -EIO : 0;
}

/* Frame the small messages at the head of the queue into one buffer, and write it. */
static int send_gathered(WsTransport *t, struct lws *wsi, size_t *ret_n) {
        OutMessage *m;
        int r;

        buffer_clear(&t->tx_gather);
        while ((m = t->queue->head) && frame_size(m) <= WS_GATHER_MAX - t->tx_gather.len) {
                size_t len = m->data.len;
                uint8_t key[4], *h;

                r = ws_mask_key(&t->keys, key);
                if (r >= 0)
                        r = buffer_reserve(&t->tx_gather, frame_size(m));
                if (r < 0)
                        return r;
                h = buffer_data(&t->tx_gather) + t->tx_gather.len;
                h += ws_frame_header(h, m->binary ? WS_OP_BINARY : WS_OP_TEXT, true, len, key);
                if (len > 0)
                        ws_mask(h, buffer_data(&m->data), len, key);
                t->tx_gather.len += frame_size(m);
                out_message_free(out_queue_pop(t->queue));
        }
        *ret_n = t->tx_gather.len;
        return write_raw(wsi, buffer_data(&t->tx_gather), t->tx_gather.len);
}

/* Write the next frame of a large message, masked in place, its header in the bytes just
 * before the chunk: the headroom, or the end of the previous chunk, which lws has sent or
 * copied by now. The message is not reused after this. */
static int send_chunk(WsTransport *t, struct lws *wsi, size_t *ret_n) {
        OutMessage *m = t->queue->head;
        uint8_t *p = buffer_data(&m->data) + t->tx_offset, h[WS_FRAME_HEADER_MAX], key[4];
        size_t left = m->data.len - t->tx_offset, n = MIN(left, (size_t) WS_CHUNK), hl;
        bool first = t->tx_offset == 0, last = n == left;
        int r;

        if (first && m->data.headroom < WS_FRAME_HEADER_MAX)
                return -EINVAL; /* every message is queued with LWS_PRE bytes of headroom */
        r = ws_mask_key(&t->keys, key);
        if (r < 0)
                return r;
        hl = ws_frame_header(h, first ? (m->binary ? WS_OP_BINARY : WS_OP_TEXT) : WS_OP_CONTINUATION, last, n, key);
        ws_mask(p, p, n, key);
        memcpy(p - hl, h, hl);
        r = write_raw(wsi, p - hl, hl + n);
        if (r < 0)
                return r;
        t->tx_offset += n;
        if (last) {
                t->tx_offset = 0;
                out_message_free(out_queue_pop(t->queue));
        }
        *ret_n = hl + n;
        return 0;
}

/* Write what is queued, as far as the socket takes it without lws buffering. Called from
 * lws's writeable callback, and directly by ws_transport_kick() when a message is queued
 * while the socket is idle. A negative errno means the connection is unusable. */
static int send_queued(WsTransport *t, struct lws *wsi) {
        size_t budget = WS_WRITE_BUDGET, since_check = 0;
        OutMessage *m;

        while ((m = t->queue->head) && budget > 0) {
                size_t n = 0;
                int r;

                if (t->tx_offset == 0 && frame_size(m) <= WS_GATHER_MAX)
                        r = send_gathered(t, wsi, &n);
                else
                        r = send_chunk(t, wsi, &n);
                if (r < 0)
                        return r;
                budget -= MIN(budget, n);
                since_check += n;

                /* What the socket did not take lws keeps: wait for the next writeable. Asking
                 * whether the pipe is choked costs a poll(), so only bulk data asks. */
                if (lws_partial_buffered(wsi))
                        break;
                if (since_check >= WS_CHUNK) {
                        since_check = 0;
                        if (lws_send_pipe_choked(wsi))
                                break;
                }
        }
        /* Do not keep a large gather buffer around on an idle connection. */
        if (t->tx_gather.cap > 2 * WS_GATHER_MAX)
                buffer_done(&t->tx_gather);
        return 0;
}

static int on_writeable(WsTransport *t, struct lws *wsi) {
        int r;

        r = send_queued(t, wsi);
        if (r < 0)
                return fail(t, wsi, r, "WebSocket write failed");
        if (t->queue->head) {
                lws_callback_on_writable(wsi);
                return 0;
        }
        if (t->shutting_down) {
                lws_close_reason(wsi, LWS_CLOSE_STATUS_NORMAL, NULL, 0);
                detach_wsi(t, wsi);
                report_closed(t, -ECONNRESET, "closed", false);
                return -1;
        }
        return 0;
}

/* ---- lws ------------------------------------------------------------------------------------- */

static int ws_callback(struct lws *wsi, enum lws_callback_reasons reason, void *user, void *in, size_t len) {
        WsTransport *t = user;

        switch (reason) {
        case LWS_CALLBACK_CLIENT_CONNECTION_ERROR: {
                const char *msg = in ? in : "connection failed";
                char text[256];
                bool refused;

                if (!t)
                        return 0;
                /* "HS: …" errors come after the server answered the upgrade request. */
                refused = strneq(msg, "HS:", 3);
                detach_wsi(t, wsi);
                if (!refused && !t->closed && t->next_address < t->n_addresses) {
                        /* The name has another address: try it, from the loop. */
                        log_debug("WebSocket connection to %s failed (%s), trying %s.", t->host_header, msg,
                                  t->addresses[t->next_address]);
                        t->retry_pending = true;
                        (void) sd_event_source_set_enabled(t->start, SD_EVENT_ONESHOT);
                        return 0;
                }
                snprintf(text, sizeof(text), "WebSocket connection to %s failed: %s", t->host_header, msg);
                report_closed(t, refused ? -EPROTO : -ECONNREFUSED, text, refused);
                return 0;
        }

        case LWS_CALLBACK_CLIENT_ESTABLISHED:
                if (!t)
                        return -1;
                if (t->closed)
                        return fail(t, wsi, 0, NULL);
                t->established = true;
                if (t->queue->head || t->shutting_down)
                        lws_callback_on_writable(wsi);
                return 0;

        case LWS_CALLBACK_CLIENT_RECEIVE: {
                int r;

                if (!t || t->closed)
                        return -1;
                t->in_callback = true;
                r = on_receive(t, wsi, in, len);
                t->in_callback = false;
                return r;
        }

        case LWS_CALLBACK_CLIENT_WRITEABLE: {
                int r;

                if (!t || t->closed)
                        return -1;
                t->in_callback = true;
                r = on_writeable(t, wsi);
                t->in_callback = false;
                return r;
        }

        case LWS_CALLBACK_WS_PEER_INITIATED_CLOSE:
                return 0;

        case LWS_CALLBACK_CLIENT_CLOSED:
        case LWS_CALLBACK_WSI_DESTROY:
                if (!t)
                        return 0;
                detach_wsi(t, wsi);
                report_closed(t, -ECONNRESET, "the WebSocket connection was closed", false);
                return 0;

        default:
                return 0;
        }
}

const struct lws_protocols ws_transport_protocols[] = {
        {
                .name = "agentix-sio-client",
                .callback = ws_callback,
                .per_session_data_size = 0, /* the transport is the user data */
                .rx_buffer_size = 64 * 1024,
                /* lws sends at most this (plus a little) of a raw write at once: a whole frame */
                .tx_packet_size = WS_CHUNK + WS_FRAME_HEADER_MAX,
        },
        { NULL, NULL, 0, 0, 0, NULL, 0 }
};

/* ---- connecting ------------------------------------------------------------------------------ */

static void connect_now(WsTransport *t) {
        struct lws_client_connect_info info = {
                .context = ws_context_lws(t->ctx),
                .address = t->addresses[t->next_address++],
                .port = (int) t->port,
                .path = t->path,
                .host = t->host_header,
                .origin = t->host_header,
                .protocol = NULL, /* Socket.IO clients ask for no subprotocol */
                .local_protocol_name = ws_transport_protocols[0].name,
                .userdata = t,
                .ietf_version_or_minus_one = -1,
        };
        struct lws *wsi;

        t->retry_pending = false;
        wsi = lws_client_connect_via_info(&info);
        if (!wsi) {
                /* Usually CONNECTION_ERROR was called already (and may have scheduled the next
                 * address); if not, report here. */
                if (!t->retry_pending)
                        report_closed(t, -ECONNREFUSED, "WebSocket connection failed", false);
                return;
        }
        /* A connection that failed inside the call was reported and is lws's to free. */
        if (t->closed)
                return;
        t->wsi = wsi;
}

static int on_start(sd_event_source *s, void *userdata) {
        WsTransport *t = userdata;

        if (!t->closed && t->next_address < t->n_addresses)
                connect_now(t);
        ws_context_run(t->ctx);
        return 0;
}

static void on_resolved(uv_getaddrinfo_t *req, int status, struct addrinfo *res) {
        Resolve *rs = req->data;
        WsTransport *t = rs->owner;

        ws_context_resolve_done(rs->ctx);
        if (t) {
                t->resolve = NULL;
                if (status < 0 || !res) {
                        char text[256];
                        snprintf(text, sizeof(text), "Failed to resolve %s: %s", t->host,
                                 status < 0 ? uv_strerror(status) : "no address");
                        report_closed(t, -EHOSTUNREACH, text, false);
                } else {
                        for (struct addrinfo *ai = res; ai && t->n_addresses < WS_ADDRESSES_MAX; ai = ai->ai_next) {
                                const void *a = ai->ai_family == AF_INET6
                                                        ? (const void *) &((struct sockaddr_in6 *) ai->ai_addr)->sin6_addr
                                                        : (const void *) &((struct sockaddr_in *) ai->ai_addr)->sin_addr;
                                if ((ai->ai_family == AF_INET || ai->ai_family == AF_INET6) &&
                                    inet_ntop(ai->ai_family, a, t->addresses[t->n_addresses], INET6_ADDRSTRLEN))
                                        t->n_addresses++;
                        }
                        if (t->n_addresses == 0)
                                report_closed(t, -EHOSTUNREACH, "no usable address", false);
                        else
                                connect_now(t);
                }
        }
        if (res)
                uv_freeaddrinfo(res);
        free(rs);
}

static bool is_address_literal(const char *host) {
        uint8_t buf[sizeof(struct in6_addr)];

        return inet_pton(AF_INET, host, buf) == 1 || inet_pton(AF_INET6, host, buf) == 1;
}

int ws_transport_new(WsContext *ctx, const WsTarget *target, size_t max_message, OutQueue *queue,
                     const EioTransportHandlers *handlers, void *userdata, WsTransport **ret) {
        WsTransport *t;
        int r;

        if (target->tls)
                return -EPROTONOSUPPORT;

        t = calloc(1, sizeof(*t));
        if (!t)
                return -ENOMEM;
        t->ctx = ctx;
        t->port = target->port;
        t->max_message = max_message;
        t->queue = queue;
        t->handlers = handlers;
        t->userdata = userdata;
        t->host = strdup(target->host);
        t->host_header = strdup(target->host_header);
        t->path = strdup(target->path);
        if (!t->host || !t->host_header || !t->path) {
                r = -ENOMEM;
                goto fail;
        }

        /* Connections start from the loop, so that handlers never run inside this call. */
        r = sd_event_add_defer(ws_context_event(ctx), &t->start, on_start, t);
        if (r < 0)
                goto fail;
        if (is_address_literal(t->host)) {
                strcpy(t->addresses[0], t->host);
                t->n_addresses = 1;
        } else {
                struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_flags = AI_ADDRCONFIG };
                Resolve *rs;

                /* A name: look it up on libuv's thread pool first; the lookup starts the connection. */
                (void) sd_event_source_set_enabled(t->start, SD_EVENT_OFF);
                rs = calloc(1, sizeof(*rs));
                if (!rs) {
                        r = -ENOMEM;
                        goto fail;
                }
                rs->owner = t;
                rs->ctx = ctx;
                rs->req.data = rs;
                r = uv_getaddrinfo(ws_context_loop(ctx), &rs->req, on_resolved, t->host, NULL, &hints);
                if (r < 0) {
                        free(rs);
                        goto fail;
                }
                ws_context_resolve_started(ctx);
                t->resolve = rs;
                ws_context_run(ctx);
        }

        *ret = t;
        return 0;
fail:
        ws_transport_free(t);
        return r;
}

void ws_transport_kick(WsTransport *t) {
        if (!t || !t->wsi || !t->established || t->closed)
                return;

        /* Outside lws's callbacks with nothing left over in lws: write now. Asking lws for a
         * writeable callback instead costs a trip through the libuv loop (which only applies
         * the request to its epoll set when it runs) and four epoll_ctl()s. */
        if (!t->in_callback && !t->shutting_down && !lws_partial_buffered(t->wsi)) {
                int r = send_queued(t, t->wsi);
                if (r < 0) {
                        report_closed(t, r, "WebSocket write failed", false);
                        ws_transport_close(t);
                        return;
                }
                /* lws asked for POLLOUT itself if it kept a remainder: let uv apply that. */
                if (!t->queue->head) {
                        if (lws_partial_buffered(t->wsi))
                                ws_context_wakeup(t->ctx);
                        return;
                }
        }
        lws_callback_on_writable(t->wsi);
        ws_context_wakeup(t->ctx);
}

void ws_transport_shutdown(WsTransport *t) {
        if (!t || t->closed)
                return;
        t->shutting_down = true;
        ws_transport_kick(t);
}

void ws_transport_close(WsTransport *t) {
        if (!t)
                return;
        t->closed = true;
        (void) sd_event_source_set_enabled(t->start, SD_EVENT_OFF);
        if (t->resolve) {
                t->resolve->owner = NULL;
                (void) uv_cancel((uv_req_t *) &t->resolve->req);
                t->resolve = NULL;
        }
        if (t->wsi) {
                struct lws *wsi = t->wsi;
                int fd = lws_get_socket_fd(wsi);

                /* As abrupt as a network failure: no close frame. lws notices the dead socket
                 * and frees the wsi on its next service; it no longer knows us. */
                if (fd >= 0)
                        (void) shutdown(fd, SHUT_RDWR);
                detach_wsi(t, wsi);
                lws_set_timeout(wsi, PENDING_TIMEOUT_USER_OK, LWS_TO_KILL_ASYNC);
                ws_context_wakeup(t->ctx);
        }
}

WsTransport *ws_transport_free(WsTransport *t) {
        if (!t)
                return NULL;
        ws_transport_close(t);
        sd_event_source_disable_unref(t->start);
        buffer_done(&t->rx);
        buffer_done(&t->tx_gather);
        free(t->host);
        free(t->host_header);
        free(t->path);
        free(t);
        return NULL;
}

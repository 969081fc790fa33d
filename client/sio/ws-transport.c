/* SPDX-License-Identifier: MIT */
#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>

#include <libwebsockets.h>

#include "log.h"
#include "uv-event.h"
#include "ws-context.h"
#include "ws-transport.h"

/* Bytes handed to lws_write() at once: bigger writes are copied into lws's own buffer when the
 * socket cannot take them whole. */
#define WS_CHUNK (256u * 1024u)
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

        size_t tx_offset; /* bytes of the queue head already written */
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

/* Write what is queued, as far as the socket takes it without lws buffering. Returns -EIO
 * when a write failed (the connection is unusable). Called from lws's writeable callback, and
 * directly by ws_transport_kick() when a message is queued while the socket is idle. */
static int send_queued(WsTransport *t, struct lws *wsi) {
        size_t budget = WS_WRITE_BUDGET, since_check = 0;
        OutMessage *m;

        while ((m = t->queue->head) && budget > 0) {
                uint8_t *d = buffer_data(&m->data);
                size_t len = m->data.len, left = len - t->tx_offset, n = MIN(left, (size_t) WS_CHUNK);
                bool first = t->tx_offset == 0, last = n == left;
                int flags;

                flags = first ? (m->binary ? LWS_WRITE_BINARY : LWS_WRITE_TEXT) : LWS_WRITE_CONTINUATION;
                if (!last)
                        flags |= LWS_WRITE_NO_FIN;
                /* lws writes the frame header into the LWS_PRE bytes before the chunk (the
                 * headroom, or bytes of the previous chunk, already sent or copied) and masks
                 * the payload in place: the message is not reused after this. */
                if (lws_write(wsi, d + t->tx_offset, n, flags) < (int) n)
                        return -EIO;
                t->tx_offset += n;
                budget -= MIN(budget, n);
                since_check += n;

                if (last) {
                        t->tx_offset = 0;
                        out_message_free(out_queue_pop(t->queue));
                }
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
        return 0;
}

static int on_writeable(WsTransport *t, struct lws *wsi) {
        if (send_queued(t, wsi) < 0)
                return fail(t, wsi, -EIO, "WebSocket write failed");
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
                if (send_queued(t, t->wsi) < 0) {
                        report_closed(t, -EIO, "WebSocket write failed", false);
                        ws_transport_close(t);
                        return;
                }
                if (!t->queue->head)
                        return;
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
        free(t->host);
        free(t->host_header);
        free(t->path);
        free(t);
        return NULL;
}

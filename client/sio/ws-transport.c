/* SPDX-License-Identifier: MIT */
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "eio-packet.h"
#include "log.h"
#include "resolve.h"
#include "tls.h"
#include "ws-frame.h"
#include "ws-handshake.h"
#include "ws-receive.h"
#include "ws-transport.h"

/* Read buffer for small messages; many arrive per recv(). */
#define WS_READ_SIZE (256u * 1024u)
/* A frame payload at least this large still to come is read straight into its message. */
#define WS_DIRECT_MIN (32u * 1024u)
/* Payload of one frame of a large message; a pong can go out between two. */
#define WS_CHUNK (256u * 1024u)
/* Messages whose frames fit in this together are copied into one buffer and sent at once. */
#define WS_GATHER_MAX (64u * 1024u)
/* Read, and written, per event at most: fair to other sources on the loop. */
#define WS_IO_BUDGET (4u * 1024u * 1024u)
/* Addresses of a name tried in turn ("localhost" is ::1 and 127.0.0.1). */
#define WS_ADDRESSES_MAX 8
/* Pongs owed beyond this are not queued (a peer pinging faster than it reads). */
#define WS_CONTROL_OUT_MAX 1024u

typedef enum WsState {
        WS_RESOLVING,
        WS_CONNECTING,
        WS_TLS,
        WS_HANDSHAKE,
        WS_OPEN,
} WsState;

struct WsTransport {
        sd_event *event;
        char *host, *host_header, *path;
        char *tls_sandbox_id; /* wss://: the sandbox the certificate must name, or NULL */
        unsigned port;
        size_t max_message;
        OutQueue *queue;
        const EioTransportHandlers *handlers;
        void *userdata;

        WsState state;
        bool closed;         /* no handler calls any more */
        bool shutting_down;  /* close once the queue is sent */
        bool close_queued;   /* our close frame is made */

        ResolveQuery *resolve;
        struct sockaddr_storage addresses[WS_ADDRESSES_MAX];
        socklen_t address_sizes[WS_ADDRESSES_MAX];
        unsigned n_addresses, next_address;
        int connect_error;

        int fd;
        sd_event_source *io;
        uint32_t io_events;
        SSL_CTX *tls_ctx;    /* wss:// */
        SSL *ssl;
        uint32_t tls_wants;  /* what the last TLS read or write waits for beside the usual */

        char accept[WS_ACCEPT_LEN + 1];
        Buffer head; /* the handshake answer so far */
        WsReceiver rx;
        uint8_t *read_buf;

        /* the frame (or gathered frames) being sent */
        const uint8_t *tx_ptr;
        size_t tx_left;
        bool tx_ends_message; /* the queue head is done when this is sent */
        bool tx_is_close;
        size_t tx_offset;     /* payload bytes of the queue head already framed */
        Buffer tx_gather;
        Buffer control_out;   /* pongs waiting for the next frame boundary */
        WsMaskKeys keys;
};

/* ---- reporting ------------------------------------------------------------------------------- */

static void report_closed(WsTransport *t, int error, const char *message, bool upgrade_refused) {
        if (t->closed)
                return;
        ws_transport_close(t);
        if (t->handlers->closed)
                t->handlers->closed(t->userdata, error, message, upgrade_refused);
}

static void report_errno(WsTransport *t, int error, const char *what) {
        char text[256];

        snprintf(text, sizeof(text), "%s %s: %s", what, t->host_header, strerror(-error));
        report_closed(t, error, text, false);
}

static void update_events(WsTransport *t) {
        uint32_t events;

        if (t->closed || !t->io)
                return;
        if (t->state == WS_CONNECTING)
                events = EPOLLOUT;
        else
                events = EPOLLIN | (t->tx_left > 0 || (t->state == WS_OPEN && !out_queue_is_empty(t->queue)) ? EPOLLOUT : 0) |
                         t->tls_wants;
        if (events != t->io_events && sd_event_source_set_io_events(t->io, events) >= 0)
                t->io_events = events;
}

/* ---- the socket, plain or TLS ---------------------------------------------------------------- */

/* send()/recv() as on a plain socket: -1 with errno (EAGAIN when it would block), 0 from a read
 * at the end of the stream. Over TLS, what the socket must become ready for is kept in
 * tls_wants (a TLS read may have to write first, and a write to read). */
static ssize_t sock_send(WsTransport *t, const void *buf, size_t size) {
        uint32_t wants = 0;
        ssize_t n;

        if (!t->ssl)
                return send(t->fd, buf, size, MSG_NOSIGNAL | MSG_DONTWAIT);
        n = tls_write(t->ssl, buf, size, &wants);
        t->tls_wants = n == -EAGAIN ? wants : 0;
        if (n >= 0)
                return n;
        errno = (int) -n;
        return -1;
}

static ssize_t sock_recv(WsTransport *t, void *buf, size_t size) {
        uint32_t wants = 0;
        ssize_t n;

        if (!t->ssl)
                return recv(t->fd, buf, size, MSG_DONTWAIT);
        n = tls_read(t->ssl, buf, size, &wants);
        t->tls_wants = n == -EAGAIN ? wants : 0;
        if (n >= 0)
                return n;
        if (n == -EPIPE)
                return 0; /* the server ended the TLS session */
        errno = (int) -n;
        return -1;
}

/* ---- sending --------------------------------------------------------------------------------- */

static size_t frame_size(const OutMessage *m) {
        return ws_frame_header_size(m->data.len) + m->data.len;
}

/* Append one masked frame with `len` payload bytes to b. */
static int append_frame(WsTransport *t, Buffer *b, unsigned opcode, const uint8_t *payload, size_t len) {
        uint8_t key[4], *h;
        int r;

        r = ws_mask_key(&t->keys, key);
        if (r >= 0)
                r = buffer_reserve(b, ws_frame_header_size(len) + len);
        if (r < 0)
                return r;
        h = buffer_data(b) + b->len;
        h += ws_frame_header(h, opcode, true, len, key);
        if (len > 0)
                ws_mask(h, payload, len, key);
        b->len += ws_frame_header_size(len) + len;
        return 0;
}

/* The next large-message frame: masked in place, its header written into the bytes just
 * before it (the headroom, or the end of the previous chunk, which is sent by now). The
 * message is not reused after this. */
static int prepare_chunk(WsTransport *t) {
        OutMessage *m = t->queue->head;
        uint8_t *p = buffer_data(&m->data) + t->tx_offset, h[WS_FRAME_HEADER_MAX], key[4];
        size_t left = m->data.len - t->tx_offset, n = MIN(left, (size_t) WS_CHUNK), hl;
        bool first = t->tx_offset == 0, last = n == left;
        int r;

        if (first && m->data.headroom < WS_FRAME_HEADER_MAX)
                return -EINVAL; /* every message is queued with EIO_OUT_HEADROOM */
        r = ws_mask_key(&t->keys, key);
        if (r < 0)
                return r;
        hl = ws_frame_header(h, first ? (m->binary ? WS_OP_BINARY : WS_OP_TEXT) : WS_OP_CONTINUATION, last, n, key);
        ws_mask(p, p, n, key);
        memcpy(p - hl, h, hl);
        t->tx_ptr = p - hl;
        t->tx_left = hl + n;
        t->tx_offset += n;
        t->tx_ends_message = last;
        return 0;
}

/* Pick what goes out next: pongs owed, then small messages gathered into one buffer, or the
 * next frame of a large message; our close frame once everything is sent. 0: nothing. */
static int prepare_next(WsTransport *t) {
        OutMessage *m;
        int r;

        buffer_clear(&t->tx_gather);
        t->tx_ends_message = t->tx_is_close = false;

        if (t->control_out.len > 0) {
                r = buffer_append(&t->tx_gather, buffer_data(&t->control_out), t->control_out.len);
                if (r < 0)
                        return r;
                buffer_clear(&t->control_out);
        }
        if (t->tx_offset == 0)
                while ((m = t->queue->head) && frame_size(m) <= WS_GATHER_MAX - MIN(t->tx_gather.len, (size_t) WS_GATHER_MAX)) {
                        r = append_frame(t, &t->tx_gather, m->binary ? WS_OP_BINARY : WS_OP_TEXT, buffer_data(&m->data),
                                         m->data.len);
                        if (r < 0)
                                return r;
                        out_message_free(out_queue_pop(t->queue));
                }
        if (t->tx_gather.len == 0 && t->queue->head) {
                r = prepare_chunk(t);
                return r < 0 ? r : 1;
        }
        if (t->tx_gather.len == 0 && t->shutting_down && !t->close_queued) {
                static const uint8_t normal[2] = { 1000 >> 8, 1000 & 0xff };

                r = append_frame(t, &t->tx_gather, WS_OP_CLOSE, normal, sizeof(normal));
                if (r < 0)
                        return r;
                t->close_queued = t->tx_is_close = true;
        }
        if (t->tx_gather.len == 0)
                return 0;
        t->tx_ptr = buffer_data(&t->tx_gather);
        t->tx_left = t->tx_gather.len;
        return 1;
}

static void frame_sent(WsTransport *t) {
        if (t->tx_ends_message) {
                t->tx_ends_message = false;
                t->tx_offset = 0;
                out_message_free(out_queue_pop(t->queue));
        }
        if (t->tx_is_close) {
                /* Our close frame is out; the server's answer is not waited for. */
                (void) shutdown(t->fd, SHUT_WR);
                report_closed(t, -ECONNRESET, "closed", false);
        }
}

/* Send as much as the socket takes. Returns 0, or a negative errno once reported. */
static int write_pending(WsTransport *t) {
        size_t budget = WS_IO_BUDGET, queued_before = t->queue->bytes;

        while (!t->closed && budget > 0) {
                ssize_t n;

                if (t->tx_left == 0) {
                        int r;

                        if (t->state != WS_OPEN)
                                break;
                        r = prepare_next(t);
                        if (r < 0) {
                                report_errno(t, r, "Failed to frame a message to");
                                return r;
                        }
                        if (r == 0)
                                break;
                }
                n = sock_send(t, t->tx_ptr, t->tx_left);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        if (errno == EAGAIN)
                                break;
                        int r = -errno;
                        report_errno(t, r, "WebSocket write to");
                        return r;
                }
                t->tx_ptr += n;
                t->tx_left -= (size_t) n;
                budget -= MIN(budget, (size_t) n);
                if (t->tx_left == 0)
                        frame_sent(t);
        }
        /* Do not keep a large gather buffer around on an idle connection. */
        if (t->tx_left == 0 && t->tx_gather.cap > 2 * WS_GATHER_MAX)
                buffer_done(&t->tx_gather);
        update_events(t);
        if (!t->closed && t->queue->bytes < queued_before && t->handlers->sent)
                t->handlers->sent(t->userdata);
        return 0;
}

/* ---- receiving ------------------------------------------------------------------------------- */

static int on_message(void *userdata, bool binary, const uint8_t *data, size_t size) {
        WsTransport *t = userdata;
        EioPacket p;

        if (eio_ws_decode(data, size, binary, &p) < 0) {
                report_closed(t, -EBADMSG, "malformed Engine.IO packet over WebSocket", false);
                return -ECANCELED;
        }
        t->handlers->packet(t->userdata, &p);
        /* The handler may have closed us. */
        return t->closed ? -ECANCELED : 0;
}

static int on_too_large(void *userdata, bool binary, const uint8_t *head, size_t head_size, uint64_t size) {
        WsTransport *t = userdata;

        t->handlers->too_large(t->userdata, binary, head, head_size, (size_t) MIN(size, (uint64_t) SIZE_MAX));
        return t->closed ? -ECANCELED : 0;
}

static int on_ping(void *userdata, const uint8_t *data, size_t size) {
        WsTransport *t = userdata;

        if (t->control_out.len > WS_CONTROL_OUT_MAX)
                return 0;
        return append_frame(t, &t->control_out, WS_OP_PONG, data, size);
}

static int on_close(void *userdata, unsigned code, const uint8_t *reason, size_t reason_size) {
        WsTransport *t = userdata;
        char text[256];

        /* Answer with a close frame if nothing is half sent; best effort, the socket goes. */
        if (!t->close_queued && t->tx_left == 0) {
                uint8_t echo[2] = { (uint8_t) (code >> 8), (uint8_t) code };

                buffer_clear(&t->tx_gather);
                if (append_frame(t, &t->tx_gather, WS_OP_CLOSE, echo, code ? 2 : 0) >= 0)
                        (void) sock_send(t, buffer_data(&t->tx_gather), t->tx_gather.len);
                t->close_queued = true;
        }
        if (code)
                snprintf(text, sizeof(text), "the WebSocket connection was closed by the server (%u%s%.*s)", code,
                         reason_size > 0 ? ": " : "", (int) MIN(reason_size, (size_t) 160), (const char *) reason);
        else
                snprintf(text, sizeof(text), "the WebSocket connection was closed by the server");
        report_closed(t, -ECONNRESET, text, false);
        return -ECANCELED;
}

static const WsReceiverHandlers receiver_handlers = {
        .message = on_message,
        .too_large = on_too_large,
        .ping = on_ping,
        .close = on_close,
};

static void receive_failed(WsTransport *t, int r) {
        if (t->closed)
                return;
        if (r == -EPROTO)
                report_closed(t, -EPROTO, "WebSocket protocol error: the server sent an invalid frame", false);
        else
                report_errno(t, r, "Failed to receive from");
}

/* Frames, read straight into a large message's buffer while its payload arrives. */
static void read_frames(WsTransport *t) {
        size_t budget = WS_IO_BUDGET;

        while (!t->closed && budget > 0) {
                uint8_t *space = t->read_buf;
                size_t size = WS_READ_SIZE;
                ssize_t n;
                int r;

                r = ws_receiver_direct(&t->rx, WS_DIRECT_MIN, &space, &size);
                if (r < 0)
                        return receive_failed(t, r);
                if (r == 0)
                        space = t->read_buf, size = WS_READ_SIZE;

                n = sock_recv(t, space, size);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        if (errno != EAGAIN)
                                report_errno(t, -errno, "WebSocket read from");
                        break;
                }
                if (n == 0) {
                        report_closed(t, -ECONNRESET, "the WebSocket connection was closed", false);
                        return;
                }
                if (t->handlers->activity)
                        t->handlers->activity(t->userdata);
                r = space == t->read_buf ? ws_receiver_feed(&t->rx, space, (size_t) n)
                                         : ws_receiver_direct_done(&t->rx, (size_t) n);
                if (r < 0)
                        return receive_failed(t, r);
                budget -= MIN(budget, (size_t) n);
                /* A short read emptied the socket: epoll says when there is more. (Over TLS a
                 * read gives one record: only when OpenSSL holds nothing more.) */
                if ((size_t) n < size && (!t->ssl || !SSL_has_pending(t->ssl)))
                        break;
        }
        ws_receiver_trim(&t->rx);
}

static void read_handshake_answer(WsTransport *t) {
        WsHandshakeAnswer answer;
        ssize_t n;
        int r;

        r = buffer_reserve(&t->head, 4096);
        if (r < 0)
                return report_errno(t, r, "Failed to read the WebSocket handshake answer of");
        n = sock_recv(t, buffer_data(&t->head) + t->head.len, t->head.cap - t->head.len);
        if (n < 0) {
                if (errno != EAGAIN && errno != EINTR)
                        report_errno(t, -errno, "WebSocket connection to");
                return;
        }
        if (n == 0)
                return report_closed(t, -ECONNRESET, "the server closed the connection during the WebSocket handshake",
                                     false);
        t->head.len += (size_t) n;

        r = ws_handshake_answer(buffer_data(&t->head), t->head.len, t->accept, &answer);
        if (r == 0)
                return;
        if (r < 0) {
                char text[256];

                if (r == -EPROTO)
                        snprintf(text, sizeof(text), "WebSocket upgrade refused by %s: HTTP %u, %s", t->host_header,
                                 answer.status, answer.problem);
                else
                        snprintf(text, sizeof(text), "WebSocket connection to %s failed: the answer is not HTTP",
                                 t->host_header);
                return report_closed(t, -EPROTO, text, r == -EPROTO);
        }

        t->state = WS_OPEN;
        t->read_buf = malloc(WS_READ_SIZE);
        if (!t->read_buf)
                return report_errno(t, -ENOMEM, "Failed to receive from");
        if (t->head.len > answer.head_size) {
                /* The server's first frames came with its answer. */
                if (t->handlers->activity)
                        t->handlers->activity(t->userdata);
                r = ws_receiver_feed(&t->rx, buffer_data(&t->head) + answer.head_size, t->head.len - answer.head_size);
                if (r < 0)
                        return receive_failed(t, r);
        }
        buffer_done(&t->head);
        log_debug("WebSocket connection to %s established.", t->host_header);
        (void) write_pending(t);
}

/* ---- connecting ------------------------------------------------------------------------------ */

static int start_handshake(WsTransport *t) {
        char key[WS_KEY_LEN + 1];
        int r;

        r = ws_handshake_key(key);
        if (r >= 0)
                r = ws_handshake_accept(key, t->accept);
        if (r >= 0) {
                buffer_clear(&t->tx_gather);
                r = ws_handshake_request(&t->tx_gather, t->host_header, t->path, key);
        }
        if (r < 0)
                return r;
        t->state = WS_HANDSHAKE;
        t->tx_ptr = buffer_data(&t->tx_gather);
        t->tx_left = t->tx_gather.len;
        return write_pending(t);
}

static void connect_next(WsTransport *t);

/* One step of the TLS handshake; on to the WebSocket handshake once it is done. */
static void tls_step(WsTransport *t) {
        uint32_t wants = 0;
        int r;

        r = tls_handshake_step(t->ssl, &wants);
        if (r == -EAGAIN) {
                t->tls_wants = 0;
                if (sd_event_source_set_io_events(t->io, wants) >= 0)
                        t->io_events = wants;
                return;
        }
        if (r < 0) {
                char reason[256], text[400];

                snprintf(text, sizeof(text), "TLS connection to %s refused: %s", t->host_header,
                         tls_handshake_error(t->ssl, -1, reason, sizeof(reason)));
                return report_closed(t, -EPERM, text, false);
        }
        r = start_handshake(t);
        if (r < 0)
                report_errno(t, r, "WebSocket connection to");
}

static int on_io(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        WsTransport *t = userdata;

        if (t->closed)
                return 0;

        if (t->state == WS_CONNECTING) {
                int error = 0;
                socklen_t len = sizeof(error);

                if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &len) < 0)
                        error = errno;
                if (error != 0) {
                        t->connect_error = -error;
                        connect_next(t);
                        return 0;
                }
                if (t->tls_ctx) {
                        int r = tls_client_new(t->tls_ctx, t->fd, t->host, t->tls_sandbox_id, &t->ssl);
                        if (r < 0) {
                                report_errno(t, r, "TLS connection to");
                                return 0;
                        }
                        t->state = WS_TLS;
                        tls_step(t);
                        return 0;
                }
                int r = start_handshake(t);
                if (r < 0)
                        report_errno(t, r, "WebSocket connection to");
                return 0;
        }
        if (t->state == WS_TLS) {
                tls_step(t);
                return 0;
        }
        /* Over TLS a read may wait for the socket to take data, and a write for data: on any
         * readiness both are tried (each stops at EAGAIN). */
        if (t->ssl)
                revents |= EPOLLIN | EPOLLOUT;

        if (revents & (EPOLLOUT | EPOLLERR))
                (void) write_pending(t);
        if (!t->closed && (revents & (EPOLLIN | EPOLLHUP | EPOLLERR))) {
                if (t->state == WS_HANDSHAKE)
                        read_handshake_answer(t);
                else
                        read_frames(t);
        }
        /* Messages queued by handlers while reading go out now. */
        if (!t->closed && t->state == WS_OPEN)
                (void) write_pending(t);
        return 0;
}

static void drop_socket(WsTransport *t) {
        t->io = sd_event_source_disable_unref(t->io);
        t->io_events = 0;
        SSL_free(t->ssl);
        t->ssl = NULL;
        t->tls_wants = 0;
        if (t->fd >= 0)
                close(t->fd);
        t->fd = -EBADF;
}

/* Try the addresses of the name in turn. */
static void connect_next(WsTransport *t) {
        static const int one = 1;
        char text[256];

        drop_socket(t);
        while (t->next_address < t->n_addresses) {
                const struct sockaddr *sa = (const struct sockaddr *) &t->addresses[t->next_address];
                socklen_t sa_size = t->address_sizes[t->next_address++];
                int r;

                t->fd = socket(sa->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, IPPROTO_TCP);
                if (t->fd < 0) {
                        t->connect_error = -errno;
                        continue;
                }
                (void) setsockopt(t->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
                if (connect(t->fd, sa, sa_size) < 0 && errno != EINPROGRESS) {
                        t->connect_error = -errno;
                        drop_socket(t);
                        continue;
                }
                r = sd_event_add_io(t->event, &t->io, t->fd, EPOLLOUT, on_io, t);
                if (r < 0) {
                        t->connect_error = r;
                        drop_socket(t);
                        continue;
                }
                (void) sd_event_source_set_description(t->io, "ws-transport");
                t->io_events = EPOLLOUT;
                t->state = WS_CONNECTING;
                return;
        }
        snprintf(text, sizeof(text), "WebSocket connection to %s failed: %s", t->host_header,
                 strerror(-(t->connect_error ?: -ECONNREFUSED)));
        report_closed(t, t->connect_error == -ECONNREFUSED || !t->connect_error ? -ECONNREFUSED : t->connect_error, text,
                      false);
}

/* ai belongs to the query: copy what is needed, free the query after. */
static void use_addresses(WsTransport *t, int error, const struct addrinfo *ai) {
        char text[256];

        if (error != 0) {
                snprintf(text, sizeof(text), "Failed to resolve %s: %s", t->host, gai_strerror(error));
                return report_closed(t, -EHOSTUNREACH, text, false);
        }
        for (; ai && t->n_addresses < WS_ADDRESSES_MAX; ai = ai->ai_next) {
                if (ai->ai_family == AF_INET) {
                        struct sockaddr_in *sin = (struct sockaddr_in *) &t->addresses[t->n_addresses];
                        memcpy(sin, ai->ai_addr, sizeof(*sin));
                        sin->sin_port = htons((uint16_t) t->port);
                        t->address_sizes[t->n_addresses++] = sizeof(*sin);
                } else if (ai->ai_family == AF_INET6) {
                        struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *) &t->addresses[t->n_addresses];
                        memcpy(sin6, ai->ai_addr, sizeof(*sin6));
                        sin6->sin6_port = htons((uint16_t) t->port);
                        t->address_sizes[t->n_addresses++] = sizeof(*sin6);
                }
        }
        if (t->n_addresses == 0)
                return report_closed(t, -EHOSTUNREACH, "no usable address", false);
        connect_next(t);
}

static void on_resolved(int error, const struct addrinfo *ai, void *userdata) {
        WsTransport *t = userdata;
        ResolveQuery *q = TAKE_PTR(t->resolve);

        use_addresses(t, error, ai);
        resolve_query_free(q);
}

int ws_transport_new(sd_event *event, const WsTarget *target, size_t max_message, OutQueue *queue,
                     const EioTransportHandlers *handlers, void *userdata, WsTransport **ret) {
        WsTransport *t;
        int r;

        if (target->tls && !target->tls_ctx)
                return -EPROTONOSUPPORT;

        t = calloc(1, sizeof(*t));
        if (!t)
                return -ENOMEM;
        t->event = sd_event_ref(event);
        t->fd = -EBADF;
        if (target->tls) {
                t->tls_ctx = target->tls_ctx;
                SSL_CTX_up_ref(t->tls_ctx);
        }
        t->port = target->port;
        t->max_message = max_message;
        t->queue = queue;
        t->handlers = handlers;
        t->userdata = userdata;
        ws_receiver_init(&t->rx, max_message, EIO_TOO_LARGE_HEAD, &receiver_handlers, t);
        t->host = strdup(target->host);
        t->host_header = strdup(target->host_header);
        if (target->tls_sandbox_id && !(t->tls_sandbox_id = strdup(target->tls_sandbox_id))) {
                r = -ENOMEM;
                goto fail;
        }
        t->path = strdup(target->path);
        if (!t->host || !t->host_header || !t->path) {
                r = -ENOMEM;
                goto fail;
        }

        /* The answer comes from the loop, so handlers never run inside this call. */
        t->state = WS_RESOLVING;
        r = resolve_start(event, t->host, on_resolved, t, &t->resolve);
        if (r < 0)
                goto fail;

        *ret = t;
        return 0;
fail:
        ws_transport_free(t);
        return r;
}

void ws_transport_kick(WsTransport *t) {
        if (!t || t->closed || t->state != WS_OPEN)
                return;
        (void) write_pending(t);
}

void ws_transport_shutdown(WsTransport *t) {
        if (!t || t->closed)
                return;
        t->shutting_down = true;
        ws_transport_kick(t);
}

void ws_transport_close(WsTransport *t) {
        if (!t || t->closed)
                return;
        t->closed = true;
        t->resolve = resolve_query_free(t->resolve);
        /* As abrupt as a network failure: no close frame. */
        if (t->fd >= 0)
                (void) shutdown(t->fd, SHUT_RDWR);
        (void) sd_event_source_set_enabled(t->io, SD_EVENT_OFF);
}

WsTransport *ws_transport_free(WsTransport *t) {
        if (!t)
                return NULL;
        ws_transport_close(t);
        drop_socket(t);
        ws_receiver_done(&t->rx);
        buffer_done(&t->head);
        buffer_done(&t->tx_gather);
        buffer_done(&t->control_out);
        free(t->read_buf);
        SSL_CTX_free(t->tls_ctx);
        free(t->host);
        free(t->host_header);
        free(t->path);
        free(t->tls_sandbox_id);
        sd_event_unref(t->event);
        free(t);
        return NULL;
}

/* SPDX-License-Identifier: MIT */
#include <malloc.h>
#include <sys/random.h>

#include <libwebsockets.h>

#include "eio-packet.h"
#include "eio-server.h"
#include "log.h"
#include "strmap.h"

#define EIO_SID_BYTES 15 /* 20 base64url characters */

typedef enum Transport {
        TRANSPORT_POLLING,
        TRANSPORT_WEBSOCKET,
} Transport;

typedef struct OutPacket {
        struct OutPacket *next;
        bool binary;
        /* text: type digit + data; binary: raw bytes. Either owned (data, with LWS_PRE
         * headroom) or shared (blob). */
        Buffer data;
        Blob *blob;
} OutPacket;

static const uint8_t *out_bytes(const OutPacket *p, size_t *ret_len) {
        if (p->blob) {
                *ret_len = p->blob->size;
                return p->blob->data;
        }
        *ret_len = p->data.len;
        return buffer_data(&p->data);
}

struct EioSession {
        EioServer *server;
        char sid[EIO_SID_BYTES * 4 / 3 + 1];
        Transport transport;
        bool closed;
        bool close_notified;
        bool upgrading; /* probe answered, waiting for the upgrade packet */

        HttpConn *poll_conn;  /* parked long-poll GET */
        HttpConn *ws_conn;    /* websocket (after upgrade or direct) */
        HttpConn *probe_conn; /* websocket being probed during an upgrade */

        OutPacket *out_head, *out_tail;
        size_t backlog;

        sd_event_source *ping_timer;
        bool waiting_pong;
        sd_event_source *upgrade_timer;
        sd_event_source *poll_flush; /* answers a parked GET once this loop iteration is done */

        void *userdata;
        struct EioSession *dead_next;
};

struct EioServer {
        sd_event *event;
        EioConfig config;
        char *path;
        EioCallbacks callbacks;
        void *userdata;
        StrMap *sessions;
        EioSession *dead; /* closed sessions waiting to be freed outside any callback */
        sd_event_source *reaper;
};

static void session_schedule_free(EioSession *s);
static void session_kick(EioSession *s);
static int on_poll_flush(sd_event_source *source, void *userdata);
static void unpark(EioSession *s);
static void respond_noop(HttpConn *c);

/* ---- sessions ---------------------------------------------------------------------------- */

static void out_packet_free(OutPacket *p) {
        buffer_done(&p->data);
        blob_unref(p->blob);
        free(p);
}

static int make_sid(char *out, size_t size) {
        uint8_t raw[EIO_SID_BYTES];
        static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
        size_t j = 0;

        if (getrandom(raw, sizeof(raw), 0) != sizeof(raw))
                return -EIO;
        for (size_t i = 0; i + 2 < sizeof(raw) && j + 4 < size; i += 3) {
                uint32_t v = (uint32_t) raw[i] << 16 | (uint32_t) raw[i + 1] << 8 | raw[i + 2];
                out[j++] = alphabet[(v >> 18) & 63];
                out[j++] = alphabet[(v >> 12) & 63];
                out[j++] = alphabet[(v >> 6) & 63];
                out[j++] = alphabet[v & 63];
        }
        out[j] = 0;
        return 0;
}

/* Queue a packet: takes over `data` (may be NULL) and one reference of `blob` (may be NULL). */
static int session_queue_packet(EioSession *s, bool binary, Buffer *data, Blob *blob) {
        OutPacket *p;
        size_t len;

        if (s->closed || !(p = calloc(1, sizeof(*p)))) {
                if (data)
                        buffer_done(data);
                blob_unref(blob);
                return s->closed ? -ENOTCONN : -ENOMEM;
        }
        p->binary = binary;
        if (data) {
                p->data = *data;
                *data = BUFFER_NULL;
        }
        p->blob = blob;

        if (s->out_tail)
                s->out_tail->next = p;
        else
                s->out_head = p;
        s->out_tail = p;
        (void) out_bytes(p, &len);
        s->backlog += len;

        if (s->server->config.max_backlog > 0 && s->backlog > s->server->config.max_backlog) {
                log_warning("Engine.IO session %s: client is not reading (%zu bytes queued), closing.", s->sid,
                            s->backlog);
                eio_session_close(s, "transport buffer full");
                return -ENOBUFS;
        }

        session_kick(s);
        return 0;
}

static int session_queue(EioSession *s, bool binary, Buffer *data) {
        return session_queue_packet(s, binary, data, NULL);
}

static int queue_text(EioSession *s, EioType type, const void *data, size_t n) {
        _cleanup_buffer_ Buffer b = BUFFER_NULL;
        int r;

        r = buffer_set_headroom(&b, LWS_PRE);
        if (r < 0)
                return r;
        r = eio_text_encode(&b, type, data, n);
        if (r < 0)
                return r;
        return session_queue(s, false, &b);
}

int eio_session_send(EioSession *s, bool binary, const void *data, size_t size) {
        _cleanup_buffer_ Buffer b = BUFFER_NULL;
        int r;

        if (!binary)
                return queue_text(s, EIO_MESSAGE, data, size);

        r = buffer_set_headroom(&b, LWS_PRE);
        if (r < 0)
                return r;
        r = buffer_append(&b, data, size);
        if (r < 0)
                return r;
        return session_queue(s, true, &b);
}

int eio_session_send_blob(EioSession *s, bool binary, Blob *b) {
        if (b && b->data - (const uint8_t *) b->mem < LWS_PRE)
                return -EINVAL;
        return session_queue_packet(s, binary, NULL, blob_ref(b));
}

int eio_session_send_buffer(EioSession *s, bool binary, Buffer *b) {
        if (b->headroom < LWS_PRE) {
                buffer_done(b);
                return -EINVAL;
        }
        return session_queue(s, binary, b);
}

static void ping_timer_arm(EioSession *s, unsigned ms) {
        uint64_t now;

        if (sd_event_now(s->server->event, CLOCK_MONOTONIC, &now) < 0)
                return;
        (void) sd_event_source_set_time(s->ping_timer, now + (uint64_t) ms * 1000ULL);
        (void) sd_event_source_set_enabled(s->ping_timer, SD_EVENT_ONESHOT);
}

static int on_ping_timer(sd_event_source *source, uint64_t usec, void *userdata) {
        EioSession *s = userdata;

        if (s->waiting_pong) {
                eio_session_close(s, "ping timeout");
                return 0;
        }
        s->waiting_pong = true;
        (void) queue_text(s, EIO_PING, NULL, 0);
        if (!s->closed)
                ping_timer_arm(s, s->server->config.ping_timeout_ms);
        return 0;
}

static int on_upgrade_timer(sd_event_source *source, uint64_t usec, void *userdata) {
        EioSession *s = userdata;

        /* The client opened a probe but never completed the upgrade: drop the probe only. */
        if (s->probe_conn) {
                HttpConn *c = s->probe_conn;
                s->probe_conn = NULL;
                s->upgrading = false;
                c->session = NULL;
                c->close_requested = true;
                http_conn_want_write(c);
        }
        return 0;
}

static int session_new(EioServer *server, Transport transport, EioSession **ret) {
        EioSession *s;
        int r;

        if (server->config.max_sessions > 0 && strmap_size(server->sessions) >= server->config.max_sessions)
                return -EUSERS;

        s = calloc(1, sizeof(*s));
        if (!s)
                return -ENOMEM;
        s->server = server;
        s->transport = transport;

        r = make_sid(s->sid, sizeof(s->sid));
        if (r < 0)
                goto fail;
        r = sd_event_add_time(server->event, &s->ping_timer, CLOCK_MONOTONIC, 0, 1, on_ping_timer, s);
        if (r < 0)
                goto fail;
        r = sd_event_add_time(server->event, &s->upgrade_timer, CLOCK_MONOTONIC, 0, 1, on_upgrade_timer, s);
        if (r < 0)
                goto fail;
        (void) sd_event_source_set_enabled(s->upgrade_timer, SD_EVENT_OFF);
        r = sd_event_add_defer(server->event, &s->poll_flush, on_poll_flush, s);
        if (r < 0)
                goto fail;
        (void) sd_event_source_set_enabled(s->poll_flush, SD_EVENT_OFF);
        r = strmap_put(server->sessions, s->sid, strlen(s->sid), s);
        if (r < 0)
                goto fail;

        ping_timer_arm(s, server->config.ping_interval_ms);
        *ret = s;
        return 0;
fail:
        sd_event_source_disable_unref(s->ping_timer);
        sd_event_source_disable_unref(s->upgrade_timer);
        sd_event_source_disable_unref(s->poll_flush);
        free(s);
        return r;
}

static int session_send_open(EioSession *s, bool can_upgrade) {
        _cleanup_buffer_ Buffer json = BUFFER_NULL;
        const EioConfig *c = &s->server->config;
        int r;

        r = eio_open_json(&json, s->sid, can_upgrade, c->ping_interval_ms, c->ping_timeout_ms, c->max_payload);
        if (r < 0)
                return r;
        return queue_text(s, EIO_OPEN, buffer_data(&json), json.len);
}

static int session_open(EioSession *s) {
        int r = 0;

        if (s->server->callbacks.open)
                r = s->server->callbacks.open(s, s->server->userdata);
        if (r < 0)
                eio_session_close(s, "refused");
        return r;
}

void eio_session_close(EioSession *s, const char *reason) {
        if (s->closed)
                return;
        s->closed = true;
        log_debug("Engine.IO session %s closed: %s", s->sid, reason);

        (void) strmap_remove(s->server->sessions, s->sid, strlen(s->sid));
        (void) sd_event_source_set_enabled(s->ping_timer, SD_EVENT_OFF);
        (void) sd_event_source_set_enabled(s->upgrade_timer, SD_EVENT_OFF);

        if (!s->close_notified) {
                s->close_notified = true;
                if (s->server->callbacks.close)
                        s->server->callbacks.close(s, reason, s->server->userdata);
        }

        /* Let a parked GET learn the session is over, and close the websockets once flushed. */
        if (s->poll_conn) {
                HttpConn *c = s->poll_conn;
                _cleanup_buffer_ Buffer b = BUFFER_NULL;

                s->poll_conn = NULL;
                c->session = NULL;
                c->parked = false;
                (void) eio_payload_append(&b, EIO_CLOSE, false, NULL, 0);
                (void) http_conn_respond(c, 200, "text/plain; charset=UTF-8", &b);
        }
        if (s->probe_conn) {
                s->probe_conn->session = NULL;
                s->probe_conn->close_requested = true;
                http_conn_want_write(s->probe_conn);
                s->probe_conn = NULL;
        }
        if (s->ws_conn) {
                /* The writeable handler flushes what is queued, then closes. */
                s->ws_conn->close_requested = true;
                http_conn_want_write(s->ws_conn);
        }

        session_schedule_free(s);
}

bool eio_session_is_closed(const EioSession *s) {
        return s->closed;
}

const char *eio_session_sid(const EioSession *s) {
        return s->sid;
}

size_t eio_session_backlog(const EioSession *s) {
        return s->backlog;
}

void eio_session_set_userdata(EioSession *s, void *userdata) {
        s->userdata = userdata;
}

void *eio_session_get_userdata(const EioSession *s) {
        return s->userdata;
}

static void session_free(EioSession *s) {
        OutPacket *p;

        if (s->ws_conn) {
                s->ws_conn->session = NULL;
                s->ws_conn = NULL;
        }
        while ((p = s->out_head)) {
                s->out_head = p->next;
                out_packet_free(p);
        }
        sd_event_source_disable_unref(s->ping_timer);
        sd_event_source_disable_unref(s->upgrade_timer);
        sd_event_source_disable_unref(s->poll_flush);
        free(s);
}

static int on_reap(sd_event_source *source, void *userdata) {
        EioServer *server = userdata;
        EioSession *s;

        while ((s = server->dead)) {
                server->dead = s->dead_next;
                /* A websocket still flushing keeps its session until lws closes it. */
                if (s->ws_conn) {
                        s->dead_next = NULL;
                        continue;
                }
                session_free(s);
        }
        /* The last client left: hand the memory its connection used back to the system, so an
         * idle server stays small. */
        if (strmap_size(server->sessions) == 0)
                (void) malloc_trim(0);
        return 0;
}

static void session_schedule_free(EioSession *s) {
        EioServer *server = s->server;

        if (s->ws_conn)
                return; /* freed from eio_conn_ws_closed() */
        s->dead_next = server->dead;
        server->dead = s;
        (void) sd_event_source_set_enabled(server->reaper, SD_EVENT_ONESHOT);
}

/* ---- delivering inbound packets ------------------------------------------------------------ */

static void session_deliver(EioSession *s, const EioPacket *p) {
        switch (p->type) {
        case EIO_MESSAGE:
                if (s->server->callbacks.message)
                        s->server->callbacks.message(s, p->binary, p->data, p->size, s->server->userdata);
                break;
        case EIO_PONG:
                if (s->waiting_pong) {
                        s->waiting_pong = false;
                        ping_timer_arm(s, s->server->config.ping_interval_ms);
                }
                break;
        case EIO_PING:
                /* v4 servers drive heartbeats; answer a client ping anyway, as the reference does. */
                (void) queue_text(s, EIO_PONG, p->data, p->size);
                break;
        case EIO_CLOSE:
                /* A client close answers its own parked GET with a noop, not a close packet. */
                if (s->poll_conn) {
                        HttpConn *g = s->poll_conn;
                        unpark(s);
                        respond_noop(g);
                }
                eio_session_close(s, "client close");
                break;
        case EIO_NOOP:
                break;
        default:
                eio_session_close(s, "unexpected packet");
                break;
        }
}

/* ---- HTTP long-polling ----------------------------------------------------------------------- */

/* python-engineio refuses a payload of more than 16 packets ("Too many packets in payload"),
 * so a long queue goes out over several polls; the client asks again right away. */
#define POLL_MAX_PACKETS 16

static int build_poll_payload(EioSession *s, Buffer *out) {
        size_t n = 0;
        OutPacket *p;
        int r;

        r = buffer_set_headroom(out, LWS_PRE);
        if (r < 0)
                return r;
        while ((p = s->out_head) && n++ < POLL_MAX_PACKETS) {
                size_t len;
                const uint8_t *d = out_bytes(p, &len);
                if (p->binary)
                        r = eio_payload_append(out, EIO_MESSAGE, true, d, len);
                else {
                        if (out->len > 0)
                                r = buffer_append_byte(out, EIO_RECORD_SEPARATOR);
                        if (r >= 0)
                                r = buffer_append(out, d, len);
                }
                if (r < 0)
                        return r;
                s->out_head = p->next;
                if (!s->out_head)
                        s->out_tail = NULL;
                s->backlog -= len;
                out_packet_free(p);
        }
        return 0;
}

/* Packets left the queue: tell the layer above when the client has caught up (flow control). */
static void session_notify_drained(EioSession *s) {
        EioServer *server = s->server;

        if (!s->closed && server->callbacks.drained && s->backlog <= server->config.drain_low_water)
                server->callbacks.drained(s, server->userdata);
}

static void respond_poll(EioSession *s, HttpConn *c) {
        _cleanup_buffer_ Buffer body = BUFFER_NULL;

        if (build_poll_payload(s, &body) < 0) {
                eio_session_close(s, "out of memory");
                return;
        }
        (void) http_conn_respond(c, 200, "text/plain; charset=UTF-8", &body);
        session_notify_drained(s);
}

static void respond_noop(HttpConn *c) {
        _cleanup_buffer_ Buffer b = BUFFER_NULL;

        (void) eio_payload_append(&b, EIO_NOOP, false, NULL, 0);
        (void) http_conn_respond(c, 200, "text/plain; charset=UTF-8", &b);
}

static void unpark(EioSession *s) {
        if (s->poll_conn) {
                s->poll_conn->parked = false;
                s->poll_conn->session = NULL;
                s->poll_conn = NULL;
        }
}

/* Something was queued: wake whichever transport carries it. */
static void session_kick(EioSession *s) {
        if (s->transport == TRANSPORT_WEBSOCKET) {
                if (s->ws_conn)
                        http_conn_want_write(s->ws_conn);
                return;
        }
        /* Answer the parked GET after everything queued in this loop iteration, not at the
         * first packet: an event and its attachment go out in one response, not two round
         * trips. */
        if (s->poll_conn)
                (void) sd_event_source_set_enabled(s->poll_flush, SD_EVENT_ONESHOT);
}

static int on_poll_flush(sd_event_source *source, void *userdata) {
        EioSession *s = userdata;

        if (s->poll_conn && s->out_head && !s->closed) {
                HttpConn *c = s->poll_conn;
                unpark(s);
                respond_poll(s, c);
        }
        return 0;
}

/* The checks and their order are engine.io's (Server.verify, then the handshake): the
 * transport, then the session, then what a handshake needs. */
static int parse_request_query(HttpConn *c, bool *ret_has_sid, bool *ret_websocket) {
        char eio[16], transport[32];

        if (http_conn_query(c, "transport", transport, sizeof(transport)) < 0 ||
            !(streq(transport, "polling") || streq(transport, "websocket")))
                return http_conn_respond_error(c, 400, 0, "Transport unknown"), -EINVAL;
        *ret_has_sid = http_conn_query(c, "sid", c->sid, sizeof(c->sid)) > 0;
        *ret_websocket = streq(transport, "websocket");
        if (!*ret_has_sid && c->method == HTTP_METHOD_GET &&
            (http_conn_query(c, "EIO", eio, sizeof(eio)) < 0 || !streq(eio, "4")))
                return http_conn_respond_error(c, 400, 5, "Unsupported protocol version"), -EINVAL;
        return 0;
}

void eio_server_handle_request(EioServer *server, HttpConn *c) {
        bool has_sid, websocket;
        EioSession *s;

        if (c->method == HTTP_METHOD_OPTIONS) {
                /* CORS preflight: headers are added by http_conn_respond(). */
                (void) http_conn_respond(c, 204, NULL, NULL);
                return;
        }
        if (parse_request_query(c, &has_sid, &websocket) < 0)
                return;
        if (websocket) {
                /* A plain HTTP request asking for the websocket transport. */
                (void) http_conn_respond_error(c, 400, 3, "Bad request");
                return;
        }

        if (!has_sid) {
                if (c->method != HTTP_METHOD_GET) {
                        (void) http_conn_respond_error(c, 400, 2, "Bad handshake method");
                        return;
                }
                if (session_new(server, TRANSPORT_POLLING, &s) < 0) {
                        (void) http_conn_respond_error(c, 503, 3, "Too many sessions");
                        return;
                }
                if (session_send_open(s, true) < 0 || session_open(s) < 0) {
                        eio_session_close(s, "handshake failed");
                        (void) http_conn_respond_error(c, 500, 3, "Handshake failed");
                        return;
                }
                respond_poll(s, c);
                return;
        }

        s = strmap_get(server->sessions, c->sid, strlen(c->sid));
        if (!s) {
                (void) http_conn_respond_error(c, 400, 1, "Session ID unknown");
                return;
        }
        if (s->transport != TRANSPORT_POLLING) {
                (void) http_conn_respond_error(c, 400, 3, "Bad request");
                return;
        }

        switch (c->method) {
        case HTTP_METHOD_GET:
                if (s->poll_conn) {
                        /* Two concurrent GETs: a protocol violation that ends the session. */
                        (void) http_conn_respond_error(c, 400, 3, "Bad request");
                        eio_session_close(s, "duplicate poll");
                        return;
                }
                if (s->out_head) {
                        respond_poll(s, c);
                        return;
                }
                if (s->upgrading) {
                        respond_noop(c);
                        return;
                }
                c->parked = true;
                c->session = s;
                s->poll_conn = c;
                return;

        case HTTP_METHOD_POST:
                /* The body arrives next; eio_server_handle_body() takes it from here. */
                c->post_stream = true;
                return;

        default:
                (void) http_conn_respond_error(c, 400, 3, "Bad request");
                return;
        }
}

typedef struct BodyContext {
        EioSession *session;
} BodyContext;

static int on_body_packet(const EioPacket *p, void *userdata) {
        BodyContext *ctx = userdata;
        EioSession *s = ctx->session;

        if (s->closed)
                return -ECANCELED;
        session_deliver(s, p);
        return 0;
}

/* A polling POST body is decoded packet by packet as it streams in, so memory stays bounded by
 * one message, and an oversized binary message is answered like over WebSocket: only its head
 * is kept (enough to name the call), the rest is skipped, the session lives on. */

static size_t post_packet_limit(const EioServer *server) {
        /* 'b' + base64 of a full-size message. */
        return 1 + (server->config.max_message + 2) / 3 * 4;
}

static int post_finish_packet(EioServer *server, HttpConn *c, EioSession *s) {
        const uint8_t *d = buffer_data(&c->body);
        BodyContext ctx = { .session = s };
        int r;

        if (c->post_packet_len == 0)
                return -EBADMSG; /* empty packet, or an empty payload */

        if (c->post_oversized) {
                size_t head_chars = c->body.len;
                if (d[0] != 'b' || !server->callbacks.message_too_large) {
                        eio_session_close(s, "message too large");
                        return -ECANCELED;
                }
                /* Decode the kept prefix, cut to whole base64 quads. */
                head_chars = 1 + (head_chars - 1) / 4 * 4;
                _cleanup_free_ uint8_t *head = malloc(head_chars);
                int n = head ? lws_b64_decode_string_len((const char *) d + 1, (int) head_chars - 1, (char *) head,
                                                         (int) head_chars)
                             : -1;
                server->callbacks.message_too_large(s, true, head, n > 0 ? (size_t) n : 0,
                                                    (c->post_packet_len - 1) / 4 * 3, server->userdata);
                r = 0;
        } else
                r = eio_payload_decode(d, c->body.len, on_body_packet, &ctx);

        buffer_clear(&c->body);
        c->post_packet_len = 0;
        c->post_oversized = false;
        return r;
}

/* Feed the next piece of a POST body. Errors are remembered and answered at completion. */
void eio_conn_post_chunk(HttpConn *c, const uint8_t *data, size_t n) {
        EioServer *server = c->eio;
        EioSession *s;

        if (c->post_error)
                return;
        s = strmap_get(server->sessions, c->sid, strlen(c->sid));
        if (!s || s->transport != TRANSPORT_POLLING || s->closed) {
                c->post_error = -ENOENT;
                return;
        }

        while (n > 0 && !c->post_error) {
                const uint8_t *sep = memchr(data, EIO_RECORD_SEPARATOR, n);
                size_t piece = sep ? (size_t) (sep - data) : n;

                c->post_packet_len += piece;
                if (!c->post_oversized) {
                        if (c->post_packet_len > post_packet_limit(server)) {
                                /* Keep what we have, cut to the head size, skip the rest. */
                                size_t keep = 1 + (EIO_OVERSIZED_HEAD + 2) / 3 * 4;
                                c->post_oversized = true;
                                if (c->body.len < keep &&
                                    buffer_append(&c->body, data, MIN(piece, keep - c->body.len)) < 0)
                                        c->post_error = -ENOMEM;
                                else if (c->body.len > keep)
                                        c->body.len = keep;
                        } else if (buffer_append(&c->body, data, piece) < 0)
                                c->post_error = -ENOMEM;
                }

                if (!sep)
                        break;
                if (!c->post_error) {
                        int r = post_finish_packet(server, c, s);
                        if (r < 0)
                                c->post_error = r;
                }
                data = sep + 1;
                n -= piece + 1;
        }
}

void eio_server_handle_body(EioServer *server, HttpConn *c) {
        _cleanup_buffer_ Buffer ok = BUFFER_NULL;
        EioSession *s;
        int r = c->post_error;

        s = strmap_get(server->sessions, c->sid, strlen(c->sid));
        if (r == -ENOENT || !s || s->transport != TRANSPORT_POLLING) {
                (void) http_conn_respond_error(c, 400, 1, "Session ID unknown");
                return;
        }
        if (r == 0 && !s->closed)
                r = post_finish_packet(server, c, s);
        if (r < 0 && r != -ECANCELED) {
                (void) http_conn_respond_error(c, 400, 3, "Bad request");
                eio_session_close(s, "parse error");
                return;
        }

        (void) buffer_append(&ok, "ok", 2);
        (void) http_conn_respond(c, 200, "text/html", &ok);
}

void eio_conn_http_closed(HttpConn *c) {
        EioSession *s = c->session;

        if (s && s->poll_conn == c)
                unpark(s);
        c->session = NULL;
        c->parked = false;
}

/* ---- WebSocket ------------------------------------------------------------------------------ */

/* A request to open a WebSocket. Checked twice: by http-conn.c before the hand-over, where a
 * refusal is answered like engine.io does (HTTP 400 with the error), and again by lws's filter,
 * where it can only close. */
int eio_server_ws_check(EioServer *server, HttpConn *c) {
        char eio[16], transport[32];
        int code = 3;
        const char *message = "Bad request";
        EioSession *s;

        if (http_conn_query(c, "transport", transport, sizeof(transport)) < 0 || !streq(transport, "websocket")) {
                code = 0;
                message = "Transport unknown";
                goto refuse;
        }
        if (http_conn_query(c, "sid", c->sid, sizeof(c->sid)) <= 0) {
                c->sid[0] = 0;
                if (http_conn_query(c, "EIO", eio, sizeof(eio)) < 0 || !streq(eio, "4")) {
                        code = 5;
                        message = "Unsupported protocol version";
                        goto refuse;
                }
                return 0;
        }
        s = strmap_get(server->sessions, c->sid, strlen(c->sid));
        if (!s || s->closed) {
                code = 1;
                message = "Session ID unknown";
                goto refuse;
        }
        /* Upgraded already, or upgrading over another socket: engine.io accepts that WebSocket
         * and closes it at once (eio_server_ws_established), and the session goes on. */
        return 0;

refuse:
        if (!c->wsi)
                (void) http_conn_respond_error(c, 400, code, message);
        return -EINVAL;
}

int eio_server_ws_established(EioServer *server, HttpConn *c) {
        EioSession *s;
        int r;

        if (c->sid[0]) {
                uint64_t now;

                s = strmap_get(server->sessions, c->sid, strlen(c->sid));
                if (!s || s->closed)
                        return -EINVAL;
                if (s->transport != TRANSPORT_POLLING || s->probe_conn) {
                        /* Not the session's to take: opened, then closed without a word. */
                        c->close_requested = true;
                        http_conn_want_write(c);
                        return 0;
                }
                s->probe_conn = c;
                c->session = s;
                if (sd_event_now(server->event, CLOCK_MONOTONIC, &now) >= 0) {
                        (void) sd_event_source_set_time(s->upgrade_timer,
                                                        now + (uint64_t) server->config.upgrade_timeout_ms * 1000ULL);
                        (void) sd_event_source_set_enabled(s->upgrade_timer, SD_EVENT_ONESHOT);
                }
                return 0;
        }

        r = session_new(server, TRANSPORT_WEBSOCKET, &s);
        if (r < 0)
                return r;
        s->ws_conn = c;
        c->session = s;
        r = session_send_open(s, false);
        if (r >= 0)
                r = session_open(s);
        if (r < 0) {
                eio_session_close(s, "handshake failed");
                return r;
        }
        return 0;
}

static void probe_receive(EioSession *s, HttpConn *c, const EioPacket *p) {
        if (p->type == EIO_PING && p->size == 5 && memcmp(p->data, "probe", 5) == 0 && !p->binary) {
                c->probe_pong_pending = true;
                s->upgrading = true;
                http_conn_want_write(c);
                /* Release the parked GET so the client can pause polling. */
                if (s->poll_conn && !s->out_head) {
                        HttpConn *g = s->poll_conn;
                        unpark(s);
                        respond_noop(g);
                }
                return;
        }
        if (p->type == EIO_UPGRADE && s->upgrading) {
                s->upgrading = false;
                s->probe_conn = NULL;
                (void) sd_event_source_set_enabled(s->upgrade_timer, SD_EVENT_OFF);
                if (s->poll_conn) {
                        HttpConn *g = s->poll_conn;
                        unpark(s);
                        respond_noop(g);
                }
                s->transport = TRANSPORT_WEBSOCKET;
                s->ws_conn = c;
                session_kick(s);
                return;
        }
        /* Anything else on a probe aborts the upgrade, not the session. */
        s->probe_conn = NULL;
        s->upgrading = false;
        c->session = NULL;
        c->close_requested = true;
        http_conn_want_write(c);
}

static void ws_message(HttpConn *c, const uint8_t *data, size_t size, bool binary) {
        EioSession *s = c->session;
        EioPacket p;

        if (!s || s->closed)
                return;
        if (eio_ws_decode(data, size, binary, &p) < 0) {
                eio_session_close(s, "parse error");
                return;
        }
        if (s->probe_conn == c) {
                probe_receive(s, c, &p);
                return;
        }
        session_deliver(s, &p);
}

int eio_conn_ws_receive(HttpConn *c, const uint8_t *data, size_t size) {
        EioServer *server;
        bool first = lws_is_first_fragment(c->wsi), final;

        if (!c->session)
                return 0;
        server = c->session->server;
        final = lws_is_final_fragment(c->wsi) && lws_remaining_packet_payload(c->wsi) == 0;

        /* Fast path: a whole message in one callback needs no reassembly copy. */
        if (first && final && c->rx.len == 0 && !c->rx_oversized) {
                if (size > server->config.max_message) {
                        if (server->callbacks.message_too_large)
                                server->callbacks.message_too_large(c->session, lws_frame_is_binary(c->wsi), data,
                                                                    MIN(size, (size_t) EIO_OVERSIZED_HEAD), size,
                                                                    server->userdata);
                        return 0;
                }
                ws_message(c, data, size, lws_frame_is_binary(c->wsi));
                return 0;
        }

        if (first && c->rx.len == 0 && !c->rx_oversized) {
                c->rx_binary = lws_frame_is_binary(c->wsi);
                c->rx_total = 0;
        }
        c->rx_total += size;

        if (!c->rx_oversized) {
                if (c->rx_total > server->config.max_message) {
                        /* Keep only the head: enough for the layer above to name the request. */
                        c->rx_oversized = true;
                        if (c->rx.len > EIO_OVERSIZED_HEAD)
                                c->rx.len = EIO_OVERSIZED_HEAD;
                        else if (buffer_append(&c->rx, data, MIN(size, EIO_OVERSIZED_HEAD - c->rx.len)) < 0)
                                return -1;
                } else if (buffer_append(&c->rx, data, size) < 0)
                        return -1;
        }

        if (!final)
                return 0;

        if (c->rx_oversized) {
                if (server->callbacks.message_too_large)
                        server->callbacks.message_too_large(c->session, c->rx_binary, buffer_data(&c->rx), c->rx.len,
                                                            c->rx_total, server->userdata);
        } else
                ws_message(c, buffer_data(&c->rx), c->rx.len, c->rx_binary);

        c->rx_oversized = false;
        c->rx_total = 0;
        buffer_clear(&c->rx);
        /* Do not keep a huge reassembly buffer around for an idle connection. */
        if (c->rx.cap > 1024 * 1024)
                buffer_done(&c->rx);
        return 0;
}

/* Largest piece handed to lws_write() at once: bigger writes are copied into lws's own
 * buffer when the socket cannot take them whole. */
#define WS_CHUNK (256u * 1024u)

int eio_conn_ws_writeable(HttpConn *c) {
        EioSession *s = c->session;
        size_t budget = 4u * 1024u * 1024u; /* per callback, to stay fair to other connections */

        if (c->probe_pong_pending) {
                uint8_t buf[LWS_PRE + 8];
                c->probe_pong_pending = false;
                memcpy(buf + LWS_PRE, "3probe", 6);
                if (lws_write(c->wsi, buf + LWS_PRE, 6, LWS_WRITE_TEXT) < 6)
                        return -1;
                if (s && s->ws_conn != c)
                        return 0;
        }

        if (s && s->ws_conn == c) {
                OutPacket *p;
                size_t since_check = 0;
                bool dequeued = false;

                while ((p = s->out_head) && budget > 0) {
                        size_t len;
                        uint8_t *d = (uint8_t *) out_bytes(p, &len);
                        size_t left = len - c->tx_offset, n = MIN(left, (size_t) WS_CHUNK);
                        bool first = c->tx_offset == 0, last = n == left;
                        uint8_t saved[LWS_PRE];
                        int flags, k;

                        flags = first ? (p->binary ? LWS_WRITE_BINARY : LWS_WRITE_TEXT) : LWS_WRITE_CONTINUATION;
                        if (!last)
                                flags |= LWS_WRITE_NO_FIN;

                        /* lws writes the frame header into the LWS_PRE bytes before the chunk. Past
                         * the first chunk those are data bytes, of a blob that may be shared (a
                         * cached result): keep them intact. lws_write() has sent or copied
                         * everything by the time it returns. */
                        if (!first)
                                memcpy(saved, d + c->tx_offset - LWS_PRE, LWS_PRE);
                        k = lws_write(c->wsi, d + c->tx_offset, n, flags);
                        if (!first)
                                memcpy(d + c->tx_offset - LWS_PRE, saved, LWS_PRE);
                        if (k < (int) n)
                                return -1;
                        c->tx_offset += n;
                        budget -= MIN(budget, n);
                        since_check += n;

                        if (last) {
                                c->tx_offset = 0;
                                s->out_head = p->next;
                                if (!s->out_head)
                                        s->out_tail = NULL;
                                s->backlog -= len;
                                out_packet_free(p);
                                dequeued = true;
                        }
                        /* lws keeps (copies) what the socket did not take; then wait for the next
                         * writeable callback. Asking whether the socket is choked costs a poll(),
                         * so small packets go out back to back and only bulk data asks. */
                        if (lws_partial_buffered(c->wsi))
                                break;
                        if (since_check >= WS_CHUNK) {
                                since_check = 0;
                                if (lws_send_pipe_choked(c->wsi))
                                        break;
                        }
                }
                if (dequeued)
                        session_notify_drained(s);
                if (s->out_head) {
                        http_conn_want_write(c);
                        return 0;
                }
        }

        if (c->close_requested) {
                lws_close_reason(c->wsi, LWS_CLOSE_STATUS_NORMAL, NULL, 0);
                return -1;
        }
        return 0;
}

void eio_conn_ws_closed(HttpConn *c) {
        EioSession *s = c->session;

        c->session = NULL;
        if (!s)
                return;
        if (s->probe_conn == c) {
                s->probe_conn = NULL;
                s->upgrading = false;
                return;
        }
        if (s->ws_conn == c) {
                s->ws_conn = NULL;
                if (!s->closed)
                        eio_session_close(s, "transport close");
                else
                        session_schedule_free(s);
        }
}

/* ---- server --------------------------------------------------------------------------------- */

int eio_server_new(sd_event *event, const EioConfig *config, const EioCallbacks *callbacks, void *userdata,
                   EioServer **ret) {
        EioServer *s;
        int r;

        s = calloc(1, sizeof(*s));
        if (!s)
                return -ENOMEM;
        s->event = sd_event_ref(event);
        s->config = *config;
        s->callbacks = *callbacks;
        s->userdata = userdata;
        s->path = strdup(config->path);
        s->sessions = strmap_new();
        if (!s->path || !s->sessions) {
                eio_server_free(s);
                return -ENOMEM;
        }
        s->config.path = s->path;
        r = sd_event_add_defer(event, &s->reaper, on_reap, s);
        if (r < 0) {
                eio_server_free(s);
                return r;
        }
        (void) sd_event_source_set_enabled(s->reaper, SD_EVENT_OFF);
        *ret = s;
        return 0;
}

void eio_server_close_all(EioServer *s, const char *reason) {
        EioSession *session;
        size_t state = 0;

        /* Closing removes from the map, so restart the walk after each close. */
        while ((session = strmap_iterate(s->sessions, &state))) {
                eio_session_close(session, reason);
                state = 0;
        }
}

unsigned eio_server_n_sessions(const EioServer *s) {
        return (unsigned) strmap_size(s->sessions);
}

EioServer *eio_server_free(EioServer *s) {
        EioSession *session;

        if (!s)
                return NULL;
        if (s->sessions)
                eio_server_close_all(s, "server shutdown");
        while ((session = s->dead)) {
                s->dead = session->dead_next;
                session_free(session);
        }
        sd_event_source_disable_unref(s->reaper);
        strmap_free(s->sessions);
        sd_event_unref(s->event);
        free(s->path);
        free(s);
        return NULL;
}

const char *eio_server_path(const EioServer *s) {
        return s->path;
}

const HttpEioOps eio_http_ops = {
        .path = eio_server_path,
        .handle_request = eio_server_handle_request,
        .post_chunk = eio_conn_post_chunk,
        .handle_body = eio_server_handle_body,
        .http_closed = eio_conn_http_closed,
        .ws_check = eio_server_ws_check,
        .ws_established = eio_server_ws_established,
        .ws_receive = eio_conn_ws_receive,
        .ws_writeable = eio_conn_ws_writeable,
        .ws_closed = eio_conn_ws_closed,
};

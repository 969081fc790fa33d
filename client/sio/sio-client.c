/* SPDX-License-Identifier: MIT */
#include <inttypes.h>

#include <jansson.h>

#include "eio-client.h"
#include "log.h"
#include "sio-client.h"
#include "sio-packet.h"
#include "sio-url.h"
#include "tls.h"

#define USEC_PER_MSEC ((uint64_t) 1000)
#define USEC_PER_SEC ((uint64_t) 1000000)
#define DEFAULT_CONNECT_TIMEOUT (10 * USEC_PER_SEC)
#define DEFAULT_RECONNECT_TIMEOUT (60 * USEC_PER_SEC)
#define DEFAULT_MAX_MESSAGE (256u * 1024u * 1024u)
#define BACKOFF_FIRST (100 * USEC_PER_MSEC)
#define BACKOFF_MAX (5 * USEC_PER_SEC)

typedef enum State {
        STATE_IDLE,       /* not started */
        STATE_CONNECTING, /* an attempt runs */
        STATE_CONNECTED,  /* joined the namespace */
        STATE_WAITING,    /* backing off before the next attempt */
        STATE_CLOSED,     /* for good */
} State;

/* One connection attempt, and the connection it becomes. Freed by the reaper once dead. */
typedef struct Conn {
        SioClient *client;
        EioClient *eio;
        EioClientTransport transport;
        bool joined;
        bool dead;

        /* A BINARY_EVENT whose attachments are still to come: the event name when it has the
         * one-attachment shape we deliver, NULL when its attachments are only skipped. */
        char *pending_event;
        unsigned pending_attachments;
        bool pending_first;

        struct Conn *next;
} Conn;

typedef enum NoticeKind {
        NOTICE_CONNECTED,
        NOTICE_DISCONNECTED,
        NOTICE_EVENT,
        NOTICE_TOO_LARGE,
        NOTICE_WRITABLE,
} NoticeKind;

/* A callback waiting to be made from the dispatcher. */
typedef struct Notice {
        NoticeKind kind;
        bool flag;    /* reconnected, final */
        int error;
        char *text;   /* event name, or message */
        Buffer data;  /* the attachment, or its head */
        size_t size;  /* the full size (TOO_LARGE) */
        struct Notice *next;
} Notice;

struct SioClient {
        sd_event *event;
        SioClientCallbacks callbacks;
        void *userdata;

        SioUrl url;
        SSL_CTX *tls_ctx;  /* url.tls: verifies the server */
        char *tls_ca_pem;
        char *tls_sandbox_id;
        char *nsp;
        json_t *auth;
        SioClientTransport transport;
        uint64_t connect_timeout;
        bool reconnect;
        uint64_t reconnect_timeout;
        size_t max_message;

        State state;
        Conn *conns;   /* every Conn not freed yet */
        Conn *current; /* the attempt or connection that counts */
        bool ever_connected;
        bool polling_settled; /* AUTO: the WebSocket upgrade was refused, polling worked */
        bool fell_back;       /* the current attempt is AUTO's fallback to polling */
        uint64_t backoff;
        uint64_t give_up_at;
        int last_error;
        char last_message[256];

        CurlEvent *curl;
        sd_event_source *attempt_timer;
        sd_event_source *retry_timer;
        sd_event_source *reaper;
        sd_event_source *dispatcher;
        Notice *notices, *notices_tail;
        unsigned hold;        /* sio_client_hold() depth: emits are queued, not sent */
        bool emit_refused;    /* an emit got -ENOBUFS: the next drain is told (writable) */
        bool dispatching;
        bool free_requested;
};

static void attempt_start(SioClient *c);
static void conn_lost(Conn *conn, int error, const char *message, bool upgrade_refused);

static char *mfree_str(char *s) {
        free(s);
        return NULL;
}

static uint64_t now(SioClient *c) {
        uint64_t t = 0;

        (void) sd_event_now(c->event, CLOCK_MONOTONIC, &t);
        return t;
}

/* ---- notices --------------------------------------------------------------------------------- */

static void notice_free(Notice *n) {
        free(n->text);
        buffer_done(&n->data);
        free(n);
}

static void notices_clear(SioClient *c) {
        Notice *n;

        while ((n = c->notices)) {
                c->notices = n->next;
                notice_free(n);
        }
        c->notices_tail = NULL;
}

/* Queue a callback. Out of memory loses it, which for a connection notice would leave the user
 * waiting forever: that is logged loudly. */
static Notice *notice_push(SioClient *c, NoticeKind kind, bool flag, int error, const char *text) {
        Notice *n;

        n = calloc(1, sizeof(*n));
        if (!n || (text && !(n->text = strdup(text)))) {
                free(n);
                log_error("Out of memory: a Socket.IO client callback is lost.");
                return NULL;
        }
        n->kind = kind;
        n->flag = flag;
        n->error = error;
        if (c->notices_tail)
                c->notices_tail->next = n;
        else
                c->notices = n;
        c->notices_tail = n;
        (void) sd_event_source_set_enabled(c->dispatcher, SD_EVENT_ONESHOT);
        return n;
}

static void client_destroy(SioClient *c);

static int on_dispatch(sd_event_source *s, void *userdata) {
        SioClient *c = userdata;
        const SioClientCallbacks *cb = &c->callbacks;
        Notice *n;

        c->dispatching = true;
        while (!c->free_requested && (n = c->notices)) {
                c->notices = n->next;
                if (!c->notices)
                        c->notices_tail = NULL;

                switch (n->kind) {
                case NOTICE_CONNECTED:
                        if (cb->connected)
                                cb->connected(c, n->flag, c->userdata);
                        break;
                case NOTICE_DISCONNECTED:
                        if (cb->disconnected)
                                cb->disconnected(c, n->flag, n->error, n->text, c->userdata);
                        break;
                case NOTICE_EVENT:
                        if (cb->event)
                                cb->event(c, n->text, buffer_data(&n->data) ?: (const uint8_t *) "", n->data.len,
                                          c->userdata);
                        break;
                case NOTICE_TOO_LARGE:
                        if (cb->message_too_large)
                                cb->message_too_large(c, n->text, buffer_data(&n->data) ?: (const uint8_t *) "",
                                                      n->data.len, n->size, c->userdata);
                        break;
                case NOTICE_WRITABLE:
                        if (cb->writable)
                                cb->writable(c, c->userdata);
                        break;
                }
                notice_free(n);
        }
        c->dispatching = false;
        if (c->free_requested)
                client_destroy(c);
        return 0;
}

/* ---- connections ----------------------------------------------------------------------------- */

static int on_reap(sd_event_source *s, void *userdata) {
        SioClient *c = userdata;

        for (Conn **p = &c->conns; *p;) {
                Conn *conn = *p;
                if (!conn->dead) {
                        p = &conn->next;
                        continue;
                }
                *p = conn->next;
                eio_client_free(conn->eio);
                free(conn->pending_event);
                free(conn);
        }
        return 0;
}

/* Stop a connection now and have it freed from the loop. */
static void conn_kill(Conn *conn) {
        if (conn->dead)
                return;
        conn->dead = true;
        if (conn->eio)
                eio_client_close(conn->eio);
        if (conn->client->current == conn)
                conn->client->current = NULL;
        (void) sd_event_source_set_enabled(conn->client->reaper, SD_EVENT_ONESHOT);
}

static void set_last_error(SioClient *c, int error, const char *message) {
        c->last_error = error;
        snprintf(c->last_message, sizeof(c->last_message), "%s", message ?: strerror(-error));
}

/* No more attempts: tell the user why. */
static void give_up(SioClient *c, int error, const char *message) {
        if (c->state == STATE_CLOSED)
                return;
        c->state = STATE_CLOSED;
        (void) sd_event_source_set_enabled(c->attempt_timer, SD_EVENT_OFF);
        (void) sd_event_source_set_enabled(c->retry_timer, SD_EVENT_OFF);
        if (c->current)
                conn_kill(c->current);
        log_debug("Socket.IO client for %s gives up: %s", c->url.host_header, message);
        (void) notice_push(c, NOTICE_DISCONNECTED, true, error, message);
}

/* An attempt failed (or a connection was lost): try again later, or give up. */
static void schedule_retry(SioClient *c, int error, const char *message) {
        uint64_t t = now(c), delay;

        set_last_error(c, error, message);
        if (!c->reconnect) {
                give_up(c, error, message);
                return;
        }
        if (t >= c->give_up_at) {
                char text[512];
                snprintf(text, sizeof(text), "no connection for %" PRIu64 " ms, giving up: %s",
                         c->reconnect_timeout / USEC_PER_MSEC, c->last_message);
                give_up(c, error, text);
                return;
        }

        delay = MIN(c->backoff, c->give_up_at - t);
        c->backoff = c->backoff == 0 ? BACKOFF_FIRST : MIN(c->backoff * 2, BACKOFF_MAX);
        c->state = STATE_WAITING;
        log_debug("Socket.IO client for %s: %s; next attempt in %" PRIu64 " ms", c->url.host_header, message,
                  delay / USEC_PER_MSEC);
        (void) sd_event_source_set_time(c->retry_timer, t + delay);
        (void) sd_event_source_set_enabled(c->retry_timer, SD_EVENT_ONESHOT);
}

static int send_text_packet(Conn *conn, const SioPacket *p) {
        _cleanup_buffer_ Buffer b = BUFFER_NULL;
        int r;

        r = buffer_set_headroom(&b, EIO_OUT_HEADROOM);
        if (r >= 0)
                r = buffer_append_byte(&b, '0' + EIO_MESSAGE);
        if (r >= 0)
                r = sio_packet_encode(p, &b);
        if (r < 0)
                return r;
        return eio_client_send(conn->eio, false, &b);
}

/* Only the current connection speaks to the user: one that is closing (sio_client_close())
 * or dead may still receive, and what it receives is dropped. */
static bool conn_is_live(const Conn *conn) {
        return !conn->dead && conn->client->current == conn;
}

static void on_eio_open(void *userdata) {
        Conn *conn = userdata;
        SioClient *c = conn->client;
        SioPacket p = { .type = SIO_CONNECT, .nsp = c->nsp, .ack_id = -1, .data = c->auth };
        int r;

        if (!conn_is_live(conn))
                return;

        r = send_text_packet(conn, &p);
        if (r < 0)
                conn_lost(conn, r, "Failed to send the Socket.IO CONNECT packet", false);
}

static void on_joined(Conn *conn) {
        SioClient *c = conn->client;

        conn->joined = true;
        c->state = STATE_CONNECTED;
        c->backoff = 0;
        if (c->fell_back)
                c->polling_settled = true;
        (void) sd_event_source_set_enabled(c->attempt_timer, SD_EVENT_OFF);
        log_debug("Socket.IO client joined %s on %s over %s.", c->nsp, c->url.host_header,
                  eio_client_transport_name(conn->eio));
        (void) notice_push(c, NOTICE_CONNECTED, c->ever_connected, 0, NULL);
        c->ever_connected = true;
}

static void on_connect_error(Conn *conn, const json_t *data) {
        SioClient *c = conn->client;
        const char *message = json_is_string(data) ? json_string_value(data)
                                                   : json_string_value(json_object_get(data, "message"));
        char text[512];
        int error;

        if (!message)
                message = "refused";
        /* A server without our namespace is the wrong server; anything else is a refusal of
         * us (agentix-server says "unauthorized"). Either way another attempt would not help. */
        error = streq(message, "Invalid namespace") ? -EPROTO : -EACCES;
        snprintf(text, sizeof(text), "%s", message);
        give_up(c, error, text);
}

/* The fast path for what agentix-server sends: 51-<nsp>,["<event>",{"_placeholder":true,"num":0}]
 * with an event name that needs no JSON escaping. Returns the name's start and length. */
static bool match_binary_event1(SioClient *c, const char *s, size_t n, const char **ret_name, size_t *ret_len) {
        static const char tail[] = "\",{\"_placeholder\":true,\"num\":0}]";
        size_t nsp_len = streq(c->nsp, "/") ? 0 : strlen(c->nsp);
        const char *name, *end;

        if (n < 3 || memcmp(s, "51-", 3) != 0)
                return false;
        s += 3, n -= 3;
        if (nsp_len > 0) {
                if (n < nsp_len + 1 || memcmp(s, c->nsp, nsp_len) != 0 || s[nsp_len] != ',')
                        return false;
                s += nsp_len + 1, n -= nsp_len + 1;
        }
        if (n < 2 + STRLEN(tail) || s[0] != '[' || s[1] != '"')
                return false;
        name = s + 2;
        end = s + n - STRLEN(tail);
        if (memcmp(end, tail, STRLEN(tail)) != 0)
                return false;
        for (const char *p = name; p < end; p++)
                if (*p == '"' || *p == '\\' || (unsigned char) *p < 0x20)
                        return false;
        *ret_name = name;
        *ret_len = (size_t) (end - name);
        return true;
}

static void expect_attachments(Conn *conn, const char *event, size_t event_len, unsigned n) {
        free(conn->pending_event);
        conn->pending_event = event ? strndup(event, event_len) : NULL;
        conn->pending_attachments = n;
        conn->pending_first = true;
        if (event && !conn->pending_event)
                log_error("Out of memory: a Socket.IO event is lost.");
}

static void on_text(Conn *conn, const char *s, size_t n) {
        SioClient *c = conn->client;
        _cleanup_(sio_packet_done) SioPacket p = SIO_PACKET_NULL;
        const char *name;
        size_t len;
        int r;

        if (conn->pending_attachments > 0) {
                conn_lost(conn, -EPROTO, "a Socket.IO packet came where an attachment was due", false);
                return;
        }
        if (conn->joined && match_binary_event1(c, s, n, &name, &len)) {
                expect_attachments(conn, name, len, 1);
                return;
        }

        r = sio_packet_decode(s, n, &p);
        if (r < 0) {
                conn_lost(conn, r == -ENOMEM ? r : -EPROTO, "malformed Socket.IO packet", false);
                return;
        }
        if (!streq(p.nsp, c->nsp)) {
                log_debug("Socket.IO packet for namespace %s dropped.", p.nsp);
                if (p.attachments > 0)
                        expect_attachments(conn, NULL, 0, p.attachments);
                return;
        }

        if (!conn->joined) {
                if (p.type == SIO_CONNECT)
                        on_joined(conn);
                else if (p.type == SIO_CONNECT_ERROR)
                        on_connect_error(conn, p.data);
                else if (p.attachments > 0)
                        expect_attachments(conn, NULL, 0, p.attachments);
                return;
        }

        switch (p.type) {
        case SIO_BINARY_EVENT: {
                json_t *arg = json_array_get(p.data, 1);
                bool shape = p.attachments == 1 && json_array_size(p.data) == 2 && sio_placeholder_num(arg) == 0;
                const char *event = json_string_value(json_array_get(p.data, 0));

                if (!shape)
                        log_debug("Socket.IO event %s of another shape than one attachment dropped.", event);
                expect_attachments(conn, shape ? event : NULL, shape ? strlen(event) : 0, p.attachments);
                return;
        }
        case SIO_BINARY_ACK:
                expect_attachments(conn, NULL, 0, p.attachments);
                return;
        case SIO_EVENT:
                log_debug("Socket.IO event %s without an attachment dropped.",
                          json_string_value(json_array_get(p.data, 0)));
                return;
        case SIO_DISCONNECT: {
                /* As the reference client: the server sending us away is deliberate, do not
                 * come back. */
                give_up(c, -ECONNRESET, "the server disconnected the client from the namespace");
                return;
        }
        default:
                log_debug("Socket.IO packet of type %u dropped.", (unsigned) p.type);
                return;
        }
}

static void on_attachment(Conn *conn, const uint8_t *data, size_t size) {
        SioClient *c = conn->client;

        if (conn->pending_attachments == 0) {
                conn_lost(conn, -EPROTO, "a binary message came without a Socket.IO packet announcing it", false);
                return;
        }
        if (conn->pending_event && conn->pending_first) {
                Notice *n = notice_push(c, NOTICE_EVENT, false, 0, conn->pending_event);
                if (n && buffer_append(&n->data, data, size) < 0) {
                        log_error("Out of memory: a Socket.IO event of %zu bytes is lost.", size);
                        n->kind = NOTICE_TOO_LARGE, n->size = size; /* tell the user it is gone */
                }
        }
        conn->pending_first = false;
        if (--conn->pending_attachments == 0)
                conn->pending_event = mfree_str(conn->pending_event);
}

static void on_eio_message(void *userdata, bool binary, const uint8_t *data, size_t size) {
        Conn *conn = userdata;

        if (!conn_is_live(conn))
                return;
        if (binary)
                on_attachment(conn, data, size);
        else
                on_text(conn, (const char *) data, size);
}

static void on_eio_too_large(void *userdata, bool binary, const uint8_t *head, size_t head_size, size_t size) {
        Conn *conn = userdata;
        SioClient *c = conn->client;
        char text[128];

        if (!conn_is_live(conn))
                return;
        if (binary && conn->pending_attachments > 0) {
                if (conn->pending_event && conn->pending_first) {
                        Notice *n = notice_push(c, NOTICE_TOO_LARGE, false, 0, conn->pending_event);
                        if (n) {
                                n->size = size;
                                (void) buffer_append(&n->data, head, head_size);
                        }
                }
                log_warning("Socket.IO client: skipped an attachment of %zu bytes (max_message %zu).", size,
                            c->max_message);
                conn->pending_first = false;
                if (--conn->pending_attachments == 0)
                        conn->pending_event = mfree_str(conn->pending_event);
                return;
        }
        /* Without the text we cannot tell where the stream stands. */
        snprintf(text, sizeof(text), "the server sent a message of %zu bytes (max_message %zu)", size,
                 c->max_message);
        conn_lost(conn, -EMSGSIZE, text, false);
}

static void on_eio_closed(void *userdata, int error, const char *message, bool upgrade_refused) {
        conn_lost(userdata, error, message, upgrade_refused);
}

/* An emit was refused with -ENOBUFS: say so once half the limit is free again. */
static void on_eio_sent(void *userdata) {
        Conn *conn = userdata;
        SioClient *c = conn->client;

        if (c->emit_refused && conn == c->current && eio_client_queued(conn->eio) <= c->max_message) {
                c->emit_refused = false;
                (void) notice_push(c, NOTICE_WRITABLE, false, 0, NULL);
        }
}

static const EioClientHandlers eio_handlers = {
        .open = on_eio_open,
        .message = on_eio_message,
        .too_large = on_eio_too_large,
        .closed = on_eio_closed,
        .sent = on_eio_sent,
};

/* A connection or an attempt ended (any reason but the user's). */
static void conn_lost(Conn *conn, int error, const char *message, bool upgrade_refused) {
        SioClient *c = conn->client;
        bool was_current = c->current == conn, joined = conn->joined;
        EioClientTransport transport = conn->transport;

        conn_kill(conn);
        if (!was_current || c->state == STATE_CLOSED)
                return;

        if (joined) {
                log_debug("Socket.IO client lost %s: %s", c->url.host_header, message);
                c->give_up_at = now(c) + c->reconnect_timeout;
                c->backoff = 0; /* the first attempt right away */
                if (c->reconnect)
                        (void) notice_push(c, NOTICE_DISCONNECTED, false, error, message);
                schedule_retry(c, error, message);
                return;
        }

        (void) sd_event_source_set_enabled(c->attempt_timer, SD_EVENT_OFF);
        if (upgrade_refused && c->transport == SIO_CLIENT_TRANSPORT_AUTO && transport == EIO_CLIENT_WEBSOCKET) {
                /* The server (or a proxy on the way) will not do WebSocket: poll, at once. */
                log_debug("Socket.IO client: %s; falling back to polling.", message);
                c->fell_back = true;
                set_last_error(c, error, message);
                attempt_start(c);
                return;
        }
        if (error == -EPERM) {
                /* The server's TLS certificate was refused: no later attempt does better. */
                set_last_error(c, error, message);
                give_up(c, error, message);
                return;
        }
        schedule_retry(c, error, message);
}

static int on_attempt_timeout(sd_event_source *s, uint64_t usec, void *userdata) {
        SioClient *c = userdata;
        char text[128];

        if (!c->current)
                return 0;
        snprintf(text, sizeof(text), "no connection within %" PRIu64 " ms", c->connect_timeout / USEC_PER_MSEC);
        conn_lost(c->current, -ETIMEDOUT, text, false);
        return 0;
}

static int on_retry(sd_event_source *s, uint64_t usec, void *userdata) {
        SioClient *c = userdata;

        if (c->state == STATE_WAITING) {
                c->fell_back = false;
                attempt_start(c);
        }
        return 0;
}

static EioClientTransport pick_transport(SioClient *c) {
        switch (c->transport) {
        case SIO_CLIENT_TRANSPORT_WEBSOCKET:
                return EIO_CLIENT_WEBSOCKET;
        case SIO_CLIENT_TRANSPORT_POLLING:
                return EIO_CLIENT_POLLING;
        default:
                return c->fell_back || c->polling_settled ? EIO_CLIENT_POLLING : EIO_CLIENT_WEBSOCKET;
        }
}

static void attempt_start(SioClient *c) {
        WsTarget target = {
                .host = c->url.host,
                .port = c->url.port,
                .host_header = c->url.host_header,
                .path = c->url.ws_path,
                .tls = c->url.tls,
                .tls_ctx = c->tls_ctx,
                .tls_sandbox_id = c->tls_sandbox_id,
        };
        EioClientConfig config = {
                .transport = pick_transport(c),
                .ws_target = &target,
                .polling_url = c->url.polling_url,
                .tls_ca_pem = c->tls_ca_pem,
                .tls_sandbox_id = c->tls_sandbox_id,
                .connect_timeout_usec = c->connect_timeout,
                .max_message = c->max_message,
        };
        Conn *conn;
        int r;

        c->state = STATE_CONNECTING;
        (void) sd_event_source_set_time(c->attempt_timer, now(c) + c->connect_timeout);
        (void) sd_event_source_set_enabled(c->attempt_timer, SD_EVENT_ONESHOT);

        conn = calloc(1, sizeof(*conn));
        if (!conn) {
                schedule_retry(c, -ENOMEM, "out of memory");
                return;
        }
        conn->client = c;
        conn->transport = config.transport;

        if (config.transport == EIO_CLIENT_POLLING) {
                r = c->curl ? 0 : curl_event_new(c->event, &c->curl);
                config.curl = c->curl;
        } else
                r = 0;
        if (r >= 0)
                r = eio_client_new(c->event, &config, &eio_handlers, conn, &conn->eio);
        if (r < 0) {
                free(conn);
                schedule_retry(c, r, "Failed to start a connection attempt");
                return;
        }
        conn->next = c->conns;
        c->conns = conn;
        c->current = conn;
        log_debug("Socket.IO client connecting to %s over %s.", c->url.host_header,
                  eio_client_transport_name(conn->eio));
}

/* ---- the client ------------------------------------------------------------------------------ */

int sio_client_new(sd_event *event, const SioClientConfig *config, const SioClientCallbacks *callbacks,
                   void *userdata, SioClient **ret) {
        SioClient *c;
        int r;

        if (!event || !config || !ret || strempty(config->nsp) || config->nsp[0] != '/' ||
            strlen(config->nsp) > SIO_NSP_MAX || strchr(config->nsp, ',') ||
            (unsigned) config->transport > SIO_CLIENT_TRANSPORT_POLLING)
                return -EINVAL;

        c = calloc(1, sizeof(*c));
        if (!c)
                return -ENOMEM;
        c->event = sd_event_ref(event);
        if (callbacks)
                c->callbacks = *callbacks;
        c->userdata = userdata;
        c->transport = config->transport;
        c->connect_timeout = config->connect_timeout_usec ?: DEFAULT_CONNECT_TIMEOUT;
        c->reconnect = config->reconnect;
        c->reconnect_timeout = config->reconnect_timeout_usec ?: DEFAULT_RECONNECT_TIMEOUT;
        c->max_message = config->max_message ?: DEFAULT_MAX_MESSAGE;

        r = sio_url_parse(config->url, &c->url);
        if (r < 0)
                goto fail;
        if (c->url.tls) {
                /* No CA, no TLS: this client trusts nothing but the CA it is given. */
                if (strempty(config->tls_ca_pem)) {
                        r = -ENOKEY;
                        goto fail;
                }
                r = tls_client_context_new(config->tls_ca_pem, strlen(config->tls_ca_pem), &c->tls_ctx, NULL);
                if (r < 0)
                        goto fail;
                c->tls_ca_pem = strdup(config->tls_ca_pem);
                if (config->tls_sandbox_id) {
                        char name[TLS_SANDBOX_NAME_MAX];

                        if (tls_sandbox_name(config->tls_sandbox_id, name, sizeof(name)) < 0) {
                                r = -EINVAL;
                                goto fail;
                        }
                        c->tls_sandbox_id = strdup(config->tls_sandbox_id);
                        if (!c->tls_sandbox_id) {
                                r = -ENOMEM;
                                goto fail;
                        }
                }
                if (!c->tls_ca_pem) {
                        r = -ENOMEM;
                        goto fail;
                }
        }
        c->nsp = strdup(config->nsp);
        if (!c->nsp) {
                r = -ENOMEM;
                goto fail;
        }
        if (config->auth_json) {
                c->auth = json_loads(config->auth_json, 0, NULL);
                if (!json_is_object(c->auth)) {
                        r = -EINVAL;
                        goto fail;
                }
        }

        r = sd_event_add_time(event, &c->attempt_timer, CLOCK_MONOTONIC, 0, 1000, on_attempt_timeout, c);
        if (r >= 0)
                r = sd_event_add_time(event, &c->retry_timer, CLOCK_MONOTONIC, 0, 1000, on_retry, c);
        if (r >= 0)
                r = sd_event_add_defer(event, &c->reaper, on_reap, c);
        if (r >= 0)
                r = sd_event_add_defer(event, &c->dispatcher, on_dispatch, c);
        if (r < 0)
                goto fail;
        (void) sd_event_source_set_enabled(c->attempt_timer, SD_EVENT_OFF);
        (void) sd_event_source_set_enabled(c->retry_timer, SD_EVENT_OFF);
        (void) sd_event_source_set_enabled(c->reaper, SD_EVENT_OFF);
        (void) sd_event_source_set_enabled(c->dispatcher, SD_EVENT_OFF);
        (void) sd_event_source_set_description(c->dispatcher, "sio-client-dispatch");

        *ret = c;
        return 0;
fail:
        client_destroy(c);
        return r;
}

static void client_destroy(SioClient *c) {
        Conn *conn;

        /* Connections first: the polling ones live on the curl glue. */
        while ((conn = c->conns)) {
                c->conns = conn->next;
                eio_client_free(conn->eio);
                free(conn->pending_event);
                free(conn);
        }
        c->curl = curl_event_free(c->curl);
        notices_clear(c);
        sd_event_source_disable_unref(c->attempt_timer);
        sd_event_source_disable_unref(c->retry_timer);
        sd_event_source_disable_unref(c->reaper);
        sd_event_source_disable_unref(c->dispatcher);
        sio_url_done(&c->url);
        SSL_CTX_free(c->tls_ctx);
        free(c->tls_ca_pem);
        free(c->tls_sandbox_id);
        free(c->nsp);
        json_decref(c->auth);
        sd_event_unref(c->event);
        free(c);
}

SioClient *sio_client_free(SioClient *c) {
        if (!c)
                return NULL;
        if (c->dispatching) {
                /* Called from one of our callbacks: finish once it returns. */
                c->free_requested = true;
                c->callbacks = (SioClientCallbacks) {};
                return NULL;
        }
        client_destroy(c);
        return NULL;
}

int sio_client_start(SioClient *c) {
        if (!c)
                return -EINVAL;
        if (c->state != STATE_IDLE)
                return -EALREADY;
        c->give_up_at = now(c) + c->reconnect_timeout;
        attempt_start(c);
        return 0;
}

int sio_client_emit_binary1(SioClient *c, const char *event, const void *data, size_t size) {
        _cleanup_buffer_ Buffer text = BUFFER_NULL, bin = BUFFER_NULL;
        Conn *conn;
        size_t queued;
        int r;

        if (!c || !event || (size > 0 && !data))
                return -EINVAL;
        conn = c->current;
        if (c->state != STATE_CONNECTED || !conn || !conn->joined || !eio_client_is_open(conn->eio))
                return -ENOTCONN;
        if (size > c->max_message || size > eio_client_max_payload(conn->eio))
                return -EMSGSIZE;
        queued = eio_client_queued(conn->eio);
        if (queued > 0 && queued + size > 2 * c->max_message) {
                c->emit_refused = true;
                return -ENOBUFS;
        }

        r = buffer_set_headroom(&text, EIO_OUT_HEADROOM);
        if (r >= 0)
                r = sio_encode_binary_event1(&text, c->nsp, event); /* includes the Engine.IO '4' */
        if (r >= 0)
                r = buffer_set_headroom(&bin, EIO_OUT_HEADROOM);
        if (r >= 0)
                r = buffer_reserve(&bin, MAX(size, (size_t) 1));
        if (r < 0)
                return r;
        if (size > 0)
                (void) buffer_append(&bin, data, size);

        /* Both frames are queued before either is sent, so that they leave together. */
        r = eio_client_queue(conn->eio, false, &text);
        if (r < 0)
                return r;
        r = eio_client_queue(conn->eio, true, &bin);
        if (r < 0) {
                /* The text is queued without its attachment: the stream is broken. */
                conn_lost(conn, r, "Failed to queue an attachment", false);
                return r;
        }
        if (c->hold == 0)
                eio_client_flush(conn->eio);
        return 0;
}

void sio_client_hold(SioClient *c) {
        if (c)
                c->hold++;
}

void sio_client_release(SioClient *c) {
        if (!c || c->hold == 0)
                return;
        if (--c->hold == 0 && c->current && c->current->eio)
                eio_client_flush(c->current->eio);
}

bool sio_client_is_connected(const SioClient *c) {
        return c && c->state == STATE_CONNECTED && c->current && c->current->joined;
}

const char *sio_client_transport_name(const SioClient *c) {
        return sio_client_is_connected(c) ? eio_client_transport_name(c->current->eio) : NULL;
}

void sio_client_drop(SioClient *c) {
        if (!c || !c->current)
                return;
        log_debug("Socket.IO client: dropping the connection to %s on request.", c->url.host_header);
        conn_lost(c->current, -ECONNRESET, "connection dropped (sio_client_drop)", false);
}

void sio_client_close(SioClient *c) {
        Conn *conn;

        if (!c || c->state == STATE_CLOSED)
                return;
        conn = c->current;
        if (conn && conn->joined && eio_client_is_open(conn->eio)) {
                SioPacket p = { .type = SIO_DISCONNECT, .nsp = c->nsp, .ack_id = -1 };

                /* Leave cleanly: DISCONNECT, then the transport closes once it is flushed; the
                 * connection lingers until then (or until sio_client_free()). */
                (void) send_text_packet(conn, &p);
                eio_client_shutdown(conn->eio);
                c->current = NULL;
        }
        /* What was received but not delivered yet is not wanted any more. */
        notices_clear(c);
        give_up(c, 0, "closed");
}

/* SPDX-License-Identifier: MIT */
#include <inttypes.h>

#include <jansson.h>

#include "eio-client.h"
#include "log.h"
#include "polling-transport.h"

struct EioClient {
        sd_event *event;
        EioClientTransport kind;
        WsTransport *ws;
        PollingTransport *polling;
        OutQueue queue;
        const EioClientHandlers *handlers;
        void *userdata;

        bool open;
        bool closed;  /* reported, or closed by the owner: no handler runs any more */
        size_t max_payload;
        uint64_t heartbeat_usec; /* pingInterval + pingTimeout */
        uint64_t last_activity;
        sd_event_source *watchdog;
};

static const EioTransportHandlers transport_handlers;

static void transport_close(EioClient *e) {
        ws_transport_close(e->ws);
        polling_transport_close(e->polling);
}

static void report_closed(EioClient *e, int error, const char *message, bool upgrade_refused) {
        if (e->closed)
                return;
        e->closed = true;
        (void) sd_event_source_set_enabled(e->watchdog, SD_EVENT_OFF);
        transport_close(e);
        out_queue_clear(&e->queue);
        if (e->handlers->closed)
                e->handlers->closed(e->userdata, error, message, upgrade_refused);
}

/* ---- heartbeat ------------------------------------------------------------------------------- */

static void watchdog_arm(EioClient *e, uint64_t when) {
        (void) sd_event_source_set_time(e->watchdog, when);
        (void) sd_event_source_set_enabled(e->watchdog, SD_EVENT_ONESHOT);
}

/* The server pings every pingInterval and waits pingTimeout for our pong; silence longer than
 * both means the server or the path to it is gone. Any bytes from it count as a sign of life
 * (a ping can be queued behind a large message), so the timer only moves on when it fires. */
static int on_watchdog(sd_event_source *s, uint64_t usec, void *userdata) {
        EioClient *e = userdata;
        char text[128];

        if (e->last_activity + e->heartbeat_usec > usec) {
                watchdog_arm(e, e->last_activity + e->heartbeat_usec);
                return 0;
        }
        snprintf(text, sizeof(text), "no ping from the server for %" PRIu64 " ms", e->heartbeat_usec / 1000);
        report_closed(e, -ETIMEDOUT, text, false);
        return 0;
}

static void on_activity(void *userdata) {
        EioClient *e = userdata;

        (void) sd_event_now(e->event, CLOCK_MONOTONIC, &e->last_activity);
}

/* ---- packets --------------------------------------------------------------------------------- */

static int json_uint(json_t *o, const char *key, uint64_t *ret) {
        json_t *v = json_object_get(o, key);

        if (!json_is_integer(v) || json_integer_value(v) < 0)
                return -EBADMSG;
        *ret = (uint64_t) json_integer_value(v);
        return 0;
}

static int handle_open(EioClient *e, const EioPacket *p) {
        uint64_t interval, timeout, max_payload = 0;
        json_t *o;
        const char *sid;
        int r = -EBADMSG;

        o = json_loadb((const char *) p->data, p->size, 0, NULL);
        if (!o)
                return -EBADMSG;
        sid = json_string_value(json_object_get(o, "sid"));
        if (!sid || json_uint(o, "pingInterval", &interval) < 0 || json_uint(o, "pingTimeout", &timeout) < 0 ||
            interval > UINT32_MAX || timeout > UINT32_MAX)
                goto finish;
        /* maxPayload came with Engine.IO 4.1: absent means no advertised limit. */
        if (json_object_get(o, "maxPayload") && json_uint(o, "maxPayload", &max_payload) < 0)
                goto finish;

        if (e->polling) {
                r = polling_transport_set_sid(e->polling, sid, (size_t) MIN(max_payload, (uint64_t) SIZE_MAX));
                if (r < 0)
                        goto finish;
        }
        e->open = true;
        e->max_payload = max_payload > 0 ? (size_t) MIN(max_payload, (uint64_t) SIZE_MAX) : SIZE_MAX;
        e->heartbeat_usec = (interval + timeout) * 1000u;
        on_activity(e);
        watchdog_arm(e, e->last_activity + e->heartbeat_usec);
        r = 0;
finish:
        json_decref(o);
        return r;
}

static int queue_text(EioClient *e, EioType type, const void *data, size_t n) {
        _cleanup_buffer_ Buffer b = BUFFER_NULL;
        int r;

        r = buffer_set_headroom(&b, EIO_OUT_HEADROOM);
        if (r >= 0)
                r = eio_text_encode(&b, type, data, n);
        if (r < 0)
                return r;
        r = out_queue_push(&e->queue, false, &b);
        if (r < 0)
                return r;
        ws_transport_kick(e->ws);
        polling_transport_kick(e->polling);
        return 0;
}

static void on_packet(void *userdata, const EioPacket *p) {
        EioClient *e = userdata;

        if (e->closed)
                return;
        if (!e->open) {
                if (p->type != EIO_OPEN || p->binary || handle_open(e, p) < 0) {
                        report_closed(e, -EPROTO, "the server did not open an Engine.IO session", false);
                        return;
                }
                if (e->handlers->open)
                        e->handlers->open(e->userdata);
                return;
        }

        switch (p->type) {
        case EIO_MESSAGE:
                e->handlers->message(e->userdata, p->binary, p->data, p->size);
                break;
        case EIO_PING:
                /* The pong echoes the ping's data ("probe" pings belong to upgrades, which this
                 * client does not do, so any data is answered the same way). */
                if (queue_text(e, EIO_PONG, p->data, p->size) < 0)
                        report_closed(e, -ENOMEM, "out of memory", false);
                break;
        case EIO_CLOSE:
                report_closed(e, -ECONNRESET, "the server closed the Engine.IO session", false);
                break;
        case EIO_NOOP:
        case EIO_PONG:
                break;
        default:
                report_closed(e, -EPROTO, "unexpected Engine.IO packet", false);
                break;
        }
}

static void on_too_large(void *userdata, bool binary, const uint8_t *head, size_t head_size, size_t size) {
        EioClient *e = userdata;

        if (!e->closed && e->handlers->too_large)
                e->handlers->too_large(e->userdata, binary, head, head_size, size);
}

static void on_transport_closed(void *userdata, int error, const char *message, bool upgrade_refused) {
        report_closed(userdata, error, message, upgrade_refused);
}

static void on_sent(void *userdata) {
        EioClient *e = userdata;

        if (!e->closed && e->handlers->sent)
                e->handlers->sent(e->userdata);
}

static const EioTransportHandlers transport_handlers = {
        .activity = on_activity,
        .packet = on_packet,
        .too_large = on_too_large,
        .closed = on_transport_closed,
        .sent = on_sent,
};

/* ---- the connection -------------------------------------------------------------------------- */

int eio_client_new(sd_event *event, const EioClientConfig *config, const EioClientHandlers *handlers,
                   void *userdata, EioClient **ret) {
        EioClient *e;
        int r;

        e = calloc(1, sizeof(*e));
        if (!e)
                return -ENOMEM;
        e->event = sd_event_ref(event);
        e->kind = config->transport;
        e->handlers = handlers;
        e->userdata = userdata;

        r = sd_event_add_time(event, &e->watchdog, CLOCK_MONOTONIC, 0, 1000, on_watchdog, e);
        if (r < 0)
                goto fail;
        (void) sd_event_source_set_enabled(e->watchdog, SD_EVENT_OFF);
        (void) sd_event_source_set_description(e->watchdog, "eio-heartbeat");

        if (config->transport == EIO_CLIENT_WEBSOCKET)
                r = ws_transport_new(event, config->ws_target, config->max_message, &e->queue,
                                     &transport_handlers, e, &e->ws);
        else
                r = polling_transport_new(event, config->curl, config->polling_url, config->tls_ca_pem,
                                          config->tls_sandbox_id,
                                          config->connect_timeout_usec,
                                          config->max_message, &e->queue, &transport_handlers, e, &e->polling);
        if (r < 0)
                goto fail;

        *ret = e;
        return 0;
fail:
        eio_client_free(e);
        return r;
}

EioClient *eio_client_free(EioClient *e) {
        if (!e)
                return NULL;
        e->closed = true;
        e->ws = ws_transport_free(e->ws);
        e->polling = polling_transport_free(e->polling);
        out_queue_clear(&e->queue);
        sd_event_source_disable_unref(e->watchdog);
        sd_event_unref(e->event);
        free(e);
        return NULL;
}

int eio_client_queue(EioClient *e, bool binary, Buffer *data) {
        int r;

        if (e->closed || !e->open) {
                buffer_done(data);
                return -ENOTCONN;
        }
        r = out_queue_push(&e->queue, binary, data);
        if (r < 0) {
                buffer_done(data);
                return r;
        }
        return 0;
}

void eio_client_flush(EioClient *e) {
        if (e->closed || out_queue_is_empty(&e->queue))
                return;
        ws_transport_kick(e->ws);
        polling_transport_kick(e->polling);
}

int eio_client_send(EioClient *e, bool binary, Buffer *data) {
        int r;

        r = eio_client_queue(e, binary, data);
        if (r < 0)
                return r;
        eio_client_flush(e);
        return 0;
}

size_t eio_client_queued(const EioClient *e) {
        return e->queue.bytes + e->queue.inflight;
}

size_t eio_client_max_payload(const EioClient *e) {
        return e->open ? e->max_payload : 0;
}

bool eio_client_is_open(const EioClient *e) {
        return e->open && !e->closed;
}

const char *eio_client_transport_name(const EioClient *e) {
        return e->kind == EIO_CLIENT_WEBSOCKET ? "websocket" : "polling";
}

void eio_client_shutdown(EioClient *e) {
        if (e->closed)
                return;
        /* Over polling the session ends with a CLOSE packet; over WebSocket closing the socket
         * says it (as the reference client does). */
        if (e->polling && e->open)
                (void) queue_text(e, EIO_CLOSE, NULL, 0);
        ws_transport_shutdown(e->ws);
        polling_transport_shutdown(e->polling);
}

void eio_client_close(EioClient *e) {
        if (e->closed)
                return;
        e->closed = true;
        (void) sd_event_source_set_enabled(e->watchdog, SD_EVENT_OFF);
        transport_close(e);
}

/* SPDX-License-Identifier: MIT */
#include <stdlib.h>

#include "conformance.h"

static void echo_message(EioSession *s, bool binary, const uint8_t *data, size_t size, void *userdata) {
        (void) eio_session_send(s, binary, data, size);
}

const EioCallbacks conformance_echo_callbacks = {
        .message = echo_message,
};

/* The "auth" event waits until the CONNECT reply has been written, and then a moment more: the
 * suites' client takes one message per listener it sets, so a message that arrives in the same
 * read as the one before finds no listener and is lost. The reference server (Node) writes a
 * packet only after the one before was written, and at Node's pace; here a write follows the
 * one before within microseconds, which the suites' client (Node's ws) reads as one (measured:
 * 189 of 200 handshakes lost "auth" with no pause, 157 with 100 us, none with 300 us). */
#define AUTH_PAUSE_USEC (10u * 1000)

typedef struct PendingAuth {
        SioSocket *socket;
        json_t *auth;
        sd_event *event;
        sd_event_source *timer;
} PendingAuth;

static void pending_auth_free(PendingAuth *p) {
        if (!p)
                return;
        sio_socket_set_userdata(p->socket, NULL);
        sd_event_source_disable_unref(p->timer);
        json_decref(p->auth);
        free(p);
}

static void emit_pending_auth(PendingAuth *p) {
        SioSocket *s = p->socket;
        json_t *auth = json_incref(p->auth);

        pending_auth_free(p);
        (void) sio_socket_emit(s, json_pack("[so]", "auth", auth), NULL, 0);
}

static int on_pause_over(sd_event_source *source, uint64_t usec, void *userdata) {
        emit_pending_auth(userdata);
        return 0;
}

/* The CONNECT reply left: "auth" after the pause (at once if no timer can be had). */
static void reply_written(PendingAuth *p) {
        uint64_t now;

        if (p->timer)
                return;
        if (sd_event_now(p->event, CLOCK_MONOTONIC, &now) < 0 ||
            sd_event_add_time(p->event, &p->timer, CLOCK_MONOTONIC, now + AUTH_PAUSE_USEC, 1, on_pause_over, p) < 0)
                emit_pending_auth(p);
}

static void on_connected(SioSocket *s, const json_t *auth, void *userdata) {
        PendingAuth *p = calloc(1, sizeof(*p));

        if (!p)
                return;
        *p = (PendingAuth) { .socket = s, .auth = json_deep_copy(auth), .event = userdata };
        if (!p->auth) {
                free(p);
                return;
        }
        sio_socket_set_userdata(s, p);
        /* Normally the reply is still queued: on_drained() says when it was written. */
        if (sio_socket_backlog(s) == 0)
                reply_written(p);
}

static void on_drained(SioSocket *s, void *userdata) {
        PendingAuth *p = sio_socket_get_userdata(s);

        if (p && sio_socket_backlog(s) == 0)
                reply_written(p);
}

static void on_disconnect(SioSocket *s, const char *reason, void *userdata) {
        pending_auth_free(sio_socket_get_userdata(s));
}

static void on_event(SioSocket *s, const char *event, json_t *args, const SioAttachment *att, size_t n_att,
                     int64_t ack_id, void *userdata) {
        if (!event)
                return;
        if (streq(event, "message")) {
                json_t *back = json_deep_copy(args);
                if (!back)
                        return;
                (void) json_array_set_new(back, 0, json_string("message-back"));
                (void) sio_socket_emit(s, back, att, n_att);
        } else if (streq(event, "message-with-ack") && ack_id >= 0) {
                json_t *reply = json_deep_copy(args);
                if (!reply)
                        return;
                (void) json_array_remove(reply, 0);
                (void) sio_socket_ack(s, ack_id, reply, att, n_att);
        }
}

int conformance_add_namespaces(SioServer *sio, sd_event *event) {
        SioNamespace main_ns = { .name = "/", .connected = on_connected, .event = on_event, .drained = on_drained,
                                 .disconnect = on_disconnect, .userdata = event };
        SioNamespace custom_ns = { .name = "/custom", .connected = on_connected, .drained = on_drained,
                                   .disconnect = on_disconnect, .userdata = event };
        int r;

        r = sio_server_add_namespace(sio, &main_ns);
        if (r < 0)
                return r;
        return sio_server_add_namespace(sio, &custom_ns);
}

/* SPDX-License-Identifier: MIT */
#include "conformance.h"

static void echo_message(EioSession *s, bool binary, const uint8_t *data, size_t size, void *userdata) {
        (void) eio_session_send(s, binary, data, size);
}

const EioCallbacks conformance_echo_callbacks = {
        .message = echo_message,
};

static void emit_auth(SioSocket *s, const json_t *auth, void *userdata) {
        (void) sio_socket_emit(s, json_pack("[sO]", "auth", auth), NULL, 0);
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

int conformance_add_namespaces(SioServer *sio) {
        static const SioNamespace main_ns = { .name = "/", .connected = emit_auth, .event = on_event };
        static const SioNamespace custom_ns = { .name = "/custom", .connected = emit_auth };
        int r;

        r = sio_server_add_namespace(sio, &main_ns);
        if (r < 0)
                return r;
        return sio_server_add_namespace(sio, &custom_ns);
}

/* SPDX-License-Identifier: MIT */
#include <time.h>

#include <jansson.h>

#include "eio-packet.h"
#include "envelope.h"
#include "log.h"
#include "rpc-client.h"
#include "sio-packet.h"

#define RPC_NSP "/rpc"

static int queue_text(RpcClient *c, const void *data, size_t n) {
        return ws_client_queue(&c->ws, false, data, n);
}

static int on_sio_packet(RpcClient *c, const uint8_t *data, size_t size) {
        SioPacket p = SIO_PACKET_NULL;
        const char *ev;
        int r;

        r = sio_packet_decode((const char *) data, size, &p);
        if (r < 0)
                return log_error_errno(r, "Bad Socket.IO packet from the server: %.*s", (int) MIN(size, (size_t) 200), data);

        if (!streq(p.nsp, RPC_NSP)) {
                r = 0; /* nothing else is ours */
                goto done;
        }
        switch (p.type) {
        case SIO_CONNECT:
                c->connected = true;
                r = 0;
                break;
        case SIO_CONNECT_ERROR:
                r = log_error_errno(EACCES, "The server refused the /rpc connection: %s",
                                    json_string_value(json_object_get(p.data, "message")) ?: "(no message)");
                break;
        case SIO_DISCONNECT:
                r = log_error_errno(ECONNRESET, "The server left the /rpc namespace.");
                break;
        case SIO_BINARY_EVENT:
                ev = json_string_value(json_array_get(p.data, 0));
                if (p.attachments != 1 || !ev || strlen(ev) >= sizeof(c->event)) {
                        r = log_error_errno(EBADMSG, "RPC event with %u attachments, expected one.", p.attachments);
                        break;
                }
                strcpy(c->event, ev);
                c->want_attachment = true;
                r = 0;
                break;
        default:
                r = log_error_errno(EBADMSG, "Unexpected Socket.IO packet type %d on /rpc.", p.type);
        }
done:
        sio_packet_done(&p);
        return r;
}

static int on_attachment(RpcClient *c, const uint8_t *data, size_t size) {
        msgpack_object root;
        const char *id;
        size_t id_len, off = 0;
        int r;

        c->want_attachment = false;
        msgpack_zone_clear(&c->zone);
        if (msgpack_unpack((const char *) data, size, &off, &c->zone, &root) != MSGPACK_UNPACK_SUCCESS ||
            root.type != MSGPACK_OBJECT_MAP)
                return log_error_errno(EBADMSG, "The %s attachment is not a msgpack map.", c->event);
        r = mp_map_get_str(&root, "call_id", &id, &id_len);
        if (r < 0)
                return log_error_errno(EBADMSG, "The %s envelope has no call_id.", c->event);
        if (!c->on_event)
                return 0;
        return c->on_event(c, c->event, id, id_len, &root, size, c->userdata);
}

static int on_message(WsClient *ws, const uint8_t *data, size_t size, bool binary, void *userdata) {
        RpcClient *c = userdata;
        EioPacket p;
        int r;

        r = eio_ws_decode(data, size, binary, &p);
        if (r < 0)
                return log_error_errno(r, "Bad Engine.IO packet from the server.");

        if (p.binary) {
                if (!c->want_attachment)
                        return log_error_errno(EBADMSG, "Binary message without a BINARY_EVENT before it.");
                return on_attachment(c, p.data, p.size);
        }
        switch (p.type) {
        case EIO_OPEN: {
                _cleanup_buffer_ Buffer b = BUFFER_NULL;
                _cleanup_free_ char *auth = NULL;
                json_t *o = json_pack("{s:s}", "token", c->token ?: "");

                if (!o)
                        return -ENOMEM;
                auth = json_dumps(o, JSON_COMPACT);
                json_decref(o);
                if (!auth)
                        return -ENOMEM;
                c->opened = true;
                r = buffer_printf(&b, "40" RPC_NSP ",%s", auth);
                if (r < 0)
                        return r;
                return queue_text(c, buffer_data(&b), b.len);
        }
        case EIO_PING:
                c->pings++;
                return queue_text(c, "3", 1);
        case EIO_MESSAGE:
                return on_sio_packet(c, p.data, p.size);
        case EIO_CLOSE:
                return log_error_errno(ECONNRESET, "The server closed the Engine.IO session.");
        case EIO_NOOP:
                return 0;
        default:
                return log_error_errno(EBADMSG, "Unexpected Engine.IO packet type %d.", p.type);
        }
}

int rpc_client_connect(RpcClient *c, const char *host, const char *port, const char *token, int timeout_ms) {
        struct timespec start, now;
        int r;

        c->token = token ? strdup(token) : NULL;
        if (token && !c->token)
                return -ENOMEM;
        if (!msgpack_zone_init(&c->zone, 4096))
                return -ENOMEM;
        c->zone_initialized = true;
        c->ws.on_message = on_message;
        c->ws.userdata = c;

        r = sio_encode_binary_event1(&c->call_header, RPC_NSP, "call");
        if (r >= 0)
                r = sio_encode_binary_event1(&c->ack_header, RPC_NSP, "ack");
        if (r < 0)
                return r;

        r = ws_client_connect(&c->ws, host, port, "/socket.io/?EIO=4&transport=websocket", timeout_ms);
        if (r < 0)
                return r;

        clock_gettime(CLOCK_MONOTONIC, &start);
        while (!c->connected) {
                long waited;

                r = ws_client_pump(&c->ws, 100);
                if (r < 0)
                        return r;
                clock_gettime(CLOCK_MONOTONIC, &now);
                waited = (now.tv_sec - start.tv_sec) * 1000 + (now.tv_nsec - start.tv_nsec) / 1000000;
                if (waited > timeout_ms)
                        return log_error_errno(ETIMEDOUT, "No /rpc CONNECT answer within %d ms.", timeout_ms);
        }
        return 0;
}

int rpc_client_queue_call(RpcClient *c, const char *call_id, size_t call_id_len, const char *callable,
                          const char *shape, const Buffer *args, const Buffer *kwargs) {
        msgpack_packer pk;
        int r;

        buffer_clear(&c->scratch);
        mp_packer_init_buffer(&pk, &c->scratch);
        if (msgpack_pack_map(&pk, 5) < 0 || mp_pack_cstr(&pk, "call_id") < 0 ||
            mp_pack_str(&pk, call_id, call_id_len) < 0 || mp_pack_cstr(&pk, "callable") < 0 ||
            mp_pack_cstr(&pk, callable) < 0 || mp_pack_cstr(&pk, "shape") < 0 || mp_pack_cstr(&pk, shape) < 0 ||
            mp_pack_cstr(&pk, "args") < 0)
                return -ENOMEM;
        r = buffer_append(&c->scratch, buffer_data(args), args->len);
        if (r < 0 || mp_pack_cstr(&pk, "kwargs") < 0)
                return -ENOMEM;
        r = buffer_append(&c->scratch, buffer_data(kwargs), kwargs->len);
        if (r < 0)
                return r;

        r = queue_text(c, buffer_data(&c->call_header), c->call_header.len);
        if (r < 0)
                return r;
        return ws_client_queue(&c->ws, true, buffer_data(&c->scratch), c->scratch.len);
}

int rpc_client_queue_ack(RpcClient *c, const char *call_id, size_t call_id_len) {
        int r;

        buffer_clear(&c->scratch);
        r = rpc_envelope_call_id(&c->scratch, call_id, call_id_len);
        if (r < 0)
                return r;
        r = queue_text(c, buffer_data(&c->ack_header), c->ack_header.len);
        if (r < 0)
                return r;
        return ws_client_queue(&c->ws, true, buffer_data(&c->scratch), c->scratch.len);
}

int rpc_client_close(RpcClient *c, int timeout_ms) {
        int r;

        if (c->ws.fd < 0)
                return 0;
        /* Leave like a client that is done: Engine.IO CLOSE, then the WebSocket close handshake. */
        r = queue_text(c, "1", 1);
        if (r < 0)
                return r;
        return ws_client_close(&c->ws, timeout_ms);
}

void rpc_client_done(RpcClient *c) {
        ws_client_done(&c->ws);
        buffer_done(&c->call_header);
        buffer_done(&c->ack_header);
        buffer_done(&c->scratch);
        if (c->zone_initialized)
                msgpack_zone_destroy(&c->zone);
        c->zone_initialized = false;
        free(c->token);
        c->token = NULL;
}

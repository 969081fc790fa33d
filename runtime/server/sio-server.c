/* SPDX-License-Identifier: MIT */
#include <sys/random.h>

#include <libwebsockets.h>

#include "log.h"
#include "sio-packet.h"
#include "sio-server.h"

#define MAX_NAMESPACES 8

typedef struct SioClient SioClient;

struct SioSocket {
        SioClient *client;
        const SioNamespace *ns;
        char id[24];
        void *userdata;
};

struct SioClient {
        SioServer *server;
        EioSession *eio;
        SioSocket *sockets[MAX_NAMESPACES]; /* by namespace index */
        sd_event_source *connect_timer;
        bool ever_connected;

        /* A BINARY_EVENT/BINARY_ACK waiting for its attachments. */
        bool has_pending;
        SioPacket pending;
        Buffer *att_data; /* copies of the attachments received so far */
        SioAttachment *att;
        size_t n_att_received;
};

struct SioServer {
        sd_event *event;
        SioConfig config;
        SioNamespace namespaces[MAX_NAMESPACES];
        size_t n_namespaces;
};

/* ---- helpers ------------------------------------------------------------------------------- */

static int random_id(char *out, size_t size) {
        static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
        uint8_t raw[20];
        size_t n = MIN(size - 1, sizeof(raw));

        if (getrandom(raw, n, 0) != (ssize_t) n)
                return -EIO;
        for (size_t i = 0; i < n; i++)
                out[i] = alphabet[raw[i] & 63];
        out[n] = 0;
        return 0;
}

static int ns_index(const SioServer *s, const char *name) {
        for (size_t i = 0; i < s->n_namespaces; i++)
                if (streq(s->namespaces[i].name, name))
                        return (int) i;
        return -1;
}

/* Send a text packet (and its attachments) on the client's Engine.IO session. */
static int client_send_packet(SioClient *c, const SioPacket *p, const SioAttachment *att, size_t n_att) {
        _cleanup_buffer_ Buffer b = BUFFER_NULL;
        int r;

        if (!c->eio || eio_session_is_closed(c->eio))
                return -ENOTCONN;
        r = buffer_set_headroom(&b, LWS_PRE);
        if (r >= 0)
                r = buffer_append_byte(&b, '4');
        if (r >= 0)
                r = sio_packet_encode(p, &b);
        if (r < 0)
                return r;
        r = eio_session_send_buffer(c->eio, false, &b);
        for (size_t i = 0; r >= 0 && i < n_att; i++)
                r = eio_session_send(c->eio, true, att[i].data, att[i].size);
        return r;
}

static void client_reset_pending(SioClient *c) {
        if (!c->has_pending)
                return;
        for (size_t i = 0; i < c->pending.attachments; i++)
                buffer_done(&c->att_data[i]);
        free(c->att_data);
        free(c->att);
        c->att_data = NULL;
        c->att = NULL;
        c->n_att_received = 0;
        sio_packet_done(&c->pending);
        c->has_pending = false;
}

static void socket_free(SioSocket *s, const char *reason) {
        SioClient *c = s->client;
        int i = ns_index(c->server, s->ns->name);

        if (i >= 0 && c->sockets[i] == s)
                c->sockets[i] = NULL;
        if (s->ns->disconnect)
                s->ns->disconnect(s, reason, s->ns->userdata);
        free(s);
}

static void client_protocol_error(SioClient *c, const char *what) {
        log_debug("Socket.IO client %s: %s, closing the connection.", eio_session_sid(c->eio), what);
        eio_session_close(c->eio, what);
}

/* ---- inbound ------------------------------------------------------------------------------- */

static void client_connect(SioClient *c, SioPacket *p) {
        SioServer *server = c->server;
        const SioNamespace *ns;
        const char *error;
        SioSocket *s;
        int i;

        i = ns_index(server, p->nsp);
        if (i < 0) {
                SioPacket e = { .type = SIO_CONNECT_ERROR, .nsp = p->nsp, .ack_id = -1,
                                .data = json_pack("{s:s}", "message", "Invalid namespace") };
                (void) client_send_packet(c, &e, NULL, 0);
                json_decref(e.data);
                return;
        }
        ns = &server->namespaces[i];

        error = ns->authorize ? ns->authorize(server, p->data, ns->userdata) : NULL;
        if (error) {
                SioPacket e = { .type = SIO_CONNECT_ERROR, .nsp = p->nsp, .ack_id = -1,
                                .data = json_pack("{s:s}", "message", error) };
                (void) client_send_packet(c, &e, NULL, 0);
                json_decref(e.data);
                return;
        }

        /* Connecting twice replaces the old socket, as the reference server does. */
        if (c->sockets[i])
                socket_free(c->sockets[i], "replaced by a new connection");

        s = calloc(1, sizeof(*s));
        if (!s || random_id(s->id, sizeof(s->id)) < 0) {
                free(s);
                client_protocol_error(c, "out of memory");
                return;
        }
        s->client = c;
        s->ns = ns;
        c->sockets[i] = s;
        c->ever_connected = true;
        (void) sd_event_source_set_enabled(c->connect_timer, SD_EVENT_OFF);

        SioPacket ok = { .type = SIO_CONNECT, .nsp = p->nsp, .ack_id = -1, .data = json_pack("{s:s}", "sid", s->id) };
        (void) client_send_packet(c, &ok, NULL, 0);
        json_decref(ok.data);

        if (ns->connected) {
                json_t *auth = p->data ? json_incref(p->data) : json_object();
                ns->connected(s, auth, ns->userdata);
                json_decref(auth);
        }
}

static void client_dispatch(SioClient *c, SioPacket *p, const SioAttachment *att, size_t n_att) {
        SioSocket *s;
        int i;

        if (p->type == SIO_CONNECT) {
                client_connect(c, p);
                return;
        }

        i = ns_index(c->server, p->nsp);
        s = i >= 0 ? c->sockets[i] : NULL;
        if (!s) {
                client_protocol_error(c, "packet for a namespace that is not connected");
                return;
        }

        switch (p->type) {
        case SIO_DISCONNECT:
                socket_free(s, "client namespace disconnect");
                return;
        case SIO_EVENT:
        case SIO_BINARY_EVENT: {
                const char *name = json_string_value(json_array_get(p->data, 0));
                if (s->ns->event)
                        s->ns->event(s, name, p->data, att, n_att, p->ack_id, s->ns->userdata);
                return;
        }
        case SIO_ACK:
        case SIO_BINARY_ACK:
                /* This server never asks clients for acks. */
                return;
        default:
                client_protocol_error(c, "unexpected packet type");
                return;
        }
}

static void on_text(SioClient *c, const uint8_t *data, size_t size) {
        SioPacket p = SIO_PACKET_NULL;

        if (c->has_pending) {
                client_protocol_error(c, "text packet while reconstructing a binary packet");
                return;
        }
        if (sio_packet_decode((const char *) data, size, &p) < 0) {
                client_protocol_error(c, "malformed packet");
                return;
        }
        if (p.type == SIO_BINARY_EVENT || p.type == SIO_BINARY_ACK) {
                c->att_data = calloc(p.attachments, sizeof(Buffer));
                c->att = calloc(p.attachments, sizeof(SioAttachment));
                c->pending = p;
                c->has_pending = true;
                if (!c->att_data || !c->att) {
                        client_reset_pending(c);
                        client_protocol_error(c, "out of memory");
                }
                return;
        }
        client_dispatch(c, &p, NULL, 0);
        sio_packet_done(&p);
}

static void on_attachment(SioClient *c, const uint8_t *data, size_t size, bool too_large, size_t total) {
        size_t i = c->n_att_received;

        if (!c->has_pending) {
                client_protocol_error(c, "unexpected binary message");
                return;
        }

        if (i + 1 < c->pending.attachments) {
                /* Not the last one: it must outlive this callback. */
                if (buffer_append(&c->att_data[i], data, size) < 0) {
                        client_protocol_error(c, "out of memory");
                        return;
                }
                c->att[i] = (SioAttachment) { .data = buffer_data(&c->att_data[i]), .size = size,
                                              .too_large = too_large, .total_size = total };
                c->n_att_received++;
                return;
        }

        /* The last attachment is used in place: no copy on the common one-attachment path. */
        c->att[i] = (SioAttachment) { .data = data, .size = size, .too_large = too_large, .total_size = total };
        for (size_t j = 0; j < i; j++)
                c->att[j].data = buffer_data(&c->att_data[j]);

        SioPacket p = c->pending;
        SioAttachment *att = c->att;
        Buffer *att_data = c->att_data;
        size_t n = p.attachments;

        c->has_pending = false;
        c->att = NULL;
        c->att_data = NULL;
        c->n_att_received = 0;

        client_dispatch(c, &p, att, n);

        sio_packet_done(&p);
        for (size_t j = 0; j < n; j++)
                buffer_done(&att_data[j]);
        free(att_data);
        free(att);
}

/* ---- Engine.IO callbacks ---------------------------------------------------------------------- */

static int on_connect_timeout(sd_event_source *source, uint64_t usec, void *userdata) {
        SioClient *c = userdata;

        if (!c->ever_connected)
                eio_session_close(c->eio, "connect timeout");
        return 0;
}

static int on_eio_open(EioSession *e, void *userdata) {
        SioServer *server = userdata;
        SioClient *c;
        uint64_t now;
        int r;

        c = calloc(1, sizeof(*c));
        if (!c)
                return -ENOMEM;
        c->server = server;
        c->eio = e;

        r = sd_event_now(server->event, CLOCK_MONOTONIC, &now);
        if (r >= 0)
                r = sd_event_add_time(server->event, &c->connect_timer, CLOCK_MONOTONIC,
                                      now + (uint64_t) server->config.connect_timeout_ms * 1000ULL, 1, on_connect_timeout, c);
        if (r < 0) {
                free(c);
                return r;
        }
        eio_session_set_userdata(e, c);
        return 0;
}

static void on_eio_message(EioSession *e, bool binary, const uint8_t *data, size_t size, void *userdata) {
        SioClient *c = eio_session_get_userdata(e);

        if (!c)
                return;
        if (binary)
                on_attachment(c, data, size, false, size);
        else
                on_text(c, data, size);
}

static void on_eio_too_large(EioSession *e, bool binary, const uint8_t *head, size_t head_size, size_t total,
                             void *userdata) {
        SioClient *c = eio_session_get_userdata(e);

        if (!c)
                return;
        if (!binary || !c->has_pending) {
                /* A packet we cannot parse without its whole text: the stream is lost. */
                client_protocol_error(c, "text message too large");
                return;
        }
        on_attachment(c, head, head_size, true, total);
}

static void on_eio_drained(EioSession *e, void *userdata) {
        SioClient *c = eio_session_get_userdata(e);

        if (!c)
                return;
        for (size_t i = 0; i < MAX_NAMESPACES; i++)
                if (c->sockets[i] && c->sockets[i]->ns->drained)
                        c->sockets[i]->ns->drained(c->sockets[i], c->sockets[i]->ns->userdata);
}

static void on_eio_close(EioSession *e, const char *reason, void *userdata) {
        SioClient *c = eio_session_get_userdata(e);

        if (!c)
                return;
        eio_session_set_userdata(e, NULL);
        client_reset_pending(c);
        for (size_t i = 0; i < MAX_NAMESPACES; i++)
                if (c->sockets[i])
                        socket_free(c->sockets[i], reason);
        sd_event_source_disable_unref(c->connect_timer);
        free(c);
}

const EioCallbacks sio_eio_callbacks = {
        .open = on_eio_open,
        .message = on_eio_message,
        .message_too_large = on_eio_too_large,
        .close = on_eio_close,
        .drained = on_eio_drained,
};

/* ---- sockets -------------------------------------------------------------------------------- */

const char *sio_socket_id(const SioSocket *s) {
        return s->id;
}

const char *sio_socket_nsp(const SioSocket *s) {
        return s->ns->name;
}

void sio_socket_set_userdata(SioSocket *s, void *userdata) {
        s->userdata = userdata;
}

void *sio_socket_get_userdata(const SioSocket *s) {
        return s->userdata;
}

size_t sio_socket_backlog(const SioSocket *s) {
        return s->client->eio ? eio_session_backlog(s->client->eio) : 0;
}

int sio_socket_emit(SioSocket *s, json_t *args, const SioAttachment *att, size_t n_att) {
        SioPacket p = { .type = n_att > 0 ? SIO_BINARY_EVENT : SIO_EVENT, .nsp = (char *) s->ns->name,
                        .ack_id = -1, .attachments = (unsigned) n_att, .data = args };
        int r;

        r = client_send_packet(s->client, &p, att, n_att);
        json_decref(args);
        return r;
}

int sio_socket_ack(SioSocket *s, int64_t ack_id, json_t *args, const SioAttachment *att, size_t n_att) {
        SioPacket p = { .type = n_att > 0 ? SIO_BINARY_ACK : SIO_ACK, .nsp = (char *) s->ns->name,
                        .ack_id = ack_id, .attachments = (unsigned) n_att, .data = args };
        int r;

        r = client_send_packet(s->client, &p, att, n_att);
        json_decref(args);
        return r;
}

int sio_socket_emit_binary1(SioSocket *s, const char *event, Blob *attachment) {
        _cleanup_buffer_ Buffer b = BUFFER_NULL;
        EioSession *e = s->client->eio;
        int r;

        if (!e || eio_session_is_closed(e))
                return -ENOTCONN;
        r = buffer_set_headroom(&b, LWS_PRE);
        if (r >= 0) /* includes the Engine.IO message type '4' */
                r = sio_encode_binary_event1(&b, s->ns->name, event);
        if (r >= 0)
                r = eio_session_send_buffer(e, false, &b);
        if (r < 0)
                return r;
        return eio_session_send_blob(e, true, attachment);
}

void sio_socket_disconnect(SioSocket *s) {
        SioPacket p = { .type = SIO_DISCONNECT, .nsp = (char *) s->ns->name, .ack_id = -1 };

        (void) client_send_packet(s->client, &p, NULL, 0);
        socket_free(s, "server namespace disconnect");
}

void sio_socket_close_connection(SioSocket *s, const char *reason) {
        eio_session_close(s->client->eio, reason);
}

/* ---- server --------------------------------------------------------------------------------- */

int sio_server_new(sd_event *event, const SioConfig *config, SioServer **ret) {
        SioServer *s = calloc(1, sizeof(*s));

        if (!s)
                return -ENOMEM;
        s->event = sd_event_ref(event);
        s->config = *config;
        *ret = s;
        return 0;
}

SioServer *sio_server_free(SioServer *s) {
        if (!s)
                return NULL;
        sd_event_unref(s->event);
        free(s);
        return NULL;
}

int sio_server_add_namespace(SioServer *s, const SioNamespace *ns) {
        if (s->n_namespaces >= MAX_NAMESPACES)
                return -E2BIG;
        if (ns_index(s, ns->name) >= 0)
                return -EEXIST;
        s->namespaces[s->n_namespaces++] = *ns;
        return 0;
}

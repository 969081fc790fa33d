/* SPDX-License-Identifier: MIT */
/* The floor under bench/rpc's echo: the least a Socket.IO server on libwebsockets can do for one
 * call on this machine, driven by the same load generator as agentix-server. It answers the
 * Engine.IO handshake and the /rpc CONNECT, and each `call` at once with a call:result holding
 * the call's first argument: no worker, no callable, no result store, no acks kept.
 *
 * With --hop, each call's attachment first goes to a second process over a socketpair and back,
 * as agentix-server's calls go to its worker: the same number of processes that sleep and wake
 * per call as on the measured path, which on an idle VM is most of the time a round trip takes.
 *
 *   floor-server --port PORT [--hop]
 *
 * The token the client sends is not checked. One process, lws's own poll loop. */
#include <errno.h>
#include <getopt.h>
#include <libwebsockets.h>
#include <msgpack.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAX_MESSAGE (1u << 20)
#define OPEN_PACKET "0{\"sid\":\"floor\",\"upgrades\":[],\"pingInterval\":25000,\"pingTimeout\":20000,\"maxPayload\":1000000}"
#define CONNECT_REPLY "40/rpc,{\"sid\":\"floor\"}"
#define RESULT_HEADER "451-/rpc,[\"call:result\",{\"_placeholder\":true,\"num\":0}]"

typedef struct Out {
        struct Out *next;
        bool binary;
        size_t len;
        unsigned char data[]; /* LWS_PRE bytes, then the message */
} Out;

typedef struct Conn {
        struct lws *wsi;
        Out *head, *tail;
        unsigned char *rx;     /* a message being reassembled */
        size_t rx_len;
        bool rx_binary;
        bool call_attachment;  /* the next binary message is a call's */
} Conn;

static struct lws_context *context;
static struct lws *hop_wsi;      /* the socketpair's end in this process (--hop) */
static Conn *hop_conn;           /* whose call is at the other process (one in flight) */
static volatile sig_atomic_t stopping;

static int queue(Conn *c, bool binary, const void *data, size_t len) {
        Out *o = malloc(sizeof(*o) + LWS_PRE + len);

        if (!o)
                return -ENOMEM;
        *o = (Out) { .binary = binary, .len = len };
        memcpy(o->data + LWS_PRE, data, len);
        if (c->tail)
                c->tail->next = o;
        else
                c->head = o;
        c->tail = o;
        lws_callback_on_writable(c->wsi);
        return 0;
}

/* The call:result for a call's attachment: {call_id, value: args[0]}. */
static int answer(Conn *c, const unsigned char *data, size_t len) {
        msgpack_unpacked u;
        msgpack_sbuffer sb;
        msgpack_packer pk;
        const msgpack_object *id = NULL, *value = NULL;
        int r = -EBADMSG;

        msgpack_unpacked_init(&u);
        msgpack_sbuffer_init(&sb);
        msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
        if (msgpack_unpack_next(&u, (const char *) data, len, NULL) == MSGPACK_UNPACK_SUCCESS &&
            u.data.type == MSGPACK_OBJECT_MAP) {
                for (uint32_t i = 0; i < u.data.via.map.size; i++) {
                        const msgpack_object_kv *kv = &u.data.via.map.ptr[i];

                        if (kv->key.type != MSGPACK_OBJECT_STR)
                                continue;
                        if (kv->key.via.str.size == 7 && !memcmp(kv->key.via.str.ptr, "call_id", 7))
                                id = &kv->val;
                        else if (kv->key.via.str.size == 4 && !memcmp(kv->key.via.str.ptr, "args", 4) &&
                                 kv->val.type == MSGPACK_OBJECT_ARRAY && kv->val.via.array.size > 0)
                                value = &kv->val.via.array.ptr[0];
                }
        }
        if (id) {
                msgpack_pack_map(&pk, 2);
                msgpack_pack_str_with_body(&pk, "call_id", 7);
                msgpack_pack_object(&pk, *id);
                msgpack_pack_str_with_body(&pk, "value", 5);
                if (value)
                        msgpack_pack_object(&pk, *value);
                else
                        msgpack_pack_nil(&pk);
                r = queue(c, false, RESULT_HEADER, strlen(RESULT_HEADER));
                if (r >= 0)
                        r = queue(c, true, sb.data, sb.size);
        }
        msgpack_sbuffer_destroy(&sb);
        msgpack_unpacked_destroy(&u);
        return r;
}

static int on_message(Conn *c, const unsigned char *data, size_t len, bool binary) {
        if (binary) {
                if (!c->call_attachment)
                        return 0; /* an ack's attachment */
                c->call_attachment = false;
                if (!hop_wsi)
                        return answer(c, data, len);
                /* To the other process and back; answered when it comes back. */
                hop_conn = c;
                return send(lws_get_socket_fd(hop_wsi), data, len, MSG_NOSIGNAL) == (ssize_t) len ? 0 : -errno;
        }
        if (len >= 6 && !memcmp(data, "40/rpc", 6))
                return queue(c, false, CONNECT_REPLY, strlen(CONNECT_REPLY));
        if (len > 1 && data[0] == '4' && data[1] == '5') {
                /* 451-/rpc,["call",…] or ["ack",…]: the attachment follows. */
                c->call_attachment = memmem(data, len, "[\"call\"", 7) != NULL;
                return 0;
        }
        return 0; /* pongs and the rest */
}

static void conn_done(Conn *c) {
        while (c->head) {
                Out *o = c->head;
                c->head = o->next;
                free(o);
        }
        c->tail = NULL;
        free(c->rx);
        c->rx = NULL;
        if (hop_conn == c)
                hop_conn = NULL;
}

static int callback_rpc(struct lws *wsi, enum lws_callback_reasons reason, void *user, void *in, size_t len) {
        Conn *c = user;

        switch (reason) {
        case LWS_CALLBACK_ESTABLISHED:
                *c = (Conn) { .wsi = wsi };
                return queue(c, false, OPEN_PACKET, strlen(OPEN_PACKET)) < 0 ? -1 : 0;
        case LWS_CALLBACK_RECEIVE: {
                bool first = lws_is_first_fragment(wsi), last = lws_is_final_fragment(wsi);
                unsigned char *grown;

                if (first && last)
                        return on_message(c, in, len, lws_frame_is_binary(wsi)) < 0 ? -1 : 0;
                if (first) {
                        c->rx_len = 0;
                        c->rx_binary = lws_frame_is_binary(wsi);
                }
                if (c->rx_len + len > MAX_MESSAGE || !(grown = realloc(c->rx, c->rx_len + len + 1)))
                        return -1;
                c->rx = grown;
                memcpy(c->rx + c->rx_len, in, len);
                c->rx_len += len;
                return last && on_message(c, c->rx, c->rx_len, c->rx_binary) < 0 ? -1 : 0;
        }
        case LWS_CALLBACK_SERVER_WRITEABLE:
                while (c->head) {
                        Out *o = c->head;

                        if (lws_write(wsi, o->data + LWS_PRE, o->len, o->binary ? LWS_WRITE_BINARY : LWS_WRITE_TEXT) <
                            (int) o->len)
                                return -1;
                        c->head = o->next;
                        free(o);
                        if (lws_partial_buffered(wsi))
                                break;
                }
                if (!c->head)
                        c->tail = NULL;
                else
                        lws_callback_on_writable(wsi);
                return 0;
        case LWS_CALLBACK_CLOSED:
                conn_done(c);
                return 0;
        default:
                return 0;
        }
}

/* The socketpair end of --hop: the attachment is back from the other process. */
static int callback_hop(struct lws *wsi, enum lws_callback_reasons reason, void *user, void *in, size_t len) {
        static unsigned char buf[MAX_MESSAGE];
        ssize_t n;

        if (reason != LWS_CALLBACK_RAW_RX_FILE)
                return 0;
        n = recv(lws_get_socket_fd(wsi), buf, sizeof(buf), MSG_DONTWAIT);
        if (n <= 0)
                return n < 0 && errno == EAGAIN ? 0 : -1;
        if (hop_conn && answer(hop_conn, buf, (size_t) n) < 0)
                lws_set_timeout(hop_conn->wsi, PENDING_TIMEOUT_CLOSE_SEND, LWS_TO_KILL_ASYNC);
        return 0;
}

static const struct lws_protocols protocols[] = {
        { "rpc", callback_rpc, sizeof(Conn), 65536, 0, NULL, 0 },
        { "hop", callback_hop, 0, 0, 0, NULL, 0 },
        { NULL, NULL, 0, 0, 0, NULL, 0 },
};

/* The other process of --hop: each message back as it came, blocking, until the pair closes. */
static void bounce(int fd) {
        static unsigned char buf[MAX_MESSAGE];
        ssize_t n;

        while ((n = recv(fd, buf, sizeof(buf), 0)) > 0)
                if (send(fd, buf, (size_t) n, MSG_NOSIGNAL) != n)
                        break;
        _exit(0);
}

static void on_signal(int sig) {
        stopping = 1;
        lws_cancel_service(context);
}

int main(int argc, char *argv[]) {
        static const struct option options[] = {
                { "port", required_argument, NULL, 'p' },
                { "hop", no_argument, NULL, 'H' },
                { "help", no_argument, NULL, 'h' },
                {}
        };
        struct lws_context_creation_info info = {};
        int c, port = 0, pair[2] = { -1, -1 };
        bool hop = false;
        pid_t child = -1;

        while ((c = getopt_long(argc, argv, "p:Hh", options, NULL)) >= 0)
                switch (c) {
                case 'p':
                        port = atoi(optarg);
                        break;
                case 'H':
                        hop = true;
                        break;
                case 'h':
                        printf("Usage: floor-server --port=PORT [--hop]\n");
                        return 0;
                default:
                        return 2;
                }
        if (port <= 0 || port > 65535) {
                fprintf(stderr, "floor-server: --port=PORT is needed\n");
                return 2;
        }
        if (hop) {
                if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) < 0) {
                        perror("floor-server: socketpair");
                        return 1;
                }
                child = fork();
                if (child < 0) {
                        perror("floor-server: fork");
                        return 1;
                }
                if (child == 0) {
                        close(pair[0]);
                        bounce(pair[1]);
                }
                close(pair[1]);
        }

        lws_set_log_level(LLL_ERR, NULL);
        info.port = port;
        info.iface = "127.0.0.1";
        info.protocols = protocols;
        info.gid = -1;
        info.uid = -1;
        context = lws_create_context(&info);
        if (!context) {
                fprintf(stderr, "floor-server: cannot listen on 127.0.0.1:%d\n", port);
                return 1;
        }
        if (hop) {
                lws_sock_file_fd_type fd = { .filefd = pair[0] };

                hop_wsi = lws_adopt_descriptor_vhost(lws_get_vhost_by_name(context, "default"), LWS_ADOPT_RAW_FILE_DESC,
                                                     fd, "hop", NULL);
                if (!hop_wsi) {
                        fprintf(stderr, "floor-server: cannot watch the socketpair\n");
                        return 1;
                }
        }
        signal(SIGTERM, on_signal);
        signal(SIGINT, on_signal);
        fprintf(stderr, "floor-server: listening on 127.0.0.1:%d%s\n", port, hop ? " (with a hop)" : "");
        while (!stopping && lws_service(context, 0) >= 0)
                ;
        lws_context_destroy(context);
        if (child > 0) {
                close(pair[0]);
                waitpid(child, NULL, 0);
        }
        return 0;
}

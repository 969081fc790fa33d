/* SPDX-License-Identifier: MIT */
#include <fcntl.h>
#include <libwebsockets.h>
#include <openssl/ssl.h>
#include <netdb.h>
#include <strings.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include "http-server.h"
#include "log.h"
#include "socket-drain.h"
#include "tls-front.h"
#include "uv-event.h"

#define MAX_LISTENERS 16
#define MAX_ROUTES 16

typedef struct Listener {
        HttpServer *server;
        int fd;
        sd_event_source *source;
} Listener;

struct HttpServer {
        sd_event *event;
        UvEvent *uv;
        struct lws_context *context;
        struct lws_vhost *vhost;
        HttpServerConfig config;
        Listener listeners[MAX_LISTENERS];
        size_t n_listeners;
        EioServer *routes[MAX_ROUTES];
        size_t n_routes;
        const HttpEioOps *eio_ops;
        struct {
                const char *prefix;
                HttpRouteFn fn;
                void *userdata;
        } handlers[MAX_ROUTES];
        size_t n_handlers;
        HttpConn *conns;         /* plain HTTP connections (ours) */
        HttpConn *ws_conns;      /* WebSockets (libwebsockets' connections) */
        unsigned n_connections;  /* those and the WebSockets lws runs */
        unsigned port;
        bool shutting_down;
        HttpTakeover takeover;   /* wants == NULL: none */
        SSL_CTX *tls;            /* NULL: plain HTTP */
        TlsFronts fronts;        /* TLS connections: handshakes, and the pumps of served ones */
        HttpAdmitFn admit;
        void *admit_userdata;
        SocketDrain *drain;      /* close-by-reset mode: sockets we are done with */
        sd_event_source *ws_ending_timer; /* … and WebSockets waiting to be drained */
        bool not_accepting;      /* http_server_set_accepting(false) */
};

const HttpServerConfig *http_server_config(const HttpServer *s) {
        return &s->config;
}

sd_event *http_server_event(const HttpServer *s) {
        return s->event;
}

bool http_server_is_shutting_down(const HttpServer *s) {
        return s->shutting_down;
}

void http_server_conn_added(HttpServer *s, HttpConn *c) {
        c->next = s->conns;
        if (s->conns)
                s->conns->prev = c;
        s->conns = c;
        s->n_connections++;
}

void http_server_close_socket(HttpServer *s, int fd) {
        if (s->drain)
                socket_drain_add(s->drain, fd);
        else
                safe_close(fd);
}

/* The WebSockets are listed so that a hold can end them (http_server_reset_connections()). */
static void ws_listed_add(HttpServer *s, HttpConn *c) {
        if (c->ws_listed)
                return;
        c->prev = NULL;
        c->next = s->ws_conns;
        if (s->ws_conns)
                s->ws_conns->prev = c;
        s->ws_conns = c;
        c->ws_listed = true;
}

static void ws_listed_remove(HttpServer *s, HttpConn *c) {
        if (!c->ws_listed)
                return;
        if (c->prev)
                c->prev->next = c->next;
        else
                s->ws_conns = c->next;
        if (c->next)
                c->next->prev = c->prev;
        c->prev = c->next = NULL;
        c->ws_listed = false;
}

void http_server_conn_removed(HttpServer *s, HttpConn *c) {
        if (c->prev)
                c->prev->next = c->next;
        else if (s->conns == c)
                s->conns = c->next;
        if (c->next)
                c->next->prev = c->prev;
        c->prev = c->next = NULL;
        if (s->n_connections > 0)
                s->n_connections--;
}


int http_conn_query(HttpConn *c, const char *name, char *buf, size_t size) {
        char key[64], tmp[HTTP_QUERY_VALUE_MAX + 64];
        const char *v;
        size_t n;

        if (!c->wsi)
                return http_conn_own_query(c, name, buf, size);
        if (snprintf(key, sizeof(key), "%s=", name) >= (int) sizeof(key))
                return -EINVAL;
        v = lws_get_urlarg_by_name(c->wsi, key, tmp, (int) sizeof(tmp));
        if (!v)
                return -ENOENT;
        n = strlen(v);
        if (n >= size)
                return -E2BIG;
        memcpy(buf, v, n + 1);
        return (int) n;
}

void http_conn_want_write(HttpConn *c) {
        if (c && c->wsi)
                lws_callback_on_writable(c->wsi);
}

static EioServer *route(HttpServer *s, const char *path) {
        for (size_t i = 0; i < s->n_routes; i++) {
                const char *prefix = s->eio_ops->path(s->routes[i]);
                size_t n = strlen(prefix);
                /* "/socket.io/" also matches "/socket.io" (no trailing slash). */
                if (strneq(path, prefix, n) || (n > 1 && strlen(path) == n - 1 && strneq(path, prefix, n - 1)))
                        return s->routes[i];
        }
        return NULL;
}

void http_server_set_admit(HttpServer *s, HttpAdmitFn fn, void *userdata) {
        s->admit = fn;
        s->admit_userdata = userdata;
}

static const char *refusal(HttpServer *s, HttpConn *c, const char *path) {
        if (!s->admit || streq(path, "/health"))
                return NULL;
        return s->admit(c, path, s->admit_userdata);
}

void http_server_dispatch(HttpServer *s, HttpConn *c, const char *path) {
        const char *refused = refusal(s, c, path);

        if (refused) {
                c->close_after_response = true;
                (void) http_conn_respond_error(c, 503, 3, refused);
                return;
        }
        if (streq(path, "/health")) {
                _cleanup_buffer_ Buffer b = BUFFER_NULL;
                if (c->method != HTTP_METHOD_GET) {
                        (void) http_conn_respond_error(c, 405, 3, "Method not allowed");
                        return;
                }
                (void) buffer_printf(&b, "{\"status\":\"ok\",\"version\":\"%s\"}", AGENTIX_VERSION);
                (void) http_conn_respond(c, 200, "application/json", &b);
                return;
        }

        for (size_t i = 0; i < s->n_handlers; i++)
                if (strneq(path, s->handlers[i].prefix, strlen(s->handlers[i].prefix))) {
                        s->handlers[i].fn(c, path, s->handlers[i].userdata);
                        return;
                }

        c->eio = route(s, path);
        if (!c->eio) {
                (void) http_conn_respond_error(c, 404, 3, "Not found");
                return;
        }
        s->eio_ops->handle_request(c->eio, c);
}

int http_server_add_route(HttpServer *s, const char *prefix, HttpRouteFn fn, void *userdata) {
        if (s->n_handlers >= MAX_ROUTES)
                return -E2BIG;
        s->handlers[s->n_handlers].prefix = prefix;
        s->handlers[s->n_handlers].fn = fn;
        s->handlers[s->n_handlers].userdata = userdata;
        s->n_handlers++;
        return 0;
}

void http_server_set_takeover(HttpServer *s, const HttpTakeover *takeover) {
        s->takeover = takeover ? *takeover : (HttpTakeover) {};
}

bool http_server_takeover_wants(HttpServer *s, HttpConn *c, const char *path) {
        /* A refused request goes on to http_server_dispatch(), which answers it. */
        return s->takeover.wants && !refusal(s, c, path) && s->takeover.wants(c, path, s->takeover.userdata);
}

void http_server_takeover(HttpServer *s, HttpConn *c, const uint8_t *head, size_t size) {
        int fd = c->fd;

        c->io = sd_event_source_disable_unref(c->io);
        c->fd = -EBADF;
        s->takeover.take(fd, head, size, s->takeover.userdata);
}

const HttpEioOps *http_server_eio_ops(const HttpServer *s) {
        return s->eio_ops;
}

int http_server_upgrade(HttpServer *s, HttpConn *c, const char *path, const uint8_t *head, size_t size) {
        int fd;

        const char *refused = refusal(s, c, path);

        if (refused)
                return http_conn_respond_error(c, 503, 3, refused), -EPERM;
        /* Engine.IO answers a refused upgrade with its usual error, as for polling. */
        c->eio = route(s, path);
        if (!c->eio || c->method != HTTP_METHOD_GET || strcasecmp(c->upgrade_proto, "websocket") != 0)
                return http_conn_respond_error(c, 400, 3, "Bad request"), -EINVAL;
        if (s->eio_ops->ws_check(c->eio, c) < 0)
                return -EINVAL; /* answered */
        if (s->shutting_down)
                return http_conn_respond_error(c, 503, 3, "Shutting down"), -ESHUTDOWN;

        /* lws takes the socket and reads the head again from `head`; it closes the socket
         * itself when it cannot take it. From now on the connection is a WebSocket's. */
        fd = c->fd;
        c->io = sd_event_source_disable_unref(c->io);
        /* Whatever ends it then (ws_kill(), lws on an error), its close is a reset. */
        if (s->config.close_by_reset)
                (void) socket_reset_on_close(fd);
        if (!lws_adopt_socket_vhost_readbuf(s->vhost, fd, (const char *) head, size))
                log_warning("Failed to hand a WebSocket connection to libwebsockets.");
        uv_event_run(s->uv);
        return 0;
}

/* ---- ending WebSockets with a reset (close-by-reset mode) ----------------------------------
 *
 * lws's own close of a WebSocket is a close frame, then (on a libuv loop, without waiting)
 * shutdown(SHUT_WR) and close(): our FIN first, and a peer that answers it before the close
 * leaves us in TIME_WAIT. A wsi whose timeout runs out is closed as "permanently unusable"
 * instead: no frame, no shutdown, and with zero linger (set at the upgrade) the close is a
 * reset. So in that mode the server ends its WebSockets that way: at once when the peer asked
 * for it or something failed; when Engine.IO is done with the connection, after a close frame
 * of ours, once the peer has acknowledged all that was sent. */

static uint64_t server_now(HttpServer *s) {
        uint64_t t = 0;

        (void) sd_event_now(s->event, CLOCK_MONOTONIC, &t);
        return t;
}

static void ws_kill(HttpServer *s, HttpConn *c) {
        c->ws_ending = true;
        lws_set_timeout(c->wsi, PENDING_TIMEOUT_USER_OK, LWS_TO_KILL_ASYNC);
        /* lws looks at its timeouts after it served a socket event, not when one is set: wake
         * it (its event pipe), in case this is not in one of its callbacks. */
        lws_cancel_service(s->context);
}

static void ws_ending_arm(HttpServer *s) {
        (void) sd_event_source_set_time(s->ws_ending_timer, server_now(s) + 10 * 1000);
        (void) sd_event_source_set_enabled(s->ws_ending_timer, SD_EVENT_ONESHOT);
}

static int on_ws_ending_tick(sd_event_source *source, uint64_t usec, void *userdata) {
        HttpServer *s = userdata;
        bool waiting = false;

        for (HttpConn *c = s->ws_conns; c; c = c->next) {
                if (!c->ws_ending || c->ws_ending_deadline == 0)
                        continue;
                if (usec >= c->ws_ending_deadline ||
                    (!lws_partial_buffered(c->wsi) && socket_drained(lws_get_socket_fd(c->wsi)))) {
                        c->ws_ending_deadline = 0;
                        ws_kill(s, c);
                } else
                        waiting = true;
        }
        if (waiting)
                ws_ending_arm(s);
        uv_event_run(s->uv);
        return 0;
}

/* Engine.IO is done with c: the default mode closes it as lws does (-1); close-by-reset mode
 * sends the close frame lws would (1000: normal), so that the peer knows the end was meant,
 * and resets it once the peer has it all (0). lws has no call that only sends one (its close
 * frame comes with its close), so the frame goes out as it is on the wire (a server's is not
 * masked), between two of lws's when lws holds nothing back. */
static int ws_end(HttpServer *s, HttpConn *c) {
        static const uint8_t close_frame[] = { 0x88, 2, LWS_CLOSE_STATUS_NORMAL >> 8, LWS_CLOSE_STATUS_NORMAL & 0xff };
        int fd = lws_get_socket_fd(c->wsi);

        if (!s->config.close_by_reset)
                return -1;
        if (!lws_partial_buffered(c->wsi) && fd >= 0)
                (void) send(fd, close_frame, sizeof(close_frame), MSG_NOSIGNAL | MSG_DONTWAIT);
        if (s->tls)
                tls_fronts_written(&s->fronts, lws_get_socket_fd(c->wsi));
        c->ws_ending = true;
        c->ws_ending_deadline = server_now(s) + SOCKET_DRAIN_MAX_USEC;
        ws_ending_arm(s);
        return 0;
}

/* Something failed, or the peer asked to close: -1 (lws closes it), or in close-by-reset mode
 * a reset at once (0). */
static int ws_fail(HttpServer *s, HttpConn *c) {
        if (!s->config.close_by_reset)
                return -1;
        ws_kill(s, c);
        return 0;
}

static int callback(struct lws *wsi, enum lws_callback_reasons reason, void *user, void *in, size_t len) {
        struct lws_context *context = lws_get_context(wsi);
        HttpServer *s = context ? lws_context_user(context) : NULL;
        HttpConn *c = user;

        switch (reason) {
        /* Plain HTTP is ours (http-conn.c); lws only sees requests that upgrade. */
        case LWS_CALLBACK_HTTP:
        case LWS_CALLBACK_HTTP_BODY:
        case LWS_CALLBACK_HTTP_BODY_COMPLETION:
                return -1;

        case LWS_CALLBACK_FILTER_PROTOCOL_CONNECTION: {
                char path[256];
                int n;

                if (!c)
                        return -1;
                c->wsi = wsi;
                c->server = s;
                n = lws_hdr_copy(wsi, path, sizeof(path), WSI_TOKEN_GET_URI);
                if (n <= 0)
                        return -1;
                c->eio = route(s, path);
                if (!c->eio)
                        return -1;
                return s->eio_ops->ws_check(c->eio, c) < 0 ? -1 : 0;
        }

        case LWS_CALLBACK_ESTABLISHED:
                if (!c || !c->eio || !s)
                        return -1;
                c->wsi = wsi;
                c->is_ws = true;
                ws_listed_add(s, c);
                return s->eio_ops->ws_established(c->eio, c) < 0 ? ws_fail(s, c) : 0;

        case LWS_CALLBACK_RECEIVE:
                if (!c || !s)
                        return -1;
                if (c->ws_ending)
                        return 0; /* too late for anything it says */
                return s->eio_ops->ws_receive(c, in, len) < 0 ? ws_fail(s, c) : 0;

        case LWS_CALLBACK_WS_PEER_INITIATED_CLOSE:
                /* lws would answer with its close frame and its FIN. */
                if (c && s && s->config.close_by_reset)
                        ws_kill(s, c);
                return 0;

        case LWS_CALLBACK_SERVER_WRITEABLE: {
                int r;

                if (!c || !s)
                        return -1;
                if (c->ws_ending)
                        return 0;
                r = s->eio_ops->ws_writeable(c);
                /* Over TLS what was written goes on through the pump now, not a turn later. */
                if (r >= 0 && s->tls)
                        tls_fronts_written(&s->fronts, lws_get_socket_fd(wsi));
                return r < 0 ? ws_end(s, c) : 0;
        }

        case LWS_CALLBACK_CLOSED:
                /* Closed: nothing to end any more (WSI_DESTROY comes a loop turn later). */
                if (c && s)
                        ws_listed_remove(s, c);
                if (c && s && s->eio_ops)
                        s->eio_ops->ws_closed(c);
                return 0;

        case LWS_CALLBACK_WSI_CREATE:
                if (s)
                        s->n_connections++;
                return 0;

        case LWS_CALLBACK_WSI_DESTROY:
                if (c && s)
                        ws_listed_remove(s, c);
                if (c) {
                        if (c->is_ws && s && s->eio_ops)
                                s->eio_ops->ws_closed(c);
                        buffer_done(&c->rx);
                        c->wsi = NULL;
                }
                if (s && s->n_connections > 0)
                        s->n_connections--;
                return 0;

        default:
                return 0;
        }
}

static const struct lws_protocols protocols[] = {
        {
                .name = "agentix",
                .callback = callback,
                .per_session_data_size = sizeof(HttpConn),
                .rx_buffer_size = 64 * 1024,
        },
        { NULL, NULL, 0, 0, 0, NULL, 0 }
};

/* lws 4.1 logs some of its routine steps at the error level; they are no errors of ours. */
static bool lws_line_is_routine(const char *line) {
        static const char *const routine[] = {
                "adopt_socket_readbuf: calling service", /* every accepted connection */
        };

        for (size_t i = 0; i < ELEMENTSOF(routine); i++)
                if (strstr(line, routine[i]))
                        return true;
        return false;
}

static void lws_log_emit(int level, const char *line) {
        size_t n = strlen(line);

        while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r'))
                n--;
        if ((level & LLL_ERR) && !lws_line_is_routine(line))
                log_error("lws: %.*s", (int) n, line);
        else
                log_debug("lws: %.*s", (int) n, line);
}

int http_server_new(sd_event *event, const HttpServerConfig *config, HttpServer **ret) {
        struct lws_context_creation_info info = {};
        void *foreign_loops[1];
        HttpServer *s;
        int r;

        s = calloc(1, sizeof(*s));
        if (!s)
                return -ENOMEM;
        s->event = sd_event_ref(event);
        s->config = *config;
        if (config->close_by_reset) {
                r = socket_drain_new(event, &s->drain);
                if (r < 0)
                        goto fail;
                s->fronts.drain = s->drain;
                r = sd_event_add_time(event, &s->ws_ending_timer, CLOCK_MONOTONIC, 0, 5 * 1000, on_ws_ending_tick, s);
                if (r >= 0)
                        r = sd_event_source_set_enabled(s->ws_ending_timer, SD_EVENT_OFF);
                if (r < 0)
                        goto fail;
        }
        if (s->config.idle_timeout_ms == 0)
                s->config.idle_timeout_ms = 60 * 1000;
        if (s->config.request_timeout_ms == 0)
                s->config.request_timeout_ms = 30 * 1000;

        r = uv_event_new(event, &s->uv);
        if (r < 0)
                goto fail;
        /* lws starts an idle handle after every socket event, which arms the timer for "now".
         * Re-running uv at once instead was measured: 20-25 us more echo p50 here. */

        lws_set_log_level(log_get_max_level() >= LOG_DEBUG ? (LLL_ERR | LLL_WARN | LLL_NOTICE) : LLL_ERR,
                          lws_log_emit);

        foreign_loops[0] = uv_event_loop(s->uv);
        info.options = LWS_SERVER_OPTION_LIBUV | LWS_SERVER_OPTION_EXPLICIT_VHOSTS;
        info.foreign_loops = foreign_loops;
        info.user = s;
        info.count_threads = 1;
        /* lws sizes its fd table from this; the default (RLIMIT_NOFILE) can be millions. */
        info.fd_limit_per_thread = config->max_connections + 64;
        info.max_http_header_pool = MIN(config->max_connections, 1024u);
        /* The upgrade request is handed over whole; browsers send long ones (cookies). */
        info.max_http_header_data = HTTP_MAX_HEAD;
        info.pt_serv_buf_size = 64 * 1024;
        info.timeout_secs = 30;
        s->context = lws_create_context(&info);
        if (!s->context) {
                r = log_error_errno(EIO, "Failed to create the libwebsockets context.");
                goto fail;
        }

        memset(&info, 0, sizeof(info));
        info.port = CONTEXT_PORT_NO_LISTEN_SERVER;
        info.protocols = protocols;
        info.vhost_name = "agentix";
        info.options = LWS_SERVER_OPTION_LIBUV;
        s->vhost = lws_create_vhost(s->context, &info);
        if (!s->vhost) {
                r = log_error_errno(EIO, "Failed to create the libwebsockets vhost.");
                goto fail;
        }

        uv_event_run(s->uv);
        *ret = s;
        return 0;
fail:
        http_server_free(s);
        return r;
}

static int serve_connection(int fd, void *userdata) {
        HttpServer *s = userdata;
        HttpConn *c;
        int r;

        r = http_conn_new(s, fd, &c);
        if (r < 0) {
                log_warning_errno(r, "Failed to set up a connection: %m");
                http_server_close_socket(s, fd);
        }
        return r;
}

int http_server_set_tls(HttpServer *s, SSL_CTX *ctx) {
        if (ctx && SSL_CTX_up_ref(ctx) != 1)
                return -ENOMEM;
        SSL_CTX_free(s->tls);
        s->tls = ctx;
        return 0;
}

bool http_server_is_tls(const HttpServer *s) {
        return s->tls;
}

void http_server_end_connections(HttpServer *s) {
        for (HttpConn *c = s->conns, *next; c; c = next) {
                next = c->next;
                http_conn_shutdown(c);
        }
}

/* At the connection cap: end the connection that has waited longest for a request (idle, or
 * its head still arriving), so that the places cannot all be held by a peer that only
 * connects, or trickles heads, which needs no token. Connections being served (a request in
 * hand, a parked poll, a stream, a WebSocket) keep theirs. false: none waits. */
static bool evict_waiting(HttpServer *s) {
        HttpConn *victim = NULL;
        uint64_t oldest = UINT64_MAX;

        for (HttpConn *c = s->conns; c; c = c->next) {
                uint64_t since;

                if (http_conn_waiting(c, &since) && since <= oldest) {
                        victim = c;
                        oldest = since;
                }
        }
        if (!victim)
                return false;
        http_conn_free(victim);
        return true;
}

static int on_accept(sd_event_source *source, int fd, uint32_t revents, void *userdata) {
        Listener *l = userdata;
        HttpServer *s = l->server;
        int r;

        for (int i = 0; i < 64; i++) {
                int cfd = accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
                if (cfd < 0) {
                        if (errno == EAGAIN || errno == EINTR || errno == ECONNABORTED)
                                break;
                        log_warning_errno(errno, "accept() failed: %m");
                        break;
                }
                /* A served TLS connection is counted twice (its pump and its HttpConn): the
                 * bound holds all the same. */
                if (s->shutting_down ||
                    (s->n_connections + s->fronts.n >= s->config.max_connections && !evict_waiting(s))) {
                        http_server_close_socket(s, cfd);
                        continue;
                }
                (void) setsockopt(cfd, IPPROTO_TCP, TCP_NODELAY, &(int) { 1 }, sizeof(int));
                if (s->tls) {
                        r = tls_front_new(s->event, s->tls, cfd, &s->fronts, serve_connection, s);
                        if (r < 0)
                                log_warning_errno(r, "Failed to set up a TLS connection: %m");
                        continue;
                }
                (void) serve_connection(cfd, s);
        }
        return 0;
}

/* Serve on fd, a listening socket (ours, or systemd's), taking it. */
static int add_listener(HttpServer *s, int fd) {
        Listener *l;
        int r;

        if (s->n_listeners >= MAX_LISTENERS) {
                safe_close(fd);
                return -E2BIG;
        }
        l = &s->listeners[s->n_listeners];
        l->server = s;
        l->fd = fd;
        r = sd_event_add_io(s->event, &l->source, fd, EPOLLIN, on_accept, l);
        if (r < 0) {
                l->fd = -EBADF;
                safe_close(fd);
                return r;
        }
        s->n_listeners++;
        if (s->port == 0) {
                struct sockaddr_storage ss;
                socklen_t sl = sizeof(ss);
                if (getsockname(fd, (struct sockaddr *) &ss, &sl) == 0 &&
                    (ss.ss_family == AF_INET || ss.ss_family == AF_INET6))
                        s->port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *) &ss)->sin6_port
                                                                 : ((struct sockaddr_in *) &ss)->sin_port);
        }
        return 0;
}

int http_server_listen_fd(HttpServer *s, int fd) {
        int flags = fcntl(fd, F_GETFL);

        if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0 || fcntl(fd, F_SETFD, FD_CLOEXEC) < 0) {
                safe_close(fd);
                return -errno;
        }
        return add_listener(s, fd);
}

int http_server_listen(HttpServer *s, const char *host, const char *port) {
        struct addrinfo hints = { .ai_flags = AI_PASSIVE | AI_NUMERICSERV, .ai_socktype = SOCK_STREAM };
        struct addrinfo *res = NULL;
        int r, n = 0;

        r = getaddrinfo(host, port, &hints, &res);
        if (r != 0)
                return log_error_errno(EADDRNOTAVAIL, "Failed to resolve %s:%s: %s", host, port, gai_strerror(r));

        for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
                int fd;

                if (s->n_listeners >= MAX_LISTENERS)
                        break;
                fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
                if (fd < 0) {
                        r = negative_errno();
                        continue;
                }
                /* Not in close-by-reset mode: there no TIME_WAIT of ours can be in the way of a
                 * restart, and SO_REUSEADDR would let another socket bind the port while ours is
                 * shut down (http_server_set_accepting()), and then listen on it. */
                if (!s->config.close_by_reset)
                        (void) setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &(int) { 1 }, sizeof(int));
                if (ai->ai_family == AF_INET6)
                        (void) setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &(int) { 1 }, sizeof(int));
                if (bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 || listen(fd, SOMAXCONN) < 0) {
                        r = negative_errno();
                        safe_close(fd);
                        continue;
                }

                r = add_listener(s, fd);
                if (r < 0)
                        continue;
                n++;
        }
        freeaddrinfo(res);

        if (n == 0)
                return log_error_errno(r ?: -EADDRNOTAVAIL, "Failed to listen on %s:%s: %m", host, port);
        return 0;
}

unsigned http_server_port(HttpServer *s) {
        return s->port;
}

size_t http_server_ports(HttpServer *s, uint16_t *ret, size_t max) {
        size_t n = 0;

        for (size_t i = 0; i < s->n_listeners && n < max; i++) {
                struct sockaddr_storage ss;
                socklen_t len = sizeof(ss);
                uint16_t port;

                if (getsockname(s->listeners[i].fd, (struct sockaddr *) &ss, &len) < 0)
                        continue;
                if (ss.ss_family == AF_INET)
                        port = ntohs(((struct sockaddr_in *) &ss)->sin_port);
                else if (ss.ss_family == AF_INET6)
                        port = ntohs(((struct sockaddr_in6 *) &ss)->sin6_port);
                else
                        continue;
                ret[n++] = port;
        }
        return n;
}

int http_server_add_eio(HttpServer *s, EioServer *eio, const HttpEioOps *ops) {
        if (s->n_routes >= MAX_ROUTES)
                return -E2BIG;
        if (!ops || (s->eio_ops && s->eio_ops != ops))
                return -EINVAL;
        s->eio_ops = ops;
        s->routes[s->n_routes++] = eio;
        return 0;
}

void http_server_shutdown(HttpServer *s) {
        s->shutting_down = true;
        for (size_t i = 0; i < s->n_listeners; i++) {
                s->listeners[i].source = sd_event_source_disable_unref(s->listeners[i].source);
                s->listeners[i].fd = safe_close(s->listeners[i].fd);
        }
        for (HttpConn *c = s->conns; c; c = c->next)
                http_conn_shutdown(c);
}

/* Out of epoll first: gVisor cannot save a listening socket that has waiters. */
static int listener_stop(Listener *l) {
        int r = sd_event_source_set_enabled(l->source, SD_EVENT_OFF);

        if (r < 0)
                return r;
        if (shutdown(l->fd, SHUT_RD) < 0)
                return negative_errno();
        return 0;
}

static int listener_start(Listener *l) {
        if (listen(l->fd, SOMAXCONN) < 0)
                return negative_errno();
        return sd_event_source_set_enabled(l->source, SD_EVENT_ON);
}

int http_server_set_accepting(HttpServer *s, bool accepting) {
        int r = 0;

        if (s->not_accepting == !accepting || s->shutting_down)
                return 0;
        for (size_t i = 0; i < s->n_listeners; i++) {
                Listener *l = &s->listeners[i];
                int k;

                if (l->fd < 0)
                        continue;
                k = accepting ? listener_start(l) : listener_stop(l);
                if (k < 0 && r == 0)
                        r = k;
        }
        s->not_accepting = !accepting;
        return r;
}

static HttpConn *conn_other_than(HttpServer *s, HttpConn *keep) {
        for (HttpConn *c = s->conns; c; c = c->next)
                if (c != keep)
                        return c;
        return NULL;
}

/* As ws_kill() does (LWS_TO_KILL_SYNC would try the polite close, and wait for the peer). */
static void reset_websockets(HttpServer *s) {
        for (HttpConn *c = s->ws_conns; c; c = c->next) {
                int fd = lws_get_socket_fd(c->wsi);

                if (fd >= 0)
                        (void) socket_reset_on_close(fd);
                c->ws_ending_deadline = 0;
                ws_kill(s, c);
        }
        /* Now, not at the loop's next turn. */
        uv_event_run(s->uv);
        if (s->ws_conns)
                log_warning("WebSockets are still open after they were reset.");
}

void http_server_reset_connections(HttpServer *s, HttpConn *keep) {
        int keep_fd = keep ? keep->fd : -EBADF;
        HttpConn *c;

        /* Freeing one calls back into Engine.IO and handlers, which may touch others: start
         * from the list's head each time. */
        while ((c = conn_other_than(s, keep)))
                http_conn_reset(c);
        reset_websockets(s);
        tls_fronts_reset(&s->fronts, keep_fd);
        socket_drain_reset_all(s->drain);
}

int http_server_conn_socket(const HttpServer *s, const HttpConn *c) {
        int fd;

        if (c->is_ws || c->fd < 0)
                return -EBADF;
        fd = tls_fronts_net_fd(&s->fronts, c->fd);
        return fd >= 0 ? fd : c->fd;
}

HttpServer *http_server_free(HttpServer *s) {
        if (!s)
                return NULL;
        http_server_shutdown(s);
        while (s->conns)
                http_conn_free(s->conns);
        tls_fronts_free_all(&s->fronts);
        SSL_CTX_free(s->tls);
        if (s->context) {
                /* On a foreign loop lws 4.1 stops after the first stage and waits for its uv
                 * handles to close; once the loop has run their close callbacks, the second
                 * stage frees the context (and unloads the uv event-lib plugin, so no lws
                 * callback may be left pending by then). */
                lws_context_destroy(s->context);
                uv_event_settle(s->uv);
                lws_context_destroy2(s->context);
                s->context = NULL;
        }
        s->uv = uv_event_free(s->uv);
        /* After the connections: they hand their sockets to it as they go. */
        s->drain = socket_drain_free(s->drain);
        s->ws_ending_timer = sd_event_source_disable_unref(s->ws_ending_timer);
        sd_event_unref(s->event);
        free(s);
        return NULL;
}

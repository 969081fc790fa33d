/* SPDX-License-Identifier: MIT */
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include "eio-server.h"
#include "http-server.h"
#include "log.h"
#include "uv-event.h"

#define MAX_LISTENERS 16
#define MAX_ROUTES 4
/* Bytes handed to lws per HTTP body write. */
#define HTTP_CHUNK (256u * 1024u)

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
        unsigned n_connections;
        unsigned port;
        bool shutting_down;
};

static void conn_reset_request(HttpConn *c) {
        c->method = HTTP_METHOD_OTHER;
        c->eio = NULL;
        c->origin[0] = 0;
        c->sid[0] = 0;
        buffer_done(&c->body);
        c->body_pending = false;
        c->body_too_large = false;
        c->post_stream = false;
        c->post_error = 0;
        c->post_packet_len = 0;
        c->post_oversized = false;
        c->responding = false;
        c->status = 0;
        c->content_type = NULL;
        buffer_done(&c->response);
        c->response_sent = 0;
        c->headers_sent = false;
        c->close_after_response = false;
}

static void conn_free_buffers(HttpConn *c) {
        buffer_done(&c->body);
        buffer_done(&c->response);
        buffer_done(&c->rx);
}

int http_conn_query(HttpConn *c, const char *name, char *buf, size_t size) {
        char key[64], tmp[HTTP_QUERY_VALUE_MAX + 64];
        const char *v;
        size_t n;

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

int http_conn_respond(HttpConn *c, unsigned status, const char *content_type, Buffer *body) {
        if (c->responding) {
                if (body)
                        buffer_done(body);
                return -EBUSY;
        }
        c->responding = true;
        /* Unread body bytes would be parsed as the next request: close after answering. */
        if (c->body_pending)
                c->close_after_response = true;
        c->status = status;
        c->content_type = content_type;
        buffer_done(&c->response);
        if (body) {
                c->response = *body;
                *body = BUFFER_NULL;
        }
        c->response_sent = 0;
        c->headers_sent = false;
        lws_callback_on_writable(c->wsi);
        return 0;
}

int http_conn_respond_error(HttpConn *c, unsigned status, int code, const char *message) {
        _cleanup_buffer_ Buffer b = BUFFER_NULL;
        int r;

        r = buffer_printf(&b, "{\"code\":%d,\"message\":\"%s\"}", code, message);
        if (r < 0)
                return r;
        return http_conn_respond(c, status, "application/json", &b);
}

static int add_header(struct lws *wsi, const char *name, const char *value, uint8_t **p, uint8_t *end) {
        return lws_add_http_header_by_name(wsi, (const unsigned char *) name, (const unsigned char *) value,
                                           (int) strlen(value), p, end);
}

/* Returns <0 to close the connection. */
static int conn_write_response(HttpConn *c) {
        struct lws *wsi = c->wsi;

        if (!c->headers_sent) {
                uint8_t hdr[LWS_PRE + 1024], *start = hdr + LWS_PRE, *p = start, *end = hdr + sizeof(hdr) - 1;

                if (lws_add_http_common_headers(wsi, c->status, c->content_type ?: "text/plain", c->response.len, &p,
                                                end))
                        return -1;
                /* Socket.IO clients run in browsers too: answer CORS for any origin. */
                if (c->origin[0]) {
                        if (add_header(wsi, "access-control-allow-origin:", c->origin, &p, end) ||
                            add_header(wsi, "access-control-allow-credentials:", "true", &p, end) ||
                            add_header(wsi, "vary:", "Origin", &p, end))
                                return -1;
                } else if (add_header(wsi, "access-control-allow-origin:", "*", &p, end))
                        return -1;
                if (c->method == HTTP_METHOD_OPTIONS &&
                    (add_header(wsi, "access-control-allow-methods:", "GET, POST, OPTIONS", &p, end) ||
                     add_header(wsi, "access-control-allow-headers:", "content-type, authorization", &p, end)))
                        return -1;
                if (add_header(wsi, "cache-control:", "no-store", &p, end))
                        return -1;
                if (lws_finalize_write_http_header(wsi, start, &p, end))
                        return -1;
                c->headers_sent = true;
        }

        while (c->response_sent < c->response.len) {
                size_t n = MIN(c->response.len - c->response_sent, (size_t) HTTP_CHUNK);
                bool last = c->response_sent + n == c->response.len;

                if (lws_write(wsi, buffer_data(&c->response) + c->response_sent, n,
                              last ? LWS_WRITE_HTTP_FINAL : LWS_WRITE_HTTP) < (int) n)
                        return -1;
                c->response_sent += n;
                if (!last && lws_send_pipe_choked(wsi)) {
                        lws_callback_on_writable(wsi);
                        return 0;
                }
        }

        /* Response complete: keep the connection for the next request unless told not to. */
        bool close = c->close_after_response;
        conn_reset_request(c);
        if (close || lws_http_transaction_completed(wsi))
                return -1;
        return 0;
}

static HttpMethod request_method(struct lws *wsi) {
        if (lws_hdr_total_length(wsi, WSI_TOKEN_GET_URI) > 0)
                return HTTP_METHOD_GET;
        if (lws_hdr_total_length(wsi, WSI_TOKEN_POST_URI) > 0)
                return HTTP_METHOD_POST;
        if (lws_hdr_total_length(wsi, WSI_TOKEN_OPTIONS_URI) > 0)
                return HTTP_METHOD_OPTIONS;
        return HTTP_METHOD_OTHER;
}

static EioServer *route(HttpServer *s, const char *path) {
        for (size_t i = 0; i < s->n_routes; i++) {
                const char *prefix = eio_server_path(s->routes[i]);
                size_t n = strlen(prefix);
                /* "/socket.io/" also matches "/socket.io" (no trailing slash). */
                if (strneq(path, prefix, n) || (n > 1 && strlen(path) == n - 1 && strneq(path, prefix, n - 1)))
                        return s->routes[i];
        }
        return NULL;
}

static int on_http_request(HttpServer *s, HttpConn *c, const char *path) {
        conn_reset_request(c);
        c->method = request_method(c->wsi);
        c->body_pending = c->method == HTTP_METHOD_POST;
        if (lws_hdr_copy(c->wsi, c->origin, sizeof(c->origin), WSI_TOKEN_ORIGIN) < 0)
                c->origin[0] = 0;

        if (streq(path, "/health")) {
                _cleanup_buffer_ Buffer b = BUFFER_NULL;
                if (c->method != HTTP_METHOD_GET)
                        return http_conn_respond_error(c, 405, 3, "Method not allowed"), 0;
                (void) buffer_printf(&b, "{\"status\":\"ok\",\"version\":\"%s\"}", AGENTIX_VERSION);
                (void) http_conn_respond(c, 200, "application/json", &b);
                return 0;
        }

        c->eio = route(s, path);
        if (!c->eio) {
                (void) http_conn_respond_error(c, 404, 3, "Not found");
                return 0;
        }
        eio_server_handle_request(c->eio, c);
        return 0;
}

static int callback(struct lws *wsi, enum lws_callback_reasons reason, void *user, void *in, size_t len) {
        struct lws_context *context = lws_get_context(wsi);
        HttpServer *s = context ? lws_context_user(context) : NULL;
        HttpConn *c = user;

        switch (reason) {
        case LWS_CALLBACK_HTTP_BIND_PROTOCOL:
                if (c && !c->wsi) {
                        c->wsi = wsi;
                        c->server = s;
                }
                return 0;

        case LWS_CALLBACK_HTTP: {
                char path[256];

                if (!c)
                        return -1;
                c->wsi = wsi;
                c->server = s;
                if (len >= sizeof(path))
                        return http_conn_respond_error(c, 414, 3, "URI too long"), 0;
                memcpy(path, in, len);
                path[len] = 0;
                return on_http_request(s, c, path);
        }

        case LWS_CALLBACK_HTTP_BODY:
                if (!c || c->responding)
                        return 0;
                if (c->post_stream) {
                        eio_conn_post_chunk(c, in, len);
                        return 0;
                }
                if (c->body_too_large)
                        return 0;
                if (c->body.len + len > s->config.max_http_body) {
                        c->body_too_large = true;
                        buffer_done(&c->body);
                        return 0;
                }
                if (buffer_append(&c->body, in, len) < 0)
                        return -1;
                return 0;

        case LWS_CALLBACK_HTTP_BODY_COMPLETION:
                if (!c)
                        return 0;
                c->body_pending = false;
                if (c->responding)
                        return 0;
                if (c->eio && c->method == HTTP_METHOD_POST)
                        eio_server_handle_body(c->eio, c);
                else
                        (void) http_conn_respond_error(c, 400, 3, "Bad request");
                return 0;

        case LWS_CALLBACK_HTTP_WRITEABLE:
                if (!c || !c->responding)
                        return 0;
                return conn_write_response(c) < 0 ? -1 : 0;

        case LWS_CALLBACK_CLOSED_HTTP:
                if (c) {
                        eio_conn_http_closed(c);
                        conn_reset_request(c);
                }
                return 0;

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
                return eio_server_ws_filter(c->eio, c) < 0 ? -1 : 0;
        }

        case LWS_CALLBACK_ESTABLISHED:
                if (!c || !c->eio)
                        return -1;
                c->wsi = wsi;
                c->is_ws = true;
                return eio_server_ws_established(c->eio, c) < 0 ? -1 : 0;

        case LWS_CALLBACK_RECEIVE:
                if (!c)
                        return -1;
                return eio_conn_ws_receive(c, in, len) < 0 ? -1 : 0;

        case LWS_CALLBACK_SERVER_WRITEABLE:
                if (!c)
                        return -1;
                return eio_conn_ws_writeable(c) < 0 ? -1 : 0;

        case LWS_CALLBACK_CLOSED:
                if (c)
                        eio_conn_ws_closed(c);
                return 0;

        case LWS_CALLBACK_WSI_CREATE:
                if (s)
                        s->n_connections++;
                return 0;

        case LWS_CALLBACK_WSI_DESTROY:
                if (c) {
                        if (c->is_ws)
                                eio_conn_ws_closed(c);
                        else
                                eio_conn_http_closed(c);
                        conn_free_buffers(c);
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

static void lws_log_emit(int level, const char *line) {
        size_t n = strlen(line);

        while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r'))
                n--;
        if (level & LLL_ERR)
                log_error("lws: %.*s", (int) n, line);
        else if (level & LLL_WARN)
                log_debug("lws: %.*s", (int) n, line);
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

static int on_accept(sd_event_source *source, int fd, uint32_t revents, void *userdata) {
        Listener *l = userdata;
        HttpServer *s = l->server;

        for (int i = 0; i < 64; i++) {
                int cfd = accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
                if (cfd < 0) {
                        if (errno == EAGAIN || errno == EINTR || errno == ECONNABORTED)
                                break;
                        log_warning_errno(errno, "accept() failed: %m");
                        break;
                }
                if (s->shutting_down || s->n_connections >= s->config.max_connections) {
                        safe_close(cfd);
                        continue;
                }
                (void) setsockopt(cfd, IPPROTO_TCP, TCP_NODELAY, &(int) { 1 }, sizeof(int));
                if (!lws_adopt_socket_vhost(s->vhost, cfd)) {
                        log_warning("Failed to hand a connection to libwebsockets.");
                        safe_close(cfd);
                }
        }
        uv_event_run(s->uv);
        return 0;
}

int http_server_listen(HttpServer *s, const char *host, const char *port) {
        struct addrinfo hints = { .ai_flags = AI_PASSIVE | AI_NUMERICSERV, .ai_socktype = SOCK_STREAM };
        struct addrinfo *res = NULL;
        int r, n = 0;

        r = getaddrinfo(host, port, &hints, &res);
        if (r != 0)
                return log_error_errno(EADDRNOTAVAIL, "Failed to resolve %s:%s: %s", host, port, gai_strerror(r));

        for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
                Listener *l;
                int fd;

                if (s->n_listeners >= MAX_LISTENERS)
                        break;
                fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
                if (fd < 0) {
                        r = negative_errno();
                        continue;
                }
                (void) setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &(int) { 1 }, sizeof(int));
                if (ai->ai_family == AF_INET6)
                        (void) setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &(int) { 1 }, sizeof(int));
                if (bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 || listen(fd, SOMAXCONN) < 0) {
                        r = negative_errno();
                        safe_close(fd);
                        continue;
                }

                l = &s->listeners[s->n_listeners];
                l->server = s;
                l->fd = fd;
                r = sd_event_add_io(s->event, &l->source, fd, EPOLLIN, on_accept, l);
                if (r < 0) {
                        safe_close(fd);
                        continue;
                }
                s->n_listeners++;
                n++;

                if (s->port == 0) {
                        struct sockaddr_storage ss;
                        socklen_t sl = sizeof(ss);
                        if (getsockname(fd, (struct sockaddr *) &ss, &sl) == 0)
                                s->port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *) &ss)->sin6_port
                                                                         : ((struct sockaddr_in *) &ss)->sin_port);
                }
        }
        freeaddrinfo(res);

        if (n == 0)
                return log_error_errno(r ?: -EADDRNOTAVAIL, "Failed to listen on %s:%s: %m", host, port);
        return 0;
}

unsigned http_server_port(HttpServer *s) {
        return s->port;
}

int http_server_add_eio(HttpServer *s, EioServer *eio) {
        if (s->n_routes >= MAX_ROUTES)
                return -E2BIG;
        s->routes[s->n_routes++] = eio;
        return 0;
}

void http_server_shutdown(HttpServer *s) {
        s->shutting_down = true;
        for (size_t i = 0; i < s->n_listeners; i++) {
                s->listeners[i].source = sd_event_source_disable_unref(s->listeners[i].source);
                s->listeners[i].fd = safe_close(s->listeners[i].fd);
        }
}

HttpServer *http_server_free(HttpServer *s) {
        if (!s)
                return NULL;
        http_server_shutdown(s);
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
        sd_event_unref(s->event);
        free(s);
        return NULL;
}

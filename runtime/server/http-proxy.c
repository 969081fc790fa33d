/* SPDX-License-Identifier: MIT */
/* The port proxy (http-proxy.h). http-conn.c parses a request head as for any request and,
 * for a /proxy/ path, hands the socket here with the bytes it has read; this file reads the
 * head again as text (it is whole and at most HTTP_MAX_HEAD), checks the token, writes the
 * head the upstream gets, and from then on only moves bytes: each way through a buffer of at
 * most PIPE_MAX, reading a side only while the buffer toward the other has room. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>

#include "buffer.h"
#include "http-proxy.h"
#include "log.h"
#include "macro.h"
#include "proxy-token.h"

#define PROXY_MAX_CONNECTIONS 512
#define PIPE_MAX (256u * 1024u)
#define IDLE_TIMEOUT_USEC (15ULL * 60 * 1000 * 1000) /* no byte either way: a WebSocket may be quiet */
#define LINGER_USEC (5ULL * 1000 * 1000) /* the response is out: wait this long for the client's close */
#define COOKIE_PREFIX "agentix_proxy_"
#define QUERY_TOKEN "agentix_token"

typedef struct ProxyConn ProxyConn;

struct Proxy {
        sd_event *event;
        const char *(*token)(void *userdata);
        void *userdata;
        ProxyConn *conns;
        unsigned n_conns;
};

/* One direction: bytes read from one side, waiting to be written to the other. */
typedef struct Pipe {
        Buffer buf;
        size_t sent;
        bool eof;       /* the side it reads from has no more */
        bool shut;      /* and the side it writes to was told (shutdown SHUT_WR) */
} Pipe;

struct ProxyConn {
        Proxy *proxy;
        int client, upstream;
        sd_event_source *client_io, *upstream_io, *timer;
        bool connected;
        bool tried_ipv6;
        /* The response is whole and sent: what the client still sends is read and dropped
         * until it closes (closing with unread input would reset the connection, and could
         * lose the response's end on its way). */
        bool lingering;
        uint64_t linger_until;
        unsigned port;
        Pipe up, down;  /* client → upstream, upstream → client */
        uint64_t progress_usec;
        ProxyConn *prev, *next;
};

static uint64_t loop_usec(Proxy *p) {
        uint64_t t = 0;

        (void) sd_event_now(p->event, CLOCK_MONOTONIC, &t);
        return t;
}

static void conn_free(ProxyConn *c) {
        if (!c)
                return;
        if (c->prev)
                c->prev->next = c->next;
        else
                c->proxy->conns = c->next;
        if (c->next)
                c->next->prev = c->prev;
        c->proxy->n_conns--;
        sd_event_source_disable_unref(c->client_io);
        sd_event_source_disable_unref(c->upstream_io);
        sd_event_source_disable_unref(c->timer);
        safe_close(c->client);
        safe_close(c->upstream);
        buffer_done(&c->up.buf);
        buffer_done(&c->down.buf);
        free(c);
}

/* ---- answers of the proxy's own ------------------------------------------------------------ */

/* A short response, written at once (it fits the socket's buffer), then the connection ends. */
static void answer(int fd, unsigned status, const char *reason, const char *extra_headers, const char *text) {
        _cleanup_buffer_ Buffer b = BUFFER_NULL;

        if (buffer_printf(&b,
                          "HTTP/1.1 %u %s\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: %zu\r\n"
                          "Cache-Control: no-store\r\nConnection: close\r\n%s\r\n%s",
                          status, reason, strlen(text), extra_headers ?: "", text) >= 0)
                (void) send(fd, buffer_data(&b), b.len, MSG_NOSIGNAL | MSG_DONTWAIT);
        (void) shutdown(fd, SHUT_WR);
}

/* ---- the request head -------------------------------------------------------------------- */

typedef struct Head {
        const char *method;  size_t method_len;
        const char *target;  size_t target_len;
        const char *version; size_t version_len;
        const char *headers; size_t headers_len; /* the header lines, each ending in CRLF */
        size_t size;                             /* the whole head, blank line included */
} Head;

static int parse_head(const uint8_t *data, size_t size, Head *h) {
        const char *s = (const char *) data, *end = memmem(s, size, "\r\n\r\n", 4), *eol, *sp1, *sp2;

        if (!end)
                return -EBADMSG;
        eol = memmem(s, (size_t) (end + 2 - s), "\r\n", 2);
        sp1 = memchr(s, ' ', (size_t) (eol - s));
        sp2 = sp1 ? memchr(sp1 + 1, ' ', (size_t) (eol - sp1 - 1)) : NULL;
        if (!sp1 || !sp2)
                return -EBADMSG;
        *h = (Head) {
                .method = s, .method_len = (size_t) (sp1 - s),
                .target = sp1 + 1, .target_len = (size_t) (sp2 - sp1 - 1),
                .version = sp2 + 1, .version_len = (size_t) (eol - sp2 - 1),
                .headers = eol + 2, .headers_len = (size_t) (end + 2 - (eol + 2)),
                .size = (size_t) (end + 4 - s),
        };
        return 0;
}

static bool name_is(const char *line, size_t n, const char *name) {
        size_t k = strlen(name);
        return n > k && line[k] == ':' && strncasecmp(line, name, k) == 0;
}

/* The value of a header line (after "Name:", spaces trimmed). */
static void header_value(const char *line, size_t n, const char **ret, size_t *ret_len) {
        const char *v = memchr(line, ':', n) + 1, *e = line + n;

        while (v < e && (*v == ' ' || *v == '\t'))
                v++;
        while (e > v && (e[-1] == ' ' || e[-1] == '\t'))
                e--;
        *ret = v;
        *ret_len = (size_t) (e - v);
}

/* Walk the header lines: fn(line without CRLF, its length). */
#define FOREACH_HEADER(h, line, n)                                                                           \
        for (const char *line = (h)->headers, *_e; line < (h)->headers + (h)->headers_len &&                  \
                                                   (_e = memmem(line, (size_t) ((h)->headers + (h)->headers_len - line), \
                                                                "\r\n", 2));                                     \
             line = _e + 2)                                                                                    \
                for (size_t n = (size_t) (_e - line), _once = 1; _once; _once = 0)

/* The value of cookie `name` in a Cookie header value, or NULL. */
static const char *cookie_value(const char *v, size_t n, const char *name, size_t *ret_len) {
        size_t k = strlen(name);

        for (const char *p = v, *e = v + n; p < e;) {
                const char *semi = memchr(p, ';', (size_t) (e - p)) ?: e;
                while (p < semi && *p == ' ')
                        p++;
                if ((size_t) (semi - p) > k && strneq(p, name, k) && p[k] == '=') {
                        *ret_len = (size_t) (semi - p - k - 1);
                        return p + k + 1;
                }
                p = semi + 1;
        }
        return NULL;
}

/* The value of query parameter `name` in a query (after '?'), or NULL (not decoded: a token is
 * hex). */
static const char *query_value(const char *q, size_t n, const char *name, size_t *ret_len) {
        size_t k = strlen(name);

        for (const char *p = q, *e = q + n; p < e;) {
                const char *amp = memchr(p, '&', (size_t) (e - p)) ?: e;
                if ((size_t) (amp - p) > k && strneq(p, name, k) && p[k] == '=') {
                        *ret_len = (size_t) (amp - p - k - 1);
                        return p + k + 1;
                }
                p = amp + 1;
        }
        return NULL;
}

/* The query without parameter `name`, appended to b (with its '?' when anything is left). */
static int append_query_without(Buffer *b, const char *q, size_t n, const char *name) {
        size_t k = strlen(name);
        bool first = true;

        for (const char *p = q, *e = q + n; p < e;) {
                const char *amp = memchr(p, '&', (size_t) (e - p)) ?: e;
                bool drop = (size_t) (amp - p) >= k && strneq(p, name, k) && (p + k == amp || p[k] == '=');
                if (!drop && amp > p) {
                        if (buffer_append(b, first ? "?" : "&", 1) < 0 || buffer_append(b, p, (size_t) (amp - p)) < 0)
                                return -ENOMEM;
                        first = false;
                }
                p = amp + 1;
        }
        return 0;
}

typedef enum Auth {
        AUTH_NONE,
        AUTH_HEADER,    /* Authorization: Bearer */
        AUTH_COOKIE,
        AUTH_QUERY,
} Auth;

static Auth authorize(const Head *h, const char *runtime_token, unsigned port, const char *query, size_t query_len) {
        char cookie[32];
        const char *v;
        size_t n;

        snprintf(cookie, sizeof(cookie), COOKIE_PREFIX "%u", port);
        FOREACH_HEADER(h, line, len) {
                const char *value;
                size_t value_len;

                if (name_is(line, len, "authorization")) {
                        header_value(line, len, &value, &value_len);
                        if (value_len > 7 && strncasecmp(value, "Bearer ", 7) == 0 &&
                            proxy_token_valid(runtime_token, port, value + 7, value_len - 7))
                                return AUTH_HEADER;
                } else if (name_is(line, len, "cookie")) {
                        header_value(line, len, &value, &value_len);
                        v = cookie_value(value, value_len, cookie, &n);
                        if (v && proxy_token_valid(runtime_token, port, v, n))
                                return AUTH_COOKIE;
                }
        }
        v = query ? query_value(query, query_len, QUERY_TOKEN, &n) : NULL;
        if (v && proxy_token_valid(runtime_token, port, v, n))
                return AUTH_QUERY;
        return AUTH_NONE;
}

/* What the upstream gets: the request line with REST as the target (the token parameter
 * gone), the headers without the proxy's own credentials, Connection: close unless it upgrades,
 * X-Forwarded-Prefix; then the bytes that followed the head. */
static int upstream_head(const Head *h, const char *rest, size_t rest_len, const char *query, size_t query_len,
                         unsigned port, Auth auth, const uint8_t *after, size_t after_len, Buffer *out) {
        char cookie[32];
        bool upgrade = false;
        int r;

        snprintf(cookie, sizeof(cookie), COOKIE_PREFIX "%u", port);
        FOREACH_HEADER(h, line, len)
                if (name_is(line, len, "upgrade"))
                        upgrade = true;

        r = buffer_append(out, h->method, h->method_len);
        r = r ?: buffer_append(out, " ", 1);
        r = r ?: buffer_append(out, rest_len > 0 ? rest : "/", rest_len > 0 ? rest_len : 1);
        r = r ?: (query ? append_query_without(out, query, query_len, QUERY_TOKEN) : 0);
        r = r ?: buffer_append(out, " ", 1);
        r = r ?: buffer_append(out, h->version, h->version_len);
        r = r ?: buffer_append(out, "\r\n", 2);
        FOREACH_HEADER(h, line, len) {
                if (r < 0)
                        break;
                if ((auth == AUTH_HEADER && name_is(line, len, "authorization")) ||
                    (!upgrade && (name_is(line, len, "connection") || name_is(line, len, "keep-alive"))) ||
                    name_is(line, len, "proxy-connection") || name_is(line, len, "x-forwarded-prefix"))
                        continue;
                if (name_is(line, len, "cookie")) {
                        /* Every cookie but the proxy's own. */
                        const char *value, *e;
                        size_t value_len;
                        bool any = false;

                        header_value(line, len, &value, &value_len);
                        e = value + value_len;
                        for (const char *p = value; p < e && r >= 0;) {
                                const char *semi = memchr(p, ';', (size_t) (e - p)) ?: e;
                                while (p < semi && *p == ' ')
                                        p++;
                                if (p < semi && !(strneq(p, cookie, strlen(cookie)) && p[strlen(cookie)] == '=')) {
                                        r = buffer_append(out, any ? "; " : "Cookie: ", any ? 2 : 8);
                                        r = r ?: buffer_append(out, p, (size_t) (semi - p));
                                        any = true;
                                }
                                p = semi + 1;
                        }
                        if (any && r >= 0)
                                r = buffer_append(out, "\r\n", 2);
                        continue;
                }
                r = buffer_append(out, line, len);
                r = r ?: buffer_append(out, "\r\n", 2);
        }
        if (r >= 0 && !upgrade)
                r = buffer_append(out, "Connection: close\r\n", 19);
        r = r ?: buffer_printf(out, "X-Forwarded-Prefix: /proxy/%u\r\n\r\n", port);
        r = r ?: buffer_append(out, after, after_len);
        return r;
}

/* ---- moving bytes ------------------------------------------------------------------------ */

static int on_client(sd_event_source *s, int fd, uint32_t revents, void *userdata);
static int on_upstream(sd_event_source *s, int fd, uint32_t revents, void *userdata);

static size_t pending(const Pipe *p) {
        return p->buf.len - p->sent;
}

/* Write what waits in p to fd. -errno when the peer is gone. */
static int pipe_flush(Pipe *p, int fd) {
        while (pending(p) > 0) {
                ssize_t n = send(fd, (const uint8_t *) buffer_data(&p->buf) + p->sent, pending(p),
                                 MSG_NOSIGNAL | MSG_DONTWAIT);
                if (n < 0)
                        return errno == EAGAIN || errno == EINTR ? 0 : -errno;
                p->sent += (size_t) n;
        }
        buffer_clear(&p->buf);
        p->sent = 0;
        if (p->eof && !p->shut) {
                (void) shutdown(fd, SHUT_WR);
                p->shut = true;
        }
        return 0;
}

/* Read from fd into p while it has room. 1 when something came. */
static int pipe_fill(Pipe *p, int fd) {
        bool got = false;

        while (!p->eof && pending(p) < PIPE_MAX) {
                uint8_t chunk[64 * 1024];
                ssize_t n = recv(fd, chunk, MIN(sizeof(chunk), PIPE_MAX - pending(p)), MSG_DONTWAIT);
                if (n < 0) {
                        if (errno == EAGAIN || errno == EINTR)
                                break;
                        return -errno;
                }
                if (n == 0) {
                        p->eof = true;
                        break;
                }
                if (buffer_append(&p->buf, chunk, (size_t) n) < 0)
                        return -ENOMEM;
                got = true;
        }
        return got;
}

/* Ask for the events each side needs now; end the connection once both ways are done. */
static void conn_update(ProxyConn *c) {
        uint32_t client_ev = 0, upstream_ev = 0;

        if ((c->up.shut && c->down.shut && !c->lingering) || (c->lingering && c->up.eof)) {
                conn_free(c);
                return;
        }
        if (c->lingering) {
                (void) sd_event_source_set_io_events(c->client_io, EPOLLIN);
                (void) sd_event_source_set_enabled(c->client_io, SD_EVENT_ON);
                (void) sd_event_source_set_enabled(c->upstream_io, SD_EVENT_OFF);
                return;
        }
        if (!c->up.eof && pending(&c->up) < PIPE_MAX)
                client_ev |= EPOLLIN;
        if (pending(&c->down) > 0)
                client_ev |= EPOLLOUT;
        if (!c->connected)
                upstream_ev = EPOLLOUT;
        else {
                if (!c->down.eof && pending(&c->down) < PIPE_MAX)
                        upstream_ev |= EPOLLIN;
                if (pending(&c->up) > 0)
                        upstream_ev |= EPOLLOUT;
        }
        (void) sd_event_source_set_io_events(c->client_io, client_ev);
        (void) sd_event_source_set_enabled(c->client_io, client_ev ? SD_EVENT_ON : SD_EVENT_OFF);
        (void) sd_event_source_set_io_events(c->upstream_io, upstream_ev);
        (void) sd_event_source_set_enabled(c->upstream_io, upstream_ev ? SD_EVENT_ON : SD_EVENT_OFF);
}

/* Move what can move, both ways. */
static void conn_pump(ProxyConn *c) {
        int r;

        if (c->lingering) {
                r = pipe_fill(&c->up, c->client);
                buffer_clear(&c->up.buf);
                c->up.sent = 0;
                if (r < 0)
                        c->up.eof = true;
                conn_update(c);
                return;
        }
        r = pipe_fill(&c->up, c->client);
        if (r > 0)
                c->progress_usec = loop_usec(c->proxy);
        if (r >= 0 && c->connected)
                r = pipe_flush(&c->up, c->upstream);
        if (r >= 0 && c->connected)
                r = pipe_fill(&c->down, c->upstream);
        if (r > 0)
                c->progress_usec = loop_usec(c->proxy);
        if (r >= 0)
                r = pipe_flush(&c->down, c->client);
        /* The upstream answered and closed: the response is whole and out; nothing the client
         * still sends matters (one request per connection). */
        if (r >= 0 && c->down.shut && !c->up.eof) {
                c->lingering = true;
                c->upstream_io = sd_event_source_disable_unref(c->upstream_io);
                c->upstream = safe_close(c->upstream);
                c->linger_until = loop_usec(c->proxy) + LINGER_USEC;
                (void) sd_event_source_set_time(c->timer, c->linger_until);
                (void) sd_event_source_set_enabled(c->timer, SD_EVENT_ONESHOT);
        }
        if (r < 0) {
                conn_free(c); /* a side went away: so does the other */
                return;
        }
        conn_update(c);
}

static int start_connect(ProxyConn *c, bool ipv6);

static int on_upstream(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        ProxyConn *c = userdata;

        if (!c->connected) {
                int error = 0;
                socklen_t len = sizeof(error);

                (void) getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &len);
                if (error == ECONNREFUSED && !c->tried_ipv6 && start_connect(c, true) >= 0)
                        return 0; /* perhaps it listens on ::1 only */
                if (error != 0) {
                        char text[160];
                        snprintf(text, sizeof(text), "Nothing answers on port %u in the sandbox (%s).\n", c->port,
                                 strerror(error));
                        answer(c->client, 502, "Bad Gateway", NULL, text);
                        conn_free(c);
                        return 0;
                }
                c->connected = true;
                (void) setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &(int) { 1 }, sizeof(int));
        }
        conn_pump(c);
        return 0;
}

static int on_client(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        conn_pump(userdata);
        return 0;
}

static int on_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        ProxyConn *c = userdata;
        uint64_t deadline = c->lingering ? c->linger_until : c->progress_usec + IDLE_TIMEOUT_USEC;

        if (usec >= deadline) {
                conn_free(c);
                return 0;
        }
        (void) sd_event_source_set_time(s, deadline);
        (void) sd_event_source_set_enabled(s, SD_EVENT_ONESHOT);
        return 0;
}

static int start_connect(ProxyConn *c, bool ipv6) {
        union {
                struct sockaddr sa;
                struct sockaddr_in in;
                struct sockaddr_in6 in6;
        } a = {};
        socklen_t len;
        int fd, r;

        c->tried_ipv6 = ipv6;
        c->upstream_io = sd_event_source_disable_unref(c->upstream_io);
        c->upstream = safe_close(c->upstream);
        if (ipv6) {
                a.in6 = (struct sockaddr_in6) { .sin6_family = AF_INET6, .sin6_port = htons(c->port),
                                                .sin6_addr = IN6ADDR_LOOPBACK_INIT };
                len = sizeof(a.in6);
        } else {
                a.in = (struct sockaddr_in) { .sin_family = AF_INET, .sin_port = htons(c->port),
                                              .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
                len = sizeof(a.in);
        }
        fd = socket(a.sa.sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return -errno;
        c->upstream = fd;
        if (connect(fd, &a.sa, len) < 0 && errno != EINPROGRESS)
                return -errno;
        r = sd_event_add_io(c->proxy->event, &c->upstream_io, fd, EPOLLOUT, on_upstream, c);
        if (r < 0)
                return r;
        conn_update(c);
        return 0;
}

/* ---- taking a connection ----------------------------------------------------------------- */

void proxy_take(Proxy *p, int fd, const uint8_t *data, size_t size) {
        _cleanup_buffer_ Buffer head = BUFFER_NULL;
        const char *runtime_token = p->token ? p->token(p->userdata) : NULL, *rest, *query, *target_end;
        size_t rest_len, query_len = 0;
        ProxyConn *c;
        unsigned port = 0;
        Auth auth;
        Head h;
        int r;

        if (parse_head(data, size, &h) < 0) {
                answer(fd, 400, "Bad Request", NULL, "The request head is not one the proxy can read.\n");
                safe_close(fd);
                return;
        }
        /* /proxy/PORT/REST?QUERY */
        target_end = h.target + h.target_len;
        rest = h.target + STRLEN("/proxy/");
        while (rest < target_end && *rest >= '0' && *rest <= '9' && port <= 65535)
                port = port * 10 + (unsigned) (*rest++ - '0');
        query = memchr(rest, '?', (size_t) (target_end - rest));
        rest_len = (size_t) ((query ?: target_end) - rest);
        if (query) {
                query++;
                query_len = (size_t) (target_end - query);
        }
        if (port == 0 || port > 65535 || (rest_len > 0 && rest[0] != '/')) {
                answer(fd, 404, "Not Found", NULL, "The proxy's paths are /proxy/PORT/…, PORT from 1 to 65535.\n");
                safe_close(fd);
                return;
        }
        if (strempty(runtime_token)) {
                answer(fd, 403, "Forbidden", NULL, "This runtime has no token: its port proxy is off.\n");
                safe_close(fd);
                return;
        }
        auth = authorize(&h, runtime_token, port, query, query_len);
        if (auth == AUTH_NONE) {
                answer(fd, 401, "Unauthorized", "WWW-Authenticate: Bearer realm=\"agentix\"\r\n",
                       "This port needs its token: the URL and token agentd's GetPortUrl() gives.\n");
                safe_close(fd);
                return;
        }
        if (auth == AUTH_QUERY && ((h.method_len == 3 && strneq(h.method, "GET", 3)) ||
                                   (h.method_len == 4 && strneq(h.method, "HEAD", 4)))) {
                /* Once: the token becomes a cookie for this port's paths, and leaves the address. */
                _cleanup_buffer_ Buffer extra = BUFFER_NULL;
                size_t n;
                const char *v = query_value(query, query_len, QUERY_TOKEN, &n);

                r = buffer_printf(&extra, "Location: /proxy/%u%.*s", port, (int) rest_len, rest_len ? rest : "/");
                r = r ?: append_query_without(&extra, query, query_len, QUERY_TOKEN);
                r = r ?: buffer_printf(&extra, "\r\nSet-Cookie: " COOKIE_PREFIX "%u=%.*s; Path=/proxy/%u/; HttpOnly; "
                                               "SameSite=Lax\r\n", port, (int) n, v, port);
                if (r >= 0 && buffer_append(&extra, "", 1) >= 0)
                        answer(fd, 302, "Found", (const char *) buffer_data(&extra), "Redirecting to the same page, now with a cookie.\n");
                safe_close(fd);
                return;
        }
        if (p->n_conns >= PROXY_MAX_CONNECTIONS) {
                answer(fd, 503, "Service Unavailable", NULL, "The proxy has as many connections as it takes.\n");
                safe_close(fd);
                return;
        }

        c = calloc(1, sizeof(*c));
        if (!c) {
                safe_close(fd);
                return;
        }
        *c = (ProxyConn) { .proxy = p, .client = fd, .upstream = -EBADF, .port = port,
                           .progress_usec = loop_usec(p) };
        c->next = p->conns;
        if (p->conns)
                p->conns->prev = c;
        p->conns = c;
        p->n_conns++;

        r = upstream_head(&h, rest, rest_len, query, query_len, port, auth, data + h.size, size - h.size, &c->up.buf);
        if (r >= 0)
                r = sd_event_add_io(p->event, &c->client_io, fd, 0, on_client, c);
        if (r >= 0)
                r = sd_event_add_time(p->event, &c->timer, CLOCK_MONOTONIC, c->progress_usec + IDLE_TIMEOUT_USEC,
                                      1000 * 1000, on_timer, c);
        if (r >= 0)
                r = start_connect(c, false);
        if (r < 0) {
                log_warning_errno(r, "Proxy to port %u: %m", port);
                answer(fd, 502, "Bad Gateway", NULL, "The proxy could not reach the port.\n");
                conn_free(c);
        }
}

int proxy_new(sd_event *event, const char *(*token)(void *userdata), void *userdata, Proxy **ret) {
        Proxy *p = calloc(1, sizeof(*p));

        if (!p)
                return -ENOMEM;
        *p = (Proxy) { .event = sd_event_ref(event), .token = token, .userdata = userdata };
        *ret = p;
        return 0;
}

Proxy *proxy_free(Proxy *p) {
        if (!p)
                return NULL;
        while (p->conns)
                conn_free(p->conns);
        sd_event_unref(p->event);
        return mfree(p);
}

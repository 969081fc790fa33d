/* SPDX-License-Identifier: MIT */
/* The port proxy (http-proxy.h). http-conn.c parses a request head as for any request and,
 * for a /proxy/ path, hands the socket here with the bytes it has read; proxy-request.c
 * decides (the token, the head the upstream gets, or the proxy's own answer), and this file
 * moves the bytes: each way through a buffer of at most PIPE_MAX, reading a side only while
 * the buffer toward the other has room. */
#include <arpa/inet.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>

#include "buffer.h"
#include "http-proxy.h"
#include "log.h"
#include "macro.h"
#include "proxy-request.h"
#include "socket-drain.h"

#define PIPE_MAX (256u * 1024u)
#define IDLE_TIMEOUT_USEC (15ULL * 60 * 1000 * 1000) /* no byte either way: a WebSocket may be quiet */
/* No byte either way and still no response head: a request that never completes, or an upstream
 * that never answers, holds its place less long. */
#define PROXY_HEADLESS_TIMEOUT_USEC (3ULL * 60 * 1000 * 1000)
/* Idle this long, a connection gives its place up to a new one when there is no other. */
#define PROXY_EVICT_IDLE_USEC (30ULL * 1000 * 1000)
#define LINGER_USEC (5ULL * 1000 * 1000) /* the response is out: wait this long for the client's close */
#define NO_OWNER ((uid_t) -1)

typedef struct ProxyConn ProxyConn;

struct Proxy {
        sd_event *event;
        const char *(*token)(void *userdata);
        void *userdata;
        ProxyConn *conns;
        unsigned n_conns;
        SocketDrain *drain; /* close-by-reset mode: clients' sockets we are done with */
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
        bool response_head_seen; /* the upstream's response head is rewritten (proxy-request.c) */
        bool tried_ipv6;
        /* The response is whole and sent: what the client still sends is read and dropped
         * until it closes (closing with unread input would reset the connection, and could
         * lose the response's end on its way). */
        bool lingering;
        uint64_t linger_until;
        /* The upstream stopped reading (a write to it failed): what the client still sends is
         * dropped, and the upstream's answer, perhaps on its way, is still passed on. */
        bool upstream_deaf;
        unsigned port;
        struct sockaddr_storage addr; /* proxy_forward(): where to (else 127.0.0.1:port, then ::1) */
        socklen_t addr_len;
        Pipe up, down;  /* client → upstream, upstream → client */
        uint64_t progress_usec;
        char sandbox[64];       /* whose share it takes ("": none) */
        uid_t owner;            /* NO_OWNER: none */
        bool reset;             /* end both sides with a reset now (proxy_reset_connections()) */
        ProxyConn *prev, *next;
};

static uint64_t loop_usec(Proxy *p) {
        uint64_t t = 0;

        (void) sd_event_now(p->event, CLOCK_MONOTONIC, &t);
        return t;
}

/* A client's socket we are done with (its event source gone): in close-by-reset mode through
 * the drain, else closed. */
static void close_client(Proxy *p, int fd) {
        if (p->drain)
                socket_drain_add(p->drain, fd);
        else
                safe_close(fd);
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
        /* Out of epoll before the sockets are closed (http_conn_free() says why). */
        sd_event_source_disable_unref(c->client_io);
        sd_event_source_disable_unref(c->upstream_io);
        sd_event_source_disable_unref(c->timer);
        if (c->reset) {
                if (c->client >= 0)
                        (void) socket_reset_on_close(c->client);
                if (c->upstream >= 0)
                        (void) socket_reset_on_close(c->upstream);
                safe_close(c->client);
        } else if (c->client >= 0)
                close_client(c->proxy, c->client);
        safe_close(c->upstream);
        buffer_done(&c->up.buf);
        buffer_done(&c->down.buf);
        free(c);
}

/* ---- answers of the proxy's own ------------------------------------------------------------ */

/* A short response, written at once (it fits the socket's buffer), then the connection ends:
 * fin says that we say so (else the caller resets it once it is out, close_client()). */
static void answer_typed(int fd, bool fin, unsigned status, const char *reason, const char *content_type,
                         const char *extra_headers, const char *text) {
        _cleanup_buffer_ Buffer b = BUFFER_NULL;

        if (buffer_printf(&b,
                          "HTTP/1.1 %u %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
                          "Cache-Control: no-store\r\nConnection: close\r\n%s\r\n%s",
                          status, reason, content_type, strlen(text), extra_headers ?: "", text) >= 0)
                (void) send(fd, buffer_data(&b), b.len, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (fin)
                (void) shutdown(fd, SHUT_WR);
}

static void answer(Proxy *p, int fd, unsigned status, const char *reason, const char *extra_headers, const char *text) {
        answer_typed(fd, !p->drain, status, reason, "text/plain; charset=utf-8", extra_headers, text);
}

void proxy_answer(int fd, unsigned status, const char *reason, const char *content_type, const char *body) {
        answer_typed(fd, true, status, reason, content_type, NULL, body);
        safe_close(fd);
}

/* ---- moving bytes ------------------------------------------------------------------------ */

static int on_client(sd_event_source *s, int fd, uint32_t revents, void *userdata);
static int on_upstream(sd_event_source *s, int fd, uint32_t revents, void *userdata);

static size_t pending(const Pipe *p) {
        return p->buf.len - p->sent;
}

/* Write what waits in p to fd. -errno when the peer is gone. fin: pass the end on (shutdown),
 * else only note that it is out. */
static int pipe_flush(Pipe *p, int fd, bool fin) {
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
                if (fin)
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
                        if (errno != ECONNRESET)
                                return -errno;
                        /* A peer that ends with a reset (a runtime on gVisor's stack does, once
                         * everything it sent was acknowledged: agentix-server(8)) has ended: what
                         * came before it is read, and passed on as if it had closed. */
                        n = 0;
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
        if (c->response_head_seen && pending(&c->down) > 0)
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
        if (r >= 0 && c->connected && !c->upstream_deaf)
                r = pipe_flush(&c->up, c->upstream, true);
        if (r == -EPIPE || r == -ECONNRESET) {
                /* It answered (or went) before it read the whole request: a runtime on gVisor's
                 * stack resets once its answer is out. */
                c->upstream_deaf = true;
                r = 0;
        }
        if (c->upstream_deaf) {
                buffer_clear(&c->up.buf);
                c->up.sent = 0;
        }
        if (r >= 0 && c->connected)
                r = pipe_fill(&c->down, c->upstream);
        if (r > 0)
                c->progress_usec = loop_usec(c->proxy);
        if (r >= 0 && !c->response_head_seen) {
                /* Nothing goes to the client before its head: whole, or all there will be. */
                int k = proxy_response_rewrite(&c->down.buf);
                if (k == -ENOMEM)
                        r = k;
                else if (k != 0 || c->down.eof || pending(&c->down) >= PIPE_MAX)
                        c->response_head_seen = true;
        }
        if (r >= 0 && c->response_head_seen)
                r = pipe_flush(&c->down, c->client, !c->proxy->drain);
        /* Close-by-reset: the upstream's end is out; the drain resets the client's socket once
         * the client has acknowledged it all (no FIN of ours, no lingering). */
        if (r >= 0 && c->down.shut && c->proxy->drain) {
                conn_free(c);
                return;
        }
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
                if (error == ECONNREFUSED && c->addr_len == 0 && !c->tried_ipv6 && start_connect(c, true) >= 0)
                        return 0; /* perhaps it listens on ::1 only */
                if (error != 0) {
                        char text[160];
                        if (c->addr_len > 0)
                                snprintf(text, sizeof(text), "The sandbox's runtime does not answer (%s).\n",
                                         strerror(error));
                        else
                                snprintf(text, sizeof(text), "Nothing answers on port %u in the sandbox (%s).\n", c->port,
                                         strerror(error));
                        answer(c->proxy, c->client, 502, "Bad Gateway", NULL, text);
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

static uint64_t idle_deadline(const ProxyConn *c) {
        if (c->lingering)
                return c->linger_until;
        return c->progress_usec + (c->response_head_seen ? IDLE_TIMEOUT_USEC : PROXY_HEADLESS_TIMEOUT_USEC);
}

static int on_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        ProxyConn *c = userdata;
        uint64_t deadline = idle_deadline(c);

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
        if (c->addr_len > 0) {
                memcpy(&a, &c->addr, MIN((size_t) c->addr_len, sizeof(a)));
                len = MIN(c->addr_len, (socklen_t) sizeof(a));
        } else if (ipv6) {
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

static void conn_start(Proxy *p, int fd, unsigned port, const struct sockaddr *addr, socklen_t addr_len,
                       int upstream_fd, Buffer *upstream, const char *sandbox, uid_t owner);

void proxy_take(Proxy *p, int fd, const uint8_t *data, size_t size) {
        _cleanup_(proxy_request_done) ProxyRequest req = {};
        int r;

        r = proxy_request_read(data, size, p->token ? p->token(p->userdata) : NULL, &req);
        if (r < 0 || !req.forward) {
                if (r < 0)
                        answer(p, fd, 500, "Internal Server Error", NULL, "The proxy ran out of memory.\n");
                else
                        answer(p, fd, req.status, req.reason, req.headers, req.text);
                close_client(p, fd);
                return;
        }
        conn_start(p, fd, req.port, NULL, 0, -EBADF, &req.upstream, NULL, NO_OWNER);
}

/* Is c in the share the new connection would take: all (sandbox NULL, owner NO_OWNER), one
 * sandbox's, or one owner's? */
static bool in_share(const ProxyConn *c, const char *sandbox, uid_t owner) {
        if (sandbox)
                return streq(c->sandbox, sandbox);
        if (owner != NO_OWNER)
                return c->owner == owner;
        return true;
}

/* Room in a share that is full: its connection idle longest goes, if it has been idle
 * PROXY_EVICT_IDLE_USEC. Else -EBUSY. */
static int make_room(Proxy *p, const char *sandbox, uid_t owner) {
        uint64_t now = loop_usec(p);
        ProxyConn *idlest = NULL;

        for (ProxyConn *c = p->conns; c; c = c->next)
                if (in_share(c, sandbox, owner) && (!idlest || c->progress_usec < idlest->progress_usec))
                        idlest = c;
        if (!idlest || now < idlest->progress_usec + PROXY_EVICT_IDLE_USEC)
                return -EBUSY;
        log_debug("Proxy: a connection idle for %" PRIu64 " s gives its place up.",
                  (now - idlest->progress_usec) / 1000000);
        conn_free(idlest);
        return 0;
}

/* A place for a connection of sandbox's and owner's (either may be none), if need be by taking
 * an idle one's. Else why not. */
static const char *place(Proxy *p, const char *sandbox, uid_t owner) {
        unsigned in_sandbox = 0, of_owner = 0;

        for (ProxyConn *c = p->conns; c; c = c->next) {
                if (sandbox && streq(c->sandbox, sandbox))
                        in_sandbox++;
                if (owner != NO_OWNER && c->owner == owner)
                        of_owner++;
        }
        if (sandbox && in_sandbox >= PROXY_PER_SANDBOX_MAX && make_room(p, sandbox, NO_OWNER) < 0)
                return "The proxy has as many connections to this sandbox as it takes.\n";
        if (owner != NO_OWNER && of_owner >= PROXY_PER_OWNER_MAX && make_room(p, NULL, owner) < 0)
                return "The proxy has as many connections to this user's sandboxes as it takes.\n";
        if (p->n_conns >= PROXY_MAX_CONNECTIONS && make_room(p, NULL, NO_OWNER) < 0)
                return "The proxy has as many connections as it takes.\n";
        return NULL;
}

/* A connection to pass bytes for: client fd, the upstream at addr (NULL: 127.0.0.1:port, then
 * ::1) or upstream_fd (connected already, taken), first sending `upstream` to it (taken). */
static void conn_start(Proxy *p, int fd, unsigned port, const struct sockaddr *addr, socklen_t addr_len,
                       int upstream_fd, Buffer *upstream, const char *sandbox, uid_t owner) {
        const char *full = NULL;
        ProxyConn *c;
        int r;

        if (sandbox && strlen(sandbox) >= sizeof(c->sandbox))
                sandbox = NULL; /* (no id is that long: agentd's are 16 characters) */
        if (addr_len > sizeof(struct sockaddr_storage) || (full = place(p, sandbox, owner))) {
                answer(p, fd, 503, "Service Unavailable", NULL, full ?: "The proxy cannot reach that address.\n");
                close_client(p, fd);
                safe_close(upstream_fd);
                buffer_done(upstream);
                return;
        }
        c = calloc(1, sizeof(*c));
        if (!c) {
                close_client(p, fd);
                safe_close(upstream_fd);
                buffer_done(upstream);
                return;
        }
        *c = (ProxyConn) { .proxy = p, .client = fd, .upstream = -EBADF, .port = port, .addr_len = addr ? addr_len : 0,
                           .progress_usec = loop_usec(p), .owner = owner };
        if (sandbox)
                strcpy(c->sandbox, sandbox);
        if (addr)
                memcpy(&c->addr, addr, addr_len);
        c->up.buf = *upstream;
        *upstream = BUFFER_NULL;
        c->next = p->conns;
        if (p->conns)
                p->conns->prev = c;
        p->conns = c;
        p->n_conns++;

        r = sd_event_add_io(p->event, &c->client_io, fd, 0, on_client, c);
        if (r >= 0)
                r = sd_event_add_time(p->event, &c->timer, CLOCK_MONOTONIC, idle_deadline(c), 1000 * 1000, on_timer, c);
        if (r >= 0 && upstream_fd >= 0) {
                c->upstream = upstream_fd;
                c->connected = true;
                r = sd_event_add_io(p->event, &c->upstream_io, upstream_fd, EPOLLOUT, on_upstream, c);
                if (r >= 0)
                        conn_update(c);
        } else if (r >= 0)
                r = start_connect(c, false);
        else
                safe_close(upstream_fd);
        if (r < 0) {
                log_warning_errno(r, "Proxy to port %u: %m", c->port);
                answer(p, fd, 502, "Bad Gateway", NULL, "The proxy could not reach the port.\n");
                conn_free(c);
        }
}

void proxy_forward(Proxy *p, int fd, const struct sockaddr *addr, unsigned addr_len, Buffer *upstream,
                   const char *sandbox, uid_t owner) {
        conn_start(p, fd, 0, addr, addr_len, -EBADF, upstream, sandbox, owner);
}

void proxy_forward_connected(Proxy *p, int fd, int upstream_fd, Buffer *upstream, const char *sandbox, uid_t owner) {
        conn_start(p, fd, 0, NULL, 0, upstream_fd, upstream, sandbox, owner);
}

int proxy_new(sd_event *event, const char *(*token)(void *userdata), void *userdata, Proxy **ret) {
        Proxy *p = calloc(1, sizeof(*p));

        if (!p)
                return -ENOMEM;
        *p = (Proxy) { .event = sd_event_ref(event), .token = token, .userdata = userdata };
        *ret = p;
        return 0;
}

int proxy_set_close_by_reset(Proxy *p) {
        if (p->drain)
                return 0;
        return socket_drain_new(p->event, &p->drain);
}

void proxy_reset_connections(Proxy *p) {
        while (p->conns) {
                p->conns->reset = true;
                conn_free(p->conns);
        }
        socket_drain_reset_all(p->drain);
}

Proxy *proxy_free(Proxy *p) {
        if (!p)
                return NULL;
        while (p->conns)
                conn_free(p->conns);
        /* After the connections: they hand their clients' sockets to it as they go. */
        p->drain = socket_drain_free(p->drain);
        sd_event_unref(p->event);
        return mfree(p);
}

bool proxy_takeover_wants(HttpConn *c, const char *path, void *proxy) {
        return proxy_path(path);
}

void proxy_takeover_take(int fd, const uint8_t *data, size_t size, void *proxy) {
        proxy_take(proxy, fd, data, size);
}

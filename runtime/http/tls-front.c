/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include "log.h"
#include "macro.h"
#include "socket-drain.h"
#include "tls-front.h"
#include "tls.h"

#define PUMP_BUFFER (32u * 1024u)
#define HANDSHAKE_TIMEOUT_USEC (10u * 1000u * 1000u)

typedef struct Pipe {
        size_t start, end;
        uint8_t data[PUMP_BUFFER];
} Pipe;

struct TlsFront {
        TlsFronts *set;
        TlsFront *prev, *next;
        sd_event *event;
        SSL *ssl;
        int net_fd;   /* the TLS socket */
        int inner_fd; /* our end of the pair; the server has the other */
        int served_fd; /* that other end (the server's to close) */
        sd_event_source *net_io, *inner_io, *timer;
        tls_front_ready_t ready;
        tls_front_failed_t failed; /* client side */
        void *userdata;
        bool connecting;     /* client side: the TCP connection is being made */
        bool established;
        bool net_eof;        /* the peer ended its stream (close_notify or FIN) */
        bool inner_eof;      /* the server ended its stream */
        bool inner_shut;     /* we passed net_eof on (SHUT_WR) */
        bool net_readable;   /* epoll said so, and no read since */
        bool read_wants_out; /* the last TLS read waits for the socket to take data */
        bool inner_readable;
        bool reset;          /* end with a reset now, not through the set's drain */
        Pipe to_inner, to_net;
};

static size_t pipe_len(const Pipe *p) {
        return p->end - p->start;
}

static size_t pipe_space(const Pipe *p) {
        return PUMP_BUFFER - p->end;
}

static void pipe_consumed(Pipe *p, size_t n) {
        p->start += n;
        if (p->start == p->end)
                p->start = p->end = 0;
}

static void front_free(TlsFront *f) {
        if (!f)
                return;
        if (f->failed && !f->established) {
                tls_front_failed_t failed = TAKE_PTR(f->failed);
                failed(NULL, f->userdata);
        }
        if (f->prev)
                f->prev->next = f->next;
        else if (f->set->head == f)
                f->set->head = f->next;
        if (f->next)
                f->next->prev = f->prev;
        if (f->set->n > 0)
                f->set->n--;
        /* Out of epoll before the sockets are closed (http_conn_free() says why). */
        f->net_io = sd_event_source_disable_unref(f->net_io);
        f->inner_io = sd_event_source_disable_unref(f->inner_io);
        f->timer = sd_event_source_disable_unref(f->timer);
        SSL_free(f->ssl); /* (its BIO does not close the socket) */
        if (f->set->drain && !f->reset && f->net_fd >= 0)
                socket_drain_add(f->set->drain, TAKE_FD(f->net_fd));
        f->net_fd = safe_close(f->net_fd);
        f->inner_fd = safe_close(f->inner_fd);
        sd_event_unref(f->event);
        /* The buffers held plain text of the connection. */
        explicit_bzero(&f->to_inner, sizeof(f->to_inner));
        explicit_bzero(&f->to_net, sizeof(f->to_net));
        free(f);
}

static void set_events(sd_event_source *s, uint32_t events) {
        if (!s)
                return;
        (void) sd_event_source_set_io_events(s, events);
        (void) sd_event_source_set_enabled(s, events ? SD_EVENT_ON : SD_EVENT_OFF);
}

/* Move what can move both ways; 0, or < 0 when the connection is over (f is to be freed).
 * A side is read only when epoll said it is readable (or OpenSSL holds decrypted data): no
 * recv() that can only say EAGAIN, which is a fifth of an echo's cost here (bench/tls). */
static int pump(TlsFront *f) {
        uint32_t want_net, want_inner, ev;
        bool progress;
        ssize_t n;

        do {
                progress = false;
                want_net = want_inner = 0;

                /* peer -> server */
                if (!f->net_eof && pipe_space(&f->to_inner) > 0) {
                        if (!f->net_readable && !SSL_has_pending(f->ssl))
                                want_net |= EPOLLIN;
                        else {
                                n = tls_read(f->ssl, f->to_inner.data + f->to_inner.end, pipe_space(&f->to_inner), &ev);
                                if (n > 0) {
                                        f->to_inner.end += (size_t) n;
                                        /* Level-triggered epoll says if the socket has more. */
                                        f->net_readable = false;
                                        progress = true;
                                } else if (n == -EAGAIN) {
                                        f->net_readable = false;
                                        f->read_wants_out = ev == EPOLLOUT;
                                        want_net |= ev;
                                } else if (n == -EPIPE) {
                                        f->net_eof = true;
                                        progress = true;
                                } else
                                        return (int) n;
                        }
                }
                if (pipe_len(&f->to_inner) > 0) {
                        n = send(f->inner_fd, f->to_inner.data + f->to_inner.start, pipe_len(&f->to_inner),
                                 MSG_DONTWAIT | MSG_NOSIGNAL);
                        if (n > 0) {
                                pipe_consumed(&f->to_inner, (size_t) n);
                                progress = true;
                        } else if (n < 0 && (errno == EAGAIN || errno == EINTR))
                                want_inner |= EPOLLOUT;
                        else
                                return -EPIPE; /* the server is gone */
                }
                if (f->net_eof && pipe_len(&f->to_inner) == 0 && !f->inner_shut) {
                        (void) shutdown(f->inner_fd, SHUT_WR);
                        f->inner_shut = true;
                }

                /* server -> peer */
                if (!f->inner_eof && pipe_space(&f->to_net) > 0) {
                        if (!f->inner_readable)
                                want_inner |= EPOLLIN;
                        else {
                                size_t space = pipe_space(&f->to_net);

                                n = recv(f->inner_fd, f->to_net.data + f->to_net.end, space, MSG_DONTWAIT);
                                if (n > 0) {
                                        f->to_net.end += (size_t) n;
                                        /* A short read emptied the pair. */
                                        f->inner_readable = (size_t) n == space;
                                        progress = true;
                                } else if (n == 0) {
                                        f->inner_eof = true;
                                        progress = true;
                                } else if (errno == EAGAIN || errno == EINTR) {
                                        f->inner_readable = false;
                                        want_inner |= EPOLLIN;
                                } else
                                        f->inner_eof = true;
                        }
                }
                if (pipe_len(&f->to_net) > 0) {
                        n = tls_write(f->ssl, f->to_net.data + f->to_net.start, pipe_len(&f->to_net), &ev);
                        if (n > 0) {
                                pipe_consumed(&f->to_net, (size_t) n);
                                progress = true;
                        } else if (n == -EAGAIN)
                                want_net |= ev;
                        else
                                return (int) n; /* the peer is gone */
                }
                if (f->inner_eof && pipe_len(&f->to_net) == 0) {
                        /* The server is done with the connection: say so, and close. */
                        (void) SSL_shutdown(f->ssl);
                        return -ECONNRESET;
                }
        } while (progress);

        set_events(f->net_io, want_net);
        set_events(f->inner_io, want_inner);
        return 0;
}

static int on_inner(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        TlsFront *f = userdata;

        if (revents & (EPOLLIN | EPOLLHUP | EPOLLERR))
                f->inner_readable = true;
        if (pump(f) < 0)
                front_free(f);
        return 0;
}

static int establish(TlsFront *f) {
        int pair[2], r;

        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, pair) < 0)
                return negative_errno();
        f->inner_fd = pair[0];
        r = sd_event_add_io(f->event, &f->inner_io, f->inner_fd, EPOLLIN, on_inner, f);
        if (r < 0) {
                safe_close(pair[1]);
                return r;
        }
        f->established = true;
        f->served_fd = pair[1];
        f->net_readable = true; /* the handshake may have read application data along */
        f->timer = sd_event_source_disable_unref(f->timer);
        r = f->ready(pair[1], f->userdata);
        if (r < 0)
                return r;
        return pump(f);
}

/* A client-side connection that cannot be made: say why, then go. */
static void front_fail(TlsFront *f, const char *why) {
        tls_front_failed_t failed = TAKE_PTR(f->failed);

        if (failed)
                failed(why, f->userdata);
        front_free(f);
}

static int on_net(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        TlsFront *f = userdata;
        uint32_t ev;
        int r;

        if (f->connecting) {
                int error = 0;
                socklen_t len = sizeof(error);
                char msg[160];

                if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &len) < 0)
                        error = errno;
                if (error != 0) {
                        snprintf(msg, sizeof(msg), "cannot connect: %s", strerror(error));
                        front_fail(f, msg);
                        return 0;
                }
                f->connecting = false;
                (void) setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &(int) { 1 }, sizeof(int));
        }
        if (f->established) {
                if ((revents & (EPOLLIN | EPOLLHUP | EPOLLERR)) || (f->read_wants_out && (revents & EPOLLOUT)))
                        f->net_readable = true;
                r = pump(f);
        } else {
                r = tls_handshake_step(f->ssl, &ev);
                if (r == -EAGAIN) {
                        set_events(f->net_io, ev);
                        return 0;
                }
                if (r < 0) {
                        char msg[256];

                        tls_handshake_error(f->ssl, -1, msg, sizeof(msg));
                        if (f->failed) {
                                front_fail(f, msg);
                                return 0;
                        }
                        log_debug("TLS handshake with a client failed: %s", msg);
                } else
                        r = establish(f);
        }
        if (r < 0)
                front_free(f);
        return 0;
}

static int on_handshake_timeout(sd_event_source *s, uint64_t usec, void *userdata) {
        TlsFront *f = userdata;

        if (f->failed) {
                front_fail(f, "no TLS connection within 10 s");
                return 0;
        }
        log_debug("A client did not finish its TLS handshake within 10 s: closed.");
        front_free(f);
        return 0;
}

/* A front on fd (taken, closed on failure too), in set. */
static TlsFront *front_add(sd_event *event, int fd, TlsFronts *set, tls_front_ready_t ready, void *userdata) {
        TlsFront *f = calloc(1, sizeof(*f));

        if (!f) {
                safe_close(fd);
                return NULL;
        }
        f->set = set;
        f->next = set->head;
        if (set->head)
                set->head->prev = f;
        set->head = f;
        set->n++;
        f->event = sd_event_ref(event);
        f->net_fd = fd;
        f->inner_fd = f->served_fd = -EBADF;
        f->ready = ready;
        f->userdata = userdata;
        return f;
}

int tls_front_new(sd_event *event, SSL_CTX *ctx, int fd, TlsFronts *set, tls_front_ready_t ready, void *userdata) {
        TlsFront *f;
        int r;

        f = front_add(event, fd, set, ready, userdata);
        if (!f)
                return -ENOMEM;
        f->ssl = SSL_new(ctx);
        if (!f->ssl || SSL_set_fd(f->ssl, fd) != 1) {
                front_free(f);
                return -ENOMEM;
        }
        SSL_set_accept_state(f->ssl);
        r = sd_event_add_io(event, &f->net_io, fd, EPOLLIN, on_net, f);
        if (r >= 0)
                r = sd_event_add_time_relative(event, &f->timer, CLOCK_MONOTONIC, HANDSHAKE_TIMEOUT_USEC, 0,
                                               on_handshake_timeout, f);
        if (r < 0) {
                front_free(f);
                return r;
        }
        return 0;
}

int tls_front_connect(sd_event *event, SSL_CTX *ctx, const struct sockaddr *addr, unsigned addr_len, const char *host,
                      TlsFronts *set, tls_front_ready_t ready, tls_front_failed_t failed, void *userdata) {
        return tls_front_connect_sandbox(event, ctx, addr, addr_len, host, NULL, set, ready, failed, userdata);
}

int tls_front_connect_sandbox(sd_event *event, SSL_CTX *ctx, const struct sockaddr *addr, unsigned addr_len,
                              const char *host, const char *sandbox_id, TlsFronts *set, tls_front_ready_t ready,
                              tls_front_failed_t failed, void *userdata) {
        TlsFront *f;
        int fd, r;

        fd = socket(addr->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return negative_errno();
        if (connect(fd, addr, addr_len) < 0 && errno != EINPROGRESS) {
                r = negative_errno();
                safe_close(fd);
                return r;
        }
        f = front_add(event, fd, set, ready, userdata);
        if (!f)
                return -ENOMEM;
        f->connecting = true;
        r = tls_client_new(ctx, fd, host, sandbox_id, &f->ssl);
        if (r >= 0)
                r = sd_event_add_io(event, &f->net_io, fd, EPOLLOUT, on_net, f);
        if (r >= 0)
                r = sd_event_add_time_relative(event, &f->timer, CLOCK_MONOTONIC, HANDSHAKE_TIMEOUT_USEC, 0,
                                               on_handshake_timeout, f);
        if (r < 0) {
                front_free(f); /* (failed is not set yet: not called) */
                return r;
        }
        f->failed = failed;
        return 0;
}

void tls_fronts_written(TlsFronts *set, int served_fd) {
        for (TlsFront *f = set->head; f; f = f->next)
                if (f->established && f->served_fd == served_fd) {
                        f->inner_readable = true;
                        if (pump(f) < 0)
                                front_free(f);
                        return;
                }
}

int tls_fronts_net_fd(const TlsFronts *set, int served_fd) {
        if (served_fd < 0)
                return -EBADF;
        for (TlsFront *f = set->head; f; f = f->next)
                if (f->established && f->served_fd == served_fd)
                        return f->net_fd;
        return -EBADF;
}

static TlsFront *front_other_than(TlsFronts *set, int keep_served_fd) {
        for (TlsFront *f = set->head; f; f = f->next)
                if (!f->established || keep_served_fd < 0 || f->served_fd != keep_served_fd)
                        return f;
        return NULL;
}

void tls_fronts_reset(TlsFronts *set, int keep_served_fd) {
        TlsFront *f;

        /* A client side one's failed() may free others: from the head each time. */
        while ((f = front_other_than(set, keep_served_fd))) {
                if (f->net_fd >= 0)
                        (void) socket_reset_on_close(f->net_fd);
                f->reset = true;
                front_free(f);
        }
}

void tls_fronts_free_all(TlsFronts *set) {
        while (set->head)
                front_free(set->head);
}

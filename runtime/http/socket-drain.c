/* SPDX-License-Identifier: MIT */
#include <linux/sockios.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>

#include "log.h"
#include "macro.h"
#include "socket-drain.h"

/* How often what is unacknowledged is looked at: a peer on the same host or a bridge has
 * everything within a tick or two. */
#define TICK_USEC (10ULL * 1000)

typedef struct Draining {
        int fd;
        uint64_t deadline;
} Draining;

struct SocketDrain {
        sd_event *event;
        sd_event_source *timer;
        Draining *sockets;
        size_t n, allocated;
};

static void reset_close(int fd) {
        (void) socket_reset_on_close(fd);
        safe_close(fd);
}

static uint64_t last_fin_usec; /* CLOCK_MONOTONIC; 0: none */

/* A socket that cannot say (it failed) has nothing left worth waiting for. */
bool socket_drained(int fd) {
        int unacked = 0;

        return ioctl(fd, SIOCOUTQ, &unacked) < 0 || unacked == 0;
}

uint64_t socket_drain_last_fin_usec(void) {
        return last_fin_usec;
}

/* Where SIOCOUTQ cannot say what is unacknowledged (gVisor of 2022 answers ENOPROTOOPT), a
 * reset could throw away what is still on its way: the socket ends as any other, with a FIN
 * (the peer gets everything), and when is kept (a TIME_WAIT may follow it: the hold waits it
 * out, checkpoint-hold.h). */
static void fin_close(int fd) {
        struct timespec ts;
        char c;
        /* The peer closed first (its FIN is in): ours ends it passively, with no TIME_WAIT. */
        bool peer_closed = recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT) == 0;

        (void) shutdown(fd, SHUT_WR);
        safe_close(fd);
        if (!peer_closed && clock_gettime(CLOCK_MONOTONIC, &ts) == 0)
                last_fin_usec = (uint64_t) ts.tv_sec * 1000000ULL + (uint64_t) ts.tv_nsec / 1000ULL;
}

static bool is_tcp(int fd) {
        int domain = 0;
        socklen_t len = sizeof(domain);

        if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &len) < 0)
                return false;
        return domain == AF_INET || domain == AF_INET6;
}

static uint64_t now(SocketDrain *d) {
        uint64_t t = 0;

        (void) sd_event_now(d->event, CLOCK_MONOTONIC, &t);
        return t;
}

static void arm(SocketDrain *d) {
        if (!d->timer)
                return;
        if (d->n == 0) {
                (void) sd_event_source_set_enabled(d->timer, SD_EVENT_OFF);
                return;
        }
        (void) sd_event_source_set_time(d->timer, now(d) + TICK_USEC);
        (void) sd_event_source_set_enabled(d->timer, SD_EVENT_ONESHOT);
}

static int on_tick(sd_event_source *s, uint64_t usec, void *userdata) {
        SocketDrain *d = userdata;
        size_t k = 0;

        for (size_t i = 0; i < d->n; i++) {
                if (usec >= d->sockets[i].deadline || socket_drained(d->sockets[i].fd))
                        reset_close(d->sockets[i].fd);
                else
                        d->sockets[k++] = d->sockets[i];
        }
        d->n = k;
        arm(d);
        return 0;
}

int socket_drain_new(sd_event *event, SocketDrain **ret) {
        SocketDrain *d = calloc(1, sizeof(*d));
        int r;

        if (!d)
                return -ENOMEM;
        d->event = sd_event_ref(event);
        r = sd_event_add_time(event, &d->timer, CLOCK_MONOTONIC, 0, TICK_USEC / 2, on_tick, d);
        if (r >= 0)
                r = sd_event_source_set_enabled(d->timer, SD_EVENT_OFF);
        if (r < 0) {
                socket_drain_free(d);
                return r;
        }
        *ret = d;
        return 0;
}

void socket_drain_add(SocketDrain *d, int fd) {
        if (fd < 0)
                return;
        if (!is_tcp(fd)) {
                safe_close(fd);
                return;
        }
        if (ioctl(fd, SIOCOUTQ, &(int) { 0 }) < 0) {
                fin_close(fd);
                return;
        }
        /* Bounded: a peer that closes and never acknowledges, many times over, holds no more
         * than this (and loses the unacknowledged end of its answers). */
        if (socket_drained(fd) || d->n >= SOCKET_DRAIN_MAX) {
                reset_close(fd);
                return;
        }
        if (d->n == d->allocated) {
                size_t m = MAX(d->allocated * 2, (size_t) 16);
                Draining *p = reallocarray(d->sockets, m, sizeof(*p));

                if (!p) {
                        log_oom();
                        reset_close(fd);
                        return;
                }
                d->sockets = p;
                d->allocated = m;
        }
        d->sockets[d->n++] = (Draining) { .fd = fd, .deadline = now(d) + SOCKET_DRAIN_MAX_USEC };
        if (d->n == 1)
                arm(d);
}

void socket_drain_reset_all(SocketDrain *d) {
        if (!d)
                return;
        for (size_t i = 0; i < d->n; i++)
                reset_close(d->sockets[i].fd);
        d->n = 0;
        arm(d);
}

SocketDrain *socket_drain_free(SocketDrain *d) {
        if (!d)
                return NULL;
        socket_drain_reset_all(d);
        d->timer = sd_event_source_disable_unref(d->timer);
        free(d->sockets);
        sd_event_unref(d->event);
        return mfree(d);
}

/* SPDX-License-Identifier: MIT */
#pragma once

/* Sockets a server in close-by-reset mode is done with (HttpServerConfig.close_by_reset): each
 * is closed with a reset (socket_reset_on_close()) once the peer has acknowledged everything
 * sent on it (SIOCOUTQ says 0), or after SOCKET_DRAIN_MAX_USEC. So the server never sends the
 * first FIN of a connection, and keeps no TIME_WAIT (gVisor cannot checkpoint a sandbox that
 * holds one), yet the peer still gets the end of the last response: a reset only throws away
 * what is unacknowledged.
 *
 * The sockets are watched by a timer only, never by epoll: gVisor refuses to save a TCP
 * endpoint that has epoll waiters, and a drained socket would be one for nothing. Other than
 * TCP sockets (the plain end of a TLS connection, a socket pair) are closed at once: their
 * close loses nothing and leaves nothing. */

#include <stdbool.h>
#include <stdint.h>

#include <systemd/sd-event.h>

#define SOCKET_DRAIN_MAX_USEC (10ULL * 1000 * 1000)
#define SOCKET_DRAIN_MAX 1024 /* sockets waiting at once; more are reset at once */

typedef struct SocketDrain SocketDrain;

int socket_drain_new(sd_event *event, SocketDrain **ret);
/* Resets what is left. NULL. */
SocketDrain *socket_drain_free(SocketDrain *d);

/* Take fd (a socket no sd_event_source watches any more) to close it as above. When it cannot
 * be kept (out of memory), it is reset at once. */
void socket_drain_add(SocketDrain *d, int fd);

/* Reset every socket waiting now (a checkpoint is to be taken). */
void socket_drain_reset_all(SocketDrain *d);

/* Has the peer acknowledged everything sent on fd (or can fd not say: it failed)? */
bool socket_drained(int fd);

/* When a socket was last ended with a FIN instead (CLOCK_MONOTONIC µs; 0: never): where the
 * kernel cannot say what is unacknowledged (gVisor of 2022), socket_drain_add() does that, and
 * a TIME_WAIT of the sandbox's may follow it for a minute. */
uint64_t socket_drain_last_fin_usec(void);

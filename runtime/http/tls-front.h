/* SPDX-License-Identifier: MIT */
#pragma once

/* The TLS end of one accepted connection: the handshake, then a pump between the TLS socket
 * and one end of a socket pair whose other end the HTTP server serves as it serves a plain
 * connection. So every path (our HTTP, WebSockets handed to libwebsockets, the port proxy's
 * takeover of the socket) works the same over TLS without knowing of it.
 *
 * Bounded: two 32 KiB buffers per connection (each side stops reading while the other's is
 * full), a handshake has 10 s. Either side closing ends both: the peer closing its TLS session
 * shuts the pair's write side (the server sees the end of the request stream); the server
 * closing its end sends close_notify and closes the TCP connection. */

#include <openssl/ssl.h>
#include <systemd/sd-event.h>

typedef struct TlsFront TlsFront;

typedef struct TlsFronts {
        TlsFront *head;
        unsigned n; /* in the handshake or pumping */
} TlsFronts;

/* The handshake is done: serve plain_fd (non-blocking, CLOEXEC; the callee owns it). A
 * negative return closes the connection. */
typedef int (*tls_front_ready_t)(int plain_fd, void *userdata);

/* Take fd (an accepted TCP socket) and start the handshake. */
int tls_front_new(sd_event *event, SSL_CTX *ctx, int fd, TlsFronts *set, tls_front_ready_t ready, void *userdata);
/* Close every connection of the set at once (the server stops). */
void tls_fronts_free_all(TlsFronts *set);

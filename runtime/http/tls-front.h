/* SPDX-License-Identifier: MIT */
#pragma once

/* The TLS end of one connection: the handshake, then a pump between the TLS socket and one end
 * of a socket pair whose other end is served as a plain connection. Accepted (server side): the
 * HTTP server serves the pair's end as it serves a plain connection, so every path (our HTTP,
 * WebSockets handed to libwebsockets, the port proxy's takeover of the socket) works the same
 * over TLS without knowing of it. Made (client side, tls_front_connect()): the port proxy
 * forwards to the pair's end as to a plain upstream (agentix-e2b to an https:// runtime).
 *
 * Bounded: two 32 KiB buffers per connection (each side stops reading while the other's is
 * full), a handshake has 10 s. Either side closing ends both: the peer closing its TLS session
 * shuts the pair's write side (the server sees the end of the request stream); the server
 * closing its end sends close_notify and closes the TCP connection. */

#include <openssl/ssl.h>
#include <systemd/sd-event.h>

typedef struct TlsFront TlsFront;
struct SocketDrain;

typedef struct TlsFronts {
        TlsFront *head;
        unsigned n; /* in the handshake or pumping */
        /* Not NULL: the TCP socket of a connection that ends goes there, to be reset once the
         * peer has acknowledged everything (close-by-reset mode, socket-drain.h). */
        struct SocketDrain *drain;
} TlsFronts;

/* The handshake is done: serve plain_fd (non-blocking, CLOEXEC; the callee owns it). A
 * negative return closes the connection. */
typedef int (*tls_front_ready_t)(int plain_fd, void *userdata);

/* Take fd (an accepted TCP socket) and start the handshake. */
int tls_front_new(sd_event *event, SSL_CTX *ctx, int fd, TlsFronts *set, tls_front_ready_t ready, void *userdata);

/* The connection could not be made: why (a refused certificate says so), or NULL when the set
 * is freed first. Called once, instead of ready. */
typedef void (*tls_front_failed_t)(const char *why, void *userdata);
/* Connect to addr and make a TLS connection that verifies the server against ctx (a client
 * context, tls.h) and host; then ready(), or failed(). A negative errno: neither is called. */
struct sockaddr;
int tls_front_connect(sd_event *event, SSL_CTX *ctx, const struct sockaddr *addr, unsigned addr_len, const char *host,
                      TlsFronts *set, tls_front_ready_t ready, tls_front_failed_t failed, void *userdata);
/* The same for a sandbox's runtime: its certificate must name sandbox_id's sandbox too (tls.h),
 * so that a neighbour's runtime on the same address is refused. */
int tls_front_connect_sandbox(sd_event *event, SSL_CTX *ctx, const struct sockaddr *addr, unsigned addr_len,
                              const char *host, const char *sandbox_id, TlsFronts *set, tls_front_ready_t ready,
                              tls_front_failed_t failed, void *userdata);
/* The server wrote to served_fd (a pair's end it got from ready): move that now, rather than at
 * the loop's next turn. A no-op for any other fd. */
void tls_fronts_written(TlsFronts *set, int served_fd);

/* The TCP socket of the connection whose plain end (from ready) is served_fd, or -EBADF. */
int tls_fronts_net_fd(const TlsFronts *set, int served_fd);
/* End every connection of the set but the one whose plain end is keep_served_fd (-EBADF: none)
 * at once, with a reset. */
void tls_fronts_reset(TlsFronts *set, int keep_served_fd);

/* Close every connection of the set at once (the server stops). */
void tls_fronts_free_all(TlsFronts *set);

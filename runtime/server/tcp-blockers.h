/* SPDX-License-Identifier: MIT */
#pragma once

/* The TCP connections that keep gVisor from checkpointing the sandbox, read from the text of
 * /proc/net/tcp and /proc/net/tcp6 (no I/O here): gVisor cannot save a TCP endpoint that is
 * connected, or in TIME_WAIT, unless both its addresses are loopback (127.0.0.0/8, ::1,
 * ::ffff:127.0.0.0/104). So every entry that is not LISTEN and has a non-loopback address is in
 * the way, except the connection that asks for the hold itself (either of its ends, when both
 * are in this network namespace): it goes once the answer is read. gVisor does not list its
 * TIME_WAIT entries there; those cannot be seen, only avoided (HttpServerConfig.close_by_reset). */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

/* At most this many are named: the answer stays small, whatever runs in the sandbox. */
#define TCP_BLOCKERS_MAX 32
/* "[ffff:…]:65535 [ffff:…]:65535 ESTABLISHED": two of 53 characters at most, a state name */
#define TCP_BLOCKER_TEXT_MAX 128

/* An address and port, IPv4-mapped IPv6 addresses as IPv4 (so either spelling compares equal). */
typedef struct TcpEndpoint {
        int family; /* AF_INET, AF_INET6; 0: none */
        uint8_t addr[16];
        uint16_t port;
} TcpEndpoint;

typedef struct TcpBlockers {
        char text[TCP_BLOCKERS_MAX][TCP_BLOCKER_TEXT_MAX]; /* "LOCAL REMOTE STATE" */
        size_t n;     /* named in text */
        size_t total; /* in the way, named or not */
} TcpBlockers;

/* The endpoint of a socket address (getsockname(), getpeername()). -EAFNOSUPPORT for another
 * family than IPv4 or IPv6. */
int tcp_endpoint_from_sockaddr(const struct sockaddr *sa, socklen_t len, TcpEndpoint *ret);

/* Add the entries of one table's text (either file's: the family is told by each address)
 * that are in the way to b. asker_local, asker_remote: the asking connection's ends as the
 * server sees them (family 0: none). own_ports: the ports the server listens on; a connection
 * to one of them (its local port) is the server's, which the hold resets itself. Lines that
 * are not entries (the header, malformed ones) are skipped. */
void tcp_blockers_scan(const char *table, const TcpEndpoint *asker_local, const TcpEndpoint *asker_remote,
                       const uint16_t *own_ports, size_t n_own_ports, TcpBlockers *b);

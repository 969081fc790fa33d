/* SPDX-License-Identifier: MIT */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"
#include "tcp-blockers.h"

/* The kernel's TCP states, as the tables print them (include/net/tcp_states.h). */
#define TCP_STATE_LISTEN 0x0A
#define TCP_STATE_CLOSE 0x07

static const char *state_name(unsigned state) {
        static const char *const names[] = {
                [0x01] = "ESTABLISHED", [0x02] = "SYN_SENT",   [0x03] = "SYN_RECV",  [0x04] = "FIN_WAIT1",
                [0x05] = "FIN_WAIT2",   [0x06] = "TIME_WAIT",  [0x07] = "CLOSE",     [0x08] = "CLOSE_WAIT",
                [0x09] = "LAST_ACK",    [0x0A] = "LISTEN",     [0x0B] = "CLOSING",   [0x0C] = "NEW_SYN_RECV",
        };

        return state < ELEMENTSOF(names) && names[state] ? names[state] : "UNKNOWN";
}

static const uint8_t v4_mapped_prefix[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };

static void endpoint_canonical(TcpEndpoint *e) {
        if (e->family == AF_INET6 && memcmp(e->addr, v4_mapped_prefix, sizeof(v4_mapped_prefix)) == 0) {
                memmove(e->addr, e->addr + 12, 4);
                memset(e->addr + 4, 0, 12);
                e->family = AF_INET;
        }
}

int tcp_endpoint_from_sockaddr(const struct sockaddr *sa, socklen_t len, TcpEndpoint *ret) {
        TcpEndpoint e = {};

        if (sa->sa_family == AF_INET && len >= (socklen_t) sizeof(struct sockaddr_in)) {
                const struct sockaddr_in *in = (const struct sockaddr_in *) sa;

                e.family = AF_INET;
                memcpy(e.addr, &in->sin_addr, 4);
                e.port = ntohs(in->sin_port);
        } else if (sa->sa_family == AF_INET6 && len >= (socklen_t) sizeof(struct sockaddr_in6)) {
                const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *) sa;

                e.family = AF_INET6;
                memcpy(e.addr, &in6->sin6_addr, 16);
                e.port = ntohs(in6->sin6_port);
        } else
                return -EAFNOSUPPORT;
        endpoint_canonical(&e);
        *ret = e;
        return 0;
}

/* n hex digits at s as the number they spell. */
static bool parse_hex_u32(const char *s, size_t n, uint32_t *ret) {
        char buf[9], *end;

        if (n == 0 || n > 8)
                return false;
        memcpy(buf, s, n);
        buf[n] = 0;
        *ret = (uint32_t) strtoul(buf, &end, 16);
        return *end == 0;
}

/* "0100007F" or 32 hex digits: the kernel prints each 32-bit word of the address (network
 * order in memory) as a number of this host, so the number's bytes here are the address's. */
static bool parse_address(const char *hex, TcpEndpoint *e) {
        size_t n = strlen(hex);

        if (n != 8 && n != 32)
                return false;
        e->family = n == 8 ? AF_INET : AF_INET6;
        for (size_t i = 0; i < n / 8; i++) {
                uint32_t word;

                if (!parse_hex_u32(hex + 8 * i, 8, &word))
                        return false;
                memcpy(e->addr + 4 * i, &word, 4);
        }
        endpoint_canonical(e);
        return true;
}

static bool is_loopback(const TcpEndpoint *e) {
        static const uint8_t v6_loopback[16] = { [15] = 1 };

        if (e->family == AF_INET)
                return e->addr[0] == 127;
        return memcmp(e->addr, v6_loopback, 16) == 0;
}

static bool endpoint_equal(const TcpEndpoint *a, const TcpEndpoint *b) {
        return a->family != 0 && a->family == b->family && a->port == b->port && memcmp(a->addr, b->addr, 16) == 0;
}

typedef struct TcpEntry {
        TcpEndpoint local, remote;
        unsigned state;
} TcpEntry;

/* "   3: 0100007F:1F40 0100007F:D5A2 01 00000000:00000000 …" */
static bool parse_entry(const char *line, TcpEntry *ret) {
        char local[33], remote[33];
        unsigned local_port, remote_port, state;
        TcpEntry e = {};

        if (sscanf(line, " %*u: %32[0-9A-Fa-f]:%4x %32[0-9A-Fa-f]:%4x %2x", local, &local_port, remote, &remote_port,
                   &state) != 5)
                return false;
        if (!parse_address(local, &e.local) || !parse_address(remote, &e.remote) || e.local.family != e.remote.family)
                return false;
        e.local.port = (uint16_t) local_port;
        e.remote.port = (uint16_t) remote_port;
        e.state = state;
        *ret = e;
        return true;
}

/* A LISTEN or CLOSE entry (bound, or ended) has no connection to save; one to a port the
 * server listens on is the server's own, which the hold resets: its end, and the other end when
 * a program in the sandbox made it to the sandbox's own address (the reset ends that one too). */
static bool in_the_way(const TcpEntry *e, const TcpEndpoint *asker_local, const TcpEndpoint *asker_remote,
                       const uint16_t *own_ports, size_t n_own_ports) {
        if (e->state == TCP_STATE_LISTEN || e->state == TCP_STATE_CLOSE)
                return false;
        for (size_t i = 0; i < n_own_ports; i++)
                if (e->local.port == own_ports[i] ||
                    (e->remote.port == own_ports[i] && e->local.family == e->remote.family &&
                     memcmp(e->local.addr, e->remote.addr, 16) == 0))
                        return false;
        if (is_loopback(&e->local) && is_loopback(&e->remote))
                return false;
        if (endpoint_equal(&e->local, asker_local) && endpoint_equal(&e->remote, asker_remote))
                return false;
        /* The asker's own end, when it runs in this network namespace too. */
        return !(endpoint_equal(&e->local, asker_remote) && endpoint_equal(&e->remote, asker_local));
}

static void endpoint_format(const TcpEndpoint *e, char *buf, size_t size) {
        char a[INET6_ADDRSTRLEN] = "?";

        (void) inet_ntop(e->family, e->addr, a, sizeof(a));
        snprintf(buf, size, e->family == AF_INET6 ? "[%s]:%u" : "%s:%u", a, (unsigned) e->port);
}

static void blockers_add(TcpBlockers *b, const TcpEntry *e) {
        char local[INET6_ADDRSTRLEN + 8], remote[INET6_ADDRSTRLEN + 8];

        b->total++;
        if (b->n >= TCP_BLOCKERS_MAX)
                return;
        endpoint_format(&e->local, local, sizeof(local));
        endpoint_format(&e->remote, remote, sizeof(remote));
        snprintf(b->text[b->n++], TCP_BLOCKER_TEXT_MAX, "%s %s %.15s", local, remote, state_name(e->state));
}

void tcp_blockers_scan(const char *table, const TcpEndpoint *asker_local, const TcpEndpoint *asker_remote,
                       const uint16_t *own_ports, size_t n_own_ports, TcpBlockers *b) {
        const char *p = table;

        while (p && *p) {
                const char *eol = strchr(p, '\n');
                size_t n = eol ? (size_t) (eol - p) : strlen(p);
                char line[512];
                TcpEntry e;

                /* Entries are shorter (about 150 characters); a longer line is no entry. */
                if (n < sizeof(line)) {
                        memcpy(line, p, n);
                        line[n] = 0;
                        if (parse_entry(line, &e) && in_the_way(&e, asker_local, asker_remote, own_ports, n_own_ports))
                                blockers_add(b, &e);
                }
                p = eol ? eol + 1 : NULL;
        }
}

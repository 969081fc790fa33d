/* SPDX-License-Identifier: MIT */
/* The TCP connections a hold (checkpoint-hold.h) finds in the way, from /proc/net/tcp text
 * (tcp-blockers.h). */
#include <arpa/inet.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "buffer.h"
#include "tcp-blockers.h"

#define HEADER "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"

/* An address as the kernel prints it: each 32-bit word of it, in memory order, as a number
 * of this host. */
static void address_hex(const char *ip, char *buf, size_t size) {
        uint8_t a[16];
        bool v6 = strchr(ip, ':');
        size_t words = v6 ? 4 : 1;

        assert_int_equal(inet_pton(v6 ? AF_INET6 : AF_INET, ip, a), 1);
        buf[0] = 0;
        for (size_t i = 0; i < words; i++) {
                uint32_t w;

                memcpy(&w, a + 4 * i, 4);
                snprintf(buf + strlen(buf), size - strlen(buf), "%08X", w);
        }
}

/* One entry of the table, as the kernel writes it. */
static void add_entry(Buffer *b, const char *local, unsigned local_port, const char *remote, unsigned remote_port,
                      unsigned state) {
        char l[40], r[40];
        static unsigned sl = 0;

        address_hex(local, l, sizeof(l));
        address_hex(remote, r, sizeof(r));
        assert_true(buffer_printf(b, "%4u: %s:%04X %s:%04X %02X 00000000:00000000 00:00000000 00000000  1000        0 %u 1 "
                                     "0000000000000000 20 4 30 10 -1\n",
                                  sl, l, local_port, r, remote_port, state, 40000 + sl) >= 0);
        sl++;
}

static const char *text(Buffer *b) {
        assert_true(buffer_append_byte(b, 0) >= 0);
        return (const char *) buffer_data(b);
}

static const TcpEndpoint none = {};

static void test_listen_close_and_loopback_skipped(void **state) {
        _cleanup_buffer_ Buffer b = BUFFER_NULL;
        TcpBlockers k = {};

        assert_true(buffer_printf(&b, HEADER) >= 0);
        add_entry(&b, "0.0.0.0", 8000, "0.0.0.0", 0, 0x0A);          /* LISTEN */
        add_entry(&b, "10.1.2.3", 8000, "0.0.0.0", 0, 0x0A);         /* LISTEN on an address */
        add_entry(&b, "10.1.2.3", 8000, "0.0.0.0", 0, 0x07);         /* CLOSE: bound, no connection */
        add_entry(&b, "127.0.0.1", 8000, "127.0.0.1", 41234, 0x01);  /* loopback both ways */
        add_entry(&b, "127.0.0.1", 41234, "127.0.0.1", 8000, 0x01);
        add_entry(&b, "127.1.2.3", 3000, "127.0.0.1", 41000, 0x06);  /* 127/8, TIME_WAIT */
        tcp_blockers_scan(text(&b), &none, &none, NULL, 0, &k);
        assert_int_equal(k.total, 0);
        assert_int_equal(k.n, 0);
}

static void test_loopback_v6_skipped(void **state) {
        _cleanup_buffer_ Buffer b = BUFFER_NULL;
        TcpBlockers k = {};

        assert_true(buffer_printf(&b, HEADER) >= 0);
        add_entry(&b, "::", 8000, "::", 0, 0x0A);
        add_entry(&b, "::1", 8000, "::1", 50000, 0x01);
        add_entry(&b, "::ffff:127.0.0.1", 8000, "::ffff:127.0.0.1", 50001, 0x01);
        add_entry(&b, "::ffff:127.0.0.1", 8000, "::1", 50002, 0x08);
        tcp_blockers_scan(text(&b), &none, &none, NULL, 0, &k);
        assert_int_equal(k.total, 0);
}

static void test_established_counted(void **state) {
        _cleanup_buffer_ Buffer b = BUFFER_NULL;
        TcpBlockers k = {};

        assert_true(buffer_printf(&b, HEADER) >= 0);
        add_entry(&b, "10.1.2.3", 8000, "10.1.2.1", 51234, 0x01);
        add_entry(&b, "127.0.0.1", 3000, "10.0.0.9", 1234, 0x06); /* one side not loopback */
        add_entry(&b, "2001:db8::1", 8000, "2001:db8::2", 40000, 0x08);
        add_entry(&b, "::ffff:10.1.2.3", 8000, "::ffff:10.1.2.9", 40001, 0x04);
        tcp_blockers_scan(text(&b), &none, &none, NULL, 0, &k);
        assert_int_equal(k.total, 4);
        assert_int_equal(k.n, 4);
        assert_string_equal(k.text[0], "10.1.2.3:8000 10.1.2.1:51234 ESTABLISHED");
        assert_string_equal(k.text[1], "127.0.0.1:3000 10.0.0.9:1234 TIME_WAIT");
        assert_string_equal(k.text[2], "[2001:db8::1]:8000 [2001:db8::2]:40000 CLOSE_WAIT");
        assert_string_equal(k.text[3], "10.1.2.3:8000 10.1.2.9:40001 FIN_WAIT1");
}

/* A connection to a port the server listens on is the server's (the hold resets it), from
 * anywhere; one from that port number as a client's is someone else's only if it is not. */
static void test_own_ports_excluded(void **state) {
        _cleanup_buffer_ Buffer b = BUFFER_NULL;
        const uint16_t own[] = { 8000, 49983 };
        TcpBlockers k = {};

        assert_true(buffer_printf(&b, HEADER) >= 0);
        add_entry(&b, "10.1.2.3", 8000, "10.1.2.1", 51234, 0x01);
        add_entry(&b, "2001:db8::1", 49983, "2001:db8::2", 40000, 0x08);
        add_entry(&b, "10.1.2.3", 9000, "10.1.2.1", 51236, 0x01);  /* another program's */
        add_entry(&b, "10.1.2.3", 40000, "10.9.9.9", 8000, 0x01);  /* out to someone's 8000 */
        add_entry(&b, "10.1.2.3", 40001, "10.1.2.3", 8000, 0x01);  /* in the sandbox to ours */
        tcp_blockers_scan(text(&b), &none, &none, own, ELEMENTSOF(own), &k);
        assert_int_equal(k.total, 2);
        assert_string_equal(k.text[0], "10.1.2.3:9000 10.1.2.1:51236 ESTABLISHED");
        assert_string_equal(k.text[1], "10.1.2.3:40000 10.9.9.9:8000 ESTABLISHED");
}

static void endpoint(const char *ip, unsigned port, TcpEndpoint *ret) {
        struct sockaddr_in6 in6 = { .sin6_family = AF_INET6, .sin6_port = htons(port) };
        struct sockaddr_in in = { .sin_family = AF_INET, .sin_port = htons(port) };

        if (strchr(ip, ':')) {
                assert_int_equal(inet_pton(AF_INET6, ip, &in6.sin6_addr), 1);
                assert_int_equal(tcp_endpoint_from_sockaddr((struct sockaddr *) &in6, sizeof(in6), ret), 0);
        } else {
                assert_int_equal(inet_pton(AF_INET, ip, &in.sin_addr), 1);
                assert_int_equal(tcp_endpoint_from_sockaddr((struct sockaddr *) &in, sizeof(in), ret), 0);
        }
}

static void test_asker_excluded(void **state) {
        _cleanup_buffer_ Buffer b = BUFFER_NULL;
        TcpEndpoint local, remote, mapped_local, mapped_remote;
        TcpBlockers k = {};

        assert_true(buffer_printf(&b, HEADER) >= 0);
        add_entry(&b, "10.1.2.3", 8000, "10.1.2.1", 51234, 0x01);  /* the asker, as the server has it */
        add_entry(&b, "10.1.2.1", 51234, "10.1.2.3", 8000, 0x01);  /* its other end, here too */
        add_entry(&b, "10.1.2.3", 8000, "10.1.2.1", 51235, 0x01);  /* another one of the same peer */
        endpoint("10.1.2.3", 8000, &local);
        endpoint("10.1.2.1", 51234, &remote);
        tcp_blockers_scan(text(&b), &local, &remote, NULL, 0, &k);
        assert_int_equal(k.total, 1);
        assert_string_equal(k.text[0], "10.1.2.3:8000 10.1.2.1:51235 ESTABLISHED");

        /* An IPv4-mapped socket address is the IPv4 one (a dual-stack socket's). */
        endpoint("::ffff:10.1.2.3", 8000, &mapped_local);
        endpoint("::ffff:10.1.2.1", 51234, &mapped_remote);
        assert_memory_equal(&mapped_local, &local, sizeof(local));
        assert_memory_equal(&mapped_remote, &remote, sizeof(remote));
        k = (TcpBlockers) {};
        tcp_blockers_scan(text(&b), &mapped_local, &mapped_remote, NULL, 0, &k);
        assert_int_equal(k.total, 1);
}

static void test_asker_v6_excluded(void **state) {
        _cleanup_buffer_ Buffer b = BUFFER_NULL;
        TcpEndpoint local, remote;
        TcpBlockers k = {};

        add_entry(&b, "2001:db8::1", 8000, "2001:db8::2", 40000, 0x01);
        add_entry(&b, "::ffff:10.1.2.3", 8000, "::ffff:10.1.2.1", 51234, 0x01);
        endpoint("2001:db8::1", 8000, &local);
        endpoint("2001:db8::2", 40000, &remote);
        tcp_blockers_scan(text(&b), &local, &remote, NULL, 0, &k);
        assert_int_equal(k.total, 1);
        assert_string_equal(k.text[0], "10.1.2.3:8000 10.1.2.1:51234 ESTABLISHED");
}

static void test_malformed_ignored(void **state) {
        TcpBlockers k = {};
        static const char table[] =
                HEADER
                "garbage\n"
                "\n"
                "   0: 0302010A:1F40\n"                                                       /* cut short */
                "   1: 0302010A1:1F40 0102010A:C822 01 00000000:00000000 00:00000000 0\n"  /* 9 digits */
                "   2: 0302010A:1F40 0102010A:C822\n"                                         /* no state */
                "   3: 0302010A:1F40 00000000000000000000000001000000:C822 01 0\n"            /* families mixed */
                "   4: 0302010G:1F40 0102010A:C822 01 0\n"                                    /* not hex */
                "   5 0302010A:1F40 0102010A:C822 01 0\n"                                     /* no colon */
                "   6: 0302010A:1F40 0102010A:C822 01 00000000:00000000 00:00000000 00000000  1000  0 9 1";
        char counted[] = "   7: 0302010A:1F40 0102010A:C822 01 0\n";

        tcp_blockers_scan(table, &none, &none, NULL, 0, &k);
        /* Only the last line is an entry (without its newline: the end of the text). */
        assert_int_equal(k.total, 1);
        k = (TcpBlockers) {};
        tcp_blockers_scan(counted, &none, &none, NULL, 0, &k);
        assert_int_equal(k.total, 1);
        k = (TcpBlockers) {};
        tcp_blockers_scan("", &none, &none, NULL, 0, &k);
        assert_int_equal(k.total, 0);
}

static void test_bounded(void **state) {
        _cleanup_buffer_ Buffer b = BUFFER_NULL;
        TcpBlockers k = {};

        assert_true(buffer_printf(&b, HEADER) >= 0);
        for (unsigned i = 0; i < TCP_BLOCKERS_MAX + 8; i++)
                add_entry(&b, "10.1.2.3", 8000, "10.1.2.1", 20000 + i, 0x01);
        tcp_blockers_scan(text(&b), &none, &none, NULL, 0, &k);
        assert_int_equal(k.total, TCP_BLOCKERS_MAX + 8);
        assert_int_equal(k.n, TCP_BLOCKERS_MAX);
        assert_string_equal(k.text[TCP_BLOCKERS_MAX - 1], "10.1.2.3:8000 10.1.2.1:20031 ESTABLISHED");

        /* The other table adds to what the first found. */
        tcp_blockers_scan("   0: 00000000000000000000000002000000:1F40 00000000000000000000000001000000:1234 01 0\n",
                          &none, &none, NULL, 0, &k);
        assert_int_equal(k.total, TCP_BLOCKERS_MAX + 9);
        assert_int_equal(k.n, TCP_BLOCKERS_MAX);
}

static void test_longest_text_fits(void **state) {
        _cleanup_buffer_ Buffer b = BUFFER_NULL;
        TcpBlockers k = {};

        add_entry(&b, "ffff:ffff:ffff:ffff:ffff:ffff:ffff:fffe", 65535, "ffff:ffff:ffff:ffff:ffff:ffff:ffff:fffd",
                  65534, 0x0C);
        tcp_blockers_scan(text(&b), &none, &none, NULL, 0, &k);
        assert_int_equal(k.n, 1);
        assert_string_equal(k.text[0], "[ffff:ffff:ffff:ffff:ffff:ffff:ffff:fffe]:65535 "
                                       "[ffff:ffff:ffff:ffff:ffff:ffff:ffff:fffd]:65534 NEW_SYN_RECV");
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_listen_close_and_loopback_skipped),
                cmocka_unit_test(test_loopback_v6_skipped),
                cmocka_unit_test(test_established_counted),
                cmocka_unit_test(test_own_ports_excluded),
                cmocka_unit_test(test_asker_excluded),
                cmocka_unit_test(test_asker_v6_excluded),
                cmocka_unit_test(test_malformed_ignored),
                cmocka_unit_test(test_bounded),
                cmocka_unit_test(test_longest_text_fits),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}

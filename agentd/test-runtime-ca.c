/* SPDX-License-Identifier: MIT */
/* The runtime CA (made once, loaded after), the certificates it issues checked by the client
 * side every libagentix connection uses (tls.h) in real handshakes over a socket pair, and the
 * sealed handover of a certificate (tls-handover.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <openssl/crypto.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/pem.h>
#include <openssl/x509v3.h>
#include <time.h>

#include "runtime-ca.h"
#include "tls-handover.h"
#include "tls.h"

static char dir_template[] = "/tmp/test-runtime-ca-XXXXXX";
static char *base;

static int setup(void **state) {
        base = mkdtemp(dir_template);
        return base ? 0 : -1;
}

static int teardown(void **state) {
        char cmd[128];
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", base);
        return system(cmd) == 0 ? 0 : -1;
}

static char *ca_dir(const char *name) {
        char *d;
        assert_true(asprintf(&d, "%s/%s", base, name) > 0);
        return d;
}

/* Handshake a server with pem against a client trusting ca_pem, dialling host. NULL: it
 * verified and a message went through both ways; else the client's error. */
static char *handshake_for(const char *pem, size_t pem_size, const char *ca_pem, const char *host,
                           const char *sandbox_id) {
        SSL_CTX *sctx = NULL, *cctx = NULL;
        SSL *server, *client;
        int sv[2];
        char *err = NULL;
        bool server_done = false, client_done = false, client_failed = false;
        static char msg[256];
        uint32_t ev;
        int r;

        assert_int_equal(tls_server_context_new(pem, pem_size, &sctx, &err), 0);
        assert_int_equal(tls_client_context_new(ca_pem, strlen(ca_pem), &cctx, &err), 0);
        assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv), 0);
        server = SSL_new(sctx);
        assert_non_null(server);
        SSL_set_fd(server, sv[0]);
        SSL_set_accept_state(server);
        assert_int_equal(tls_client_new(cctx, sv[1], host, sandbox_id, &client), 0);

        for (int i = 0; i < 100 && !(server_done && client_done) && !client_failed; i++) {
                if (!client_done) {
                        r = tls_handshake_step(client, &ev);
                        if (r == 0)
                                client_done = true;
                        else if (r != -EAGAIN) {
                                client_failed = true;
                                tls_handshake_error(client, -1, msg, sizeof(msg));
                        }
                }
                if (!server_done && !client_failed) {
                        r = tls_handshake_step(server, &ev);
                        if (r == 0)
                                server_done = true;
                        else
                                assert_int_equal(r, -EAGAIN);
                }
        }
        if (!client_failed) {
                char buf[64];
                ssize_t n;

                assert_true(server_done && client_done);
                assert_int_equal(tls_write(client, "ping", 4, &ev), 4);
                n = tls_read(server, buf, sizeof(buf), &ev);
                assert_int_equal(n, 4);
                assert_memory_equal(buf, "ping", 4);
                assert_int_equal(tls_write(server, "pong!", 5, &ev), 5);
                assert_int_equal(tls_read(client, buf, sizeof(buf), &ev), 5);
                assert_memory_equal(buf, "pong!", 5);
                /* Nothing more: the reader waits for input. */
                assert_int_equal(tls_read(client, buf, sizeof(buf), &ev), -EAGAIN);
                assert_int_equal(ev, EPOLLIN);
                /* A clean close is the end of the stream. */
                SSL_shutdown(server);
                assert_int_equal(tls_read(client, buf, sizeof(buf), &ev), -EPIPE);
        }
        SSL_free(server);
        SSL_free(client);
        SSL_CTX_free(sctx);
        SSL_CTX_free(cctx);
        close(sv[0]);
        close(sv[1]);
        return client_failed ? msg : NULL;
}

static char *handshake(const char *pem, size_t pem_size, const char *ca_pem, const char *host) {
        return handshake_for(pem, pem_size, ca_pem, host, NULL);
}

static X509 *leaf(const char *pem) {
        BIO *b = BIO_new_mem_buf(pem, -1);
        X509 *x = PEM_read_bio_X509(b, NULL, NULL, NULL);

        BIO_free(b);
        assert_non_null(x);
        return x;
}

static void test_made_then_loaded(void **state) {
        _cleanup_free_ char *dir = ca_dir("a"), *key = NULL, *first = NULL;
        RuntimeCA *ca = NULL;
        char *err = NULL;
        struct stat st;

        assert_int_equal(runtime_ca_open(dir, &ca, &err), 0);
        first = strdup(runtime_ca_pem(ca));
        assert_non_null(strstr(first, "BEGIN CERTIFICATE"));
        assert_null(strstr(first, "PRIVATE"));
        runtime_ca_free(ca);

        assert_true(asprintf(&key, "%s/ca.key", dir) > 0);
        assert_int_equal(stat(key, &st), 0);
        assert_int_equal(st.st_mode & 0777, 0600);

        /* Started again: the same CA. */
        assert_int_equal(runtime_ca_open(dir, &ca, &err), 0);
        assert_string_equal(runtime_ca_pem(ca), first);
        runtime_ca_free(ca);

        /* One file alone is not replaced with a new CA. */
        assert_int_equal(unlink(key), 0);
        assert_true(runtime_ca_open(dir, &ca, &err) < 0);
        assert_non_null(err);
        assert_non_null(strstr(err, "only one of"));
        free(err);
}

static void test_issued_certificates_verify(void **state) {
        _cleanup_free_ char *dir = ca_dir("b"), *other_dir = ca_dir("c");
        RuntimeCA *ca = NULL, *other = NULL;
        char *pem = NULL, *err = NULL;
        const char *msg;
        size_t size = 0;

        assert_int_equal(runtime_ca_open(dir, &ca, &err), 0);
        assert_int_equal(runtime_ca_open(other_dir, &other, &err), 0);
        assert_int_equal(runtime_ca_issue(ca, "127.0.0.1", "b0a1", (uint64_t) time(NULL) + 3600, &pem, &size), 0);
        assert_non_null(strstr(pem, "PRIVATE KEY"));

        /* The right CA and address. */
        assert_null(handshake(pem, size, runtime_ca_pem(ca), "127.0.0.1"));
        /* Another address. */
        msg = handshake(pem, size, runtime_ca_pem(ca), "127.0.0.2");
        assert_non_null(msg);
        assert_non_null(strstr(msg, "names another address"));
        /* Another CA. */
        msg = handshake(pem, size, runtime_ca_pem(other), "127.0.0.1");
        assert_non_null(msg);
        assert_non_null(strstr(msg, "not issued by"));
        OPENSSL_clear_free(pem, size);

        /* A name, and IPv6. */
        assert_int_equal(runtime_ca_issue(ca, "node-1.example", "b0a1", (uint64_t) time(NULL) + 3600, &pem, &size), 0);
        assert_null(handshake(pem, size, runtime_ca_pem(ca), "node-1.example"));
        assert_non_null(handshake(pem, size, runtime_ca_pem(ca), "node-2.example"));
        OPENSSL_clear_free(pem, size);
        assert_int_equal(runtime_ca_issue(ca, "::1", "b0a1", (uint64_t) time(NULL) + 3600, &pem, &size), 0);
        assert_null(handshake(pem, size, runtime_ca_pem(ca), "::1"));
        OPENSSL_clear_free(pem, size);

        /* Nothing that could smuggle a second name in. */
        assert_int_equal(runtime_ca_issue(ca, "a,DNS:b", "b0a1", (uint64_t) time(NULL) + 3600, &pem, &size), -EINVAL);
        assert_int_equal(runtime_ca_issue(ca, "", "b0a1", (uint64_t) time(NULL) + 3600, &pem, &size), -EINVAL);
        runtime_ca_free(ca);
        runtime_ca_free(other);
}

/* On a swarm node every runtime has the node's address: a certificate agentd issued to one
 * sandbox, served by its runtime in place of a neighbour's, must be refused by a client that
 * asks for the neighbour. */
static void test_certificates_name_their_sandbox(void **state) {
        _cleanup_free_ char *dir = ca_dir("d");
        RuntimeCA *ca = NULL;
        char *pem = NULL, *err = NULL;
        const char *msg;
        size_t size = 0;
        X509 *x;
        GENERAL_NAMES *names;
        bool has_ip = false, has_name = false;

        assert_int_equal(runtime_ca_open(dir, &ca, &err), 0);
        /* Sandbox b0b0's certificate, on the address a1a1's runtime has too. */
        assert_int_equal(runtime_ca_issue(ca, "127.0.0.1", "b0b0", (uint64_t) time(NULL) + 3600, &pem, &size), 0);
        x = leaf(pem);
        names = X509_get_ext_d2i(x, NID_subject_alt_name, NULL, NULL);
        assert_non_null(names);
        assert_int_equal(sk_GENERAL_NAME_num(names), 2);
        for (int i = 0; i < sk_GENERAL_NAME_num(names); i++) {
                GENERAL_NAME *g = sk_GENERAL_NAME_value(names, i);
                if (g->type == GEN_IPADD)
                        has_ip = ASN1_STRING_length(g->d.iPAddress) == 4 &&
                                 memcmp(ASN1_STRING_get0_data(g->d.iPAddress), "\x7f\0\0\1", 4) == 0;
                else if (g->type == GEN_DNS)
                        has_name = streq((const char *) ASN1_STRING_get0_data(g->d.dNSName), "b0b0.sandbox.agentix");
        }
        GENERAL_NAMES_free(names);
        X509_free(x);
        assert_true(has_ip);
        assert_true(has_name);

        /* Its own sandbox, address and name: taken; the address alone (a client that knows no
         * more): taken. */
        assert_null(handshake_for(pem, size, runtime_ca_pem(ca), "127.0.0.1", "b0b0"));
        assert_null(handshake(pem, size, runtime_ca_pem(ca), "127.0.0.1"));
        /* Asked for the neighbour: refused, and said so. */
        msg = handshake_for(pem, size, runtime_ca_pem(ca), "127.0.0.1", "a1a1");
        assert_non_null(msg);
        assert_non_null(strstr(msg, "another sandbox than a1a1"));
        /* Its own name on another address: refused too (both are checked). */
        msg = handshake_for(pem, size, runtime_ca_pem(ca), "127.0.0.2", "b0b0");
        assert_non_null(msg);
        assert_non_null(strstr(msg, "names another address"));
        OPENSSL_clear_free(pem, size);

        /* A DNS address: both names checked as well. */
        assert_int_equal(runtime_ca_issue(ca, "node-1.example", "b0b0", (uint64_t) time(NULL) + 3600, &pem, &size), 0);
        assert_null(handshake_for(pem, size, runtime_ca_pem(ca), "node-1.example", "b0b0"));
        assert_non_null(handshake_for(pem, size, runtime_ca_pem(ca), "node-1.example", "a1a1"));
        assert_non_null(handshake_for(pem, size, runtime_ca_pem(ca), "node-2.example", "b0b0"));
        /* A sandbox's name is not an address a client may dial for another. */
        assert_non_null(handshake_for(pem, size, runtime_ca_pem(ca), "b0b0.sandbox.agentix", "a1a1"));
        OPENSSL_clear_free(pem, size);

        /* No id that is not one DNS label: no dot, wildcard, upper case or comma. */
        for (const char *const *bad = (const char *const[]) { "a.b", "*", "B0B0", "", "-a", "a,DNS:x", NULL }; *bad;
             bad++)
                assert_int_equal(runtime_ca_issue(ca, "127.0.0.1", *bad, (uint64_t) time(NULL) + 3600, &pem, &size),
                                 -EINVAL);
        runtime_ca_free(ca);
}

/* A certificate lives no longer than it is asked to (the sandbox's expiry plus a grace, in
 * sandbox-tls.c), never ends before it starts, and handovers count up. */
static void test_certificates_end_when_asked(void **state) {
        _cleanup_free_ char *dir = ca_dir("e");
        RuntimeCA *ca = NULL;
        char *pem = NULL, *err = NULL;
        size_t size = 0;
        time_t now = time(NULL), end;
        X509 *x;
        uint64_t a, b;

        assert_int_equal(runtime_ca_open(dir, &ca, &err), 0);
        assert_int_equal(runtime_ca_issue(ca, "127.0.0.1", "b0b0", (uint64_t) now + 900, &pem, &size), 0);
        x = leaf(pem);
        assert_int_equal(X509_cmp_time(X509_get0_notAfter(x), &(time_t) { now + 899 }), 1);
        end = now + 901;
        assert_int_equal(X509_cmp_time(X509_get0_notAfter(x), &end), -1);
        /* Starts a little before now (a node's clock a little behind), not a year before. */
        assert_int_equal(X509_cmp_time(X509_get0_notBefore(x), &(time_t) { now + 1 }), -1);
        assert_int_equal(X509_cmp_time(X509_get0_notBefore(x), &(time_t) { now - 3600 }), 1);
        X509_free(x);
        OPENSSL_clear_free(pem, size);

        /* An end gone by (a sandbox at its expiry): a few minutes, not a year. */
        assert_int_equal(runtime_ca_issue(ca, "127.0.0.1", "b0b0", (uint64_t) now - 10, &pem, &size), 0);
        x = leaf(pem);
        assert_int_equal(X509_cmp_time(X509_get0_notAfter(x), &(time_t) { now + 3600 }), -1);
        assert_int_equal(X509_cmp_time(X509_get0_notAfter(x), &(time_t) { now }), 1);
        X509_free(x);
        OPENSSL_clear_free(pem, size);

        a = runtime_ca_next_issue(ca);
        b = runtime_ca_next_issue(ca);
        assert_true(b > a);
        assert_true(a >= (uint64_t) now * 1000000ULL);
        runtime_ca_free(ca);
}

static void test_server_context_errors(void **state) {
        SSL_CTX *ctx = NULL;
        char *err = NULL;

        assert_true(tls_server_context_new("nothing", 7, &ctx, &err) < 0);
        assert_non_null(strstr(err, "No certificate"));
        free(err);
        assert_true(tls_server_context_from_files("/nonexistent.crt", "/nonexistent.key", &ctx, &err) < 0);
        assert_non_null(strstr(err, "Cannot open /nonexistent.crt"));
        free(err);
        assert_true(tls_client_context_new("junk", 4, &ctx, &err) < 0);
        assert_non_null(strstr(err, "no PEM certificate"));
        free(err);
}

static void test_handover(void **state) {
        const char *pem = "-----BEGIN CERTIFICATE-----\nabc\n-----END CERTIFICATE-----\n";
        Buffer sealed = BUFFER_NULL, again = BUFFER_NULL;
        char *opened = NULL;
        size_t n = 0;

        uint64_t issued = 0;

        assert_int_equal(tls_handover_seal("token-0123456789abcdef", 1000, pem, strlen(pem), &sealed), 0);
        /* Not the text itself on the wire. */
        assert_null(memmem(buffer_data(&sealed), sealed.len, "CERTIFICATE", 11));
        assert_int_equal(tls_handover_open("token-0123456789abcdef", buffer_data(&sealed), sealed.len, 999, &issued,
                                           &opened, &n), 0);
        assert_int_equal(issued, 1000);
        assert_int_equal(n, strlen(pem));
        assert_string_equal(opened, pem);
        OPENSSL_clear_free(opened, n + 1);

        /* Each seal is its own (salt and nonce). */
        assert_int_equal(tls_handover_seal("token-0123456789abcdef", 1000, pem, strlen(pem), &again), 0);
        assert_int_equal(again.len, sealed.len);
        assert_memory_not_equal(buffer_data(&again), buffer_data(&sealed), sealed.len);

        /* Another token, a changed byte, a cut message: refused. */
        assert_int_equal(tls_handover_open("token-0123456789abcdeX", buffer_data(&sealed), sealed.len, 0, &issued,
                                           &opened, &n), -EBADMSG);
        buffer_data(&sealed)[sealed.len / 2] ^= 1;
        assert_int_equal(tls_handover_open("token-0123456789abcdef", buffer_data(&sealed), sealed.len, 0, &issued,
                                           &opened, &n), -EBADMSG);
        assert_int_equal(tls_handover_open("token-0123456789abcdef", buffer_data(&again), 20, 0, &issued, &opened, &n),
                         -EBADMSG);
        /* The count is agentd's word too: made larger on the way, the message is refused. */
        buffer_data(&again)[6 + 7] ^= 0x10;
        assert_int_equal(tls_handover_open("token-0123456789abcdef", buffer_data(&again), again.len, 0, &issued,
                                           &opened, &n), -EBADMSG);
        assert_int_equal(tls_handover_seal("", 1, pem, strlen(pem), &again), -EINVAL);
        buffer_done(&sealed);
        buffer_done(&again);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_made_then_loaded),
                cmocka_unit_test(test_issued_certificates_verify),
                cmocka_unit_test(test_certificates_name_their_sandbox),
                cmocka_unit_test(test_certificates_end_when_asked),
                cmocka_unit_test(test_server_context_errors),
                cmocka_unit_test(test_handover),
        };
        return cmocka_run_group_tests(tests, setup, teardown);
}

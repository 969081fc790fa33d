/* SPDX-License-Identifier: MIT */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "buffer.h"
#include "tls.h"

#define PEM_MAX (1024 * 1024)

static char *openssl_error(const char *what) {
        char detail[256] = "";
        unsigned long e = ERR_peek_last_error();
        char *msg;

        if (e)
                ERR_error_string_n(e, detail, sizeof(detail));
        ERR_clear_error();
        if (asprintf(&msg, "%s%s%s", what, detail[0] ? ": " : "", detail) < 0)
                return NULL;
        return msg;
}

static int fail(char **ret_error, int r, const char *what) {
        if (ret_error)
                *ret_error = openssl_error(what);
        else
                ERR_clear_error();
        return r;
}

static SSL_CTX *context_new(const SSL_METHOD *method) {
        SSL_CTX *ctx = SSL_CTX_new(method);

        if (!ctx)
                return NULL;
        /* Runtime traffic is ours at both ends: nothing older than TLS 1.2. */
        if (SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) != 1) {
                SSL_CTX_free(ctx);
                return NULL;
        }
        /* Writes are non-blocking and may be partial; a retried write may come from a buffer
         * that has moved (a Buffer grows). Buffers are kept (releasing them after each record
         * costs an allocation per record: measured, bench/tls). */
        SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
        SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION);
        /* Read what the socket has, not a record header then its body: half the recv() calls.
         * Readers must then ask SSL_has_pending() before they wait for the socket. */
        SSL_CTX_set_read_ahead(ctx, 1);
        /* AES-128-GCM first: as strong as the traffic needs, and a quarter faster than AES-256
         * with AES-NI (openssl speed here: 4.1 against 3.1 GB/s). */
        if (SSL_CTX_set_ciphersuites(ctx, "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:"
                                          "TLS_CHACHA20_POLY1305_SHA256") != 1) {
                SSL_CTX_free(ctx);
                return NULL;
        }
        return ctx;
}

int tls_server_context_new(const char *pem, size_t size, SSL_CTX **ret, char **ret_error) {
        _cleanup_(SSL_CTX_freep) SSL_CTX *ctx = NULL;
        X509 *cert = NULL;
        EVP_PKEY *key = NULL;
        BIO *bio;
        int r = -EINVAL;

        if (ret_error)
                *ret_error = NULL;
        if (size > PEM_MAX || size > INT32_MAX)
                return fail(ret_error, -E2BIG, "The certificate and key are too large");
        ctx = context_new(TLS_server_method());
        if (!ctx)
                return fail(ret_error, -ENOMEM, "Cannot make a TLS context");

        /* The first certificate is the server's, the others its chain; the key may come first. */
        bio = BIO_new_mem_buf(pem, (int) size);
        if (!bio)
                return fail(ret_error, -ENOMEM, "Out of memory");
        for (;;) {
                char *name = NULL, *header = NULL;
                unsigned char *data = NULL;
                long len = 0;
                const unsigned char *p;

                if (PEM_read_bio(bio, &name, &header, &data, &len) != 1) {
                        ERR_clear_error(); /* the end */
                        break;
                }
                p = data;
                if (streq(name, "CERTIFICATE")) {
                        X509 *x = d2i_X509(NULL, &p, len);
                        if (!x)
                                r = -EINVAL;
                        else if (!cert)
                                cert = x;
                        else if (SSL_CTX_add0_chain_cert(ctx, x) != 1)
                                X509_free(x);
                } else if (strstr(name, "PRIVATE KEY") && !key) {
                        /* "PRIVATE KEY" (PKCS#8), "EC PRIVATE KEY", "RSA PRIVATE KEY" */
                        BIO *kb = BIO_new_mem_buf(pem, (int) size);
                        if (kb) {
                                key = PEM_read_bio_PrivateKey(kb, NULL, NULL, (void *) "");
                                BIO_free(kb);
                        }
                }
                OPENSSL_free(name);
                OPENSSL_free(header);
                OPENSSL_clear_free(data, (size_t) len);
        }
        BIO_free(bio);

        if (!cert || !key) {
                X509_free(cert);
                EVP_PKEY_free(key);
                if (ret_error)
                        *ret_error = strdup(!cert ? "No certificate in the PEM text" : "No private key in the PEM text "
                                            "(an encrypted key cannot be used)");
                ERR_clear_error();
                return r == -EINVAL ? -EINVAL : -ENOKEY;
        }
        if (SSL_CTX_use_certificate(ctx, cert) != 1 || SSL_CTX_use_PrivateKey(ctx, key) != 1 ||
            SSL_CTX_check_private_key(ctx) != 1) {
                X509_free(cert);
                EVP_PKEY_free(key);
                return fail(ret_error, -EINVAL, "The private key does not belong to the certificate");
        }
        X509_free(cert);
        EVP_PKEY_free(key);
        *ret = TAKE_PTR(ctx);
        return 0;
}

static int read_small_file(const char *path, Buffer *b, char **ret_error) {
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        char buf[16384];
        ssize_t n;

        if (fd < 0) {
                int r = negative_errno();
                if (ret_error && asprintf(ret_error, "Cannot open %s: %s", path, strerror(-r)) < 0)
                        *ret_error = NULL;
                return r;
        }
        while ((n = read(fd, buf, sizeof(buf))) != 0) {
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        int r = negative_errno();
                        if (ret_error && asprintf(ret_error, "Cannot read %s: %s", path, strerror(-r)) < 0)
                                *ret_error = NULL;
                        return r;
                }
                if (b->len + (size_t) n > PEM_MAX) {
                        if (ret_error && asprintf(ret_error, "%s is larger than a PEM file can be", path) < 0)
                                *ret_error = NULL;
                        return -EFBIG;
                }
                if (buffer_append(b, buf, (size_t) n) < 0)
                        return -ENOMEM;
        }
        return buffer_append_byte(b, '\n');
}

int tls_server_context_from_files(const char *cert_path, const char *key_path, SSL_CTX **ret, char **ret_error) {
        Buffer pem = BUFFER_NULL;
        int r;

        if (ret_error)
                *ret_error = NULL;
        r = read_small_file(cert_path, &pem, ret_error);
        if (r >= 0)
                r = read_small_file(key_path, &pem, ret_error);
        if (r >= 0)
                r = tls_server_context_new((const char *) buffer_data(&pem), pem.len, ret, ret_error);
        if (pem.mem)
                OPENSSL_cleanse(pem.mem, pem.headroom + pem.cap); /* it held a private key */
        buffer_done(&pem);
        return r;
}

int tls_client_context_new(const char *ca_pem, size_t size, SSL_CTX **ret, char **ret_error) {
        _cleanup_(SSL_CTX_freep) SSL_CTX *ctx = NULL;
        X509_STORE *store;
        BIO *bio;
        unsigned n = 0;
        X509 *x;

        if (ret_error)
                *ret_error = NULL;
        if (!ca_pem || size == 0 || size > PEM_MAX || size > INT32_MAX)
                return fail(ret_error, -EINVAL, "No CA certificate to verify the runtime with");
        ctx = context_new(TLS_client_method());
        if (!ctx)
                return fail(ret_error, -ENOMEM, "Cannot make a TLS context");
        store = SSL_CTX_get_cert_store(ctx);
        bio = BIO_new_mem_buf(ca_pem, (int) size);
        if (!bio)
                return fail(ret_error, -ENOMEM, "Out of memory");
        while ((x = PEM_read_bio_X509(bio, NULL, NULL, NULL))) {
                if (X509_STORE_add_cert(store, x) == 1)
                        n++;
                X509_free(x);
        }
        BIO_free(bio);
        ERR_clear_error();
        if (n == 0)
                return fail(ret_error, -EINVAL, "The CA file holds no PEM certificate");
        SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
        *ret = TAKE_PTR(ctx);
        return 0;
}

static bool host_is_ip(const char *host) {
        unsigned char a[16];

        return inet_pton(AF_INET, host, a) == 1 || inet_pton(AF_INET6, host, a) == 1;
}

int tls_sandbox_name(const char *id, char *buf, size_t size) {
        size_t n = id ? strlen(id) : 0;

        /* One DNS label, lower case: what agentd's ids are (hex), checked so that no id can
         * make a name with a dot or a wildcard in it. */
        if (n == 0 || n > 63 || id[0] == '-' || id[n - 1] == '-')
                return -EINVAL;
        for (size_t i = 0; i < n; i++)
                if (!((id[i] >= 'a' && id[i] <= 'z') || (id[i] >= '0' && id[i] <= '9') || id[i] == '-'))
                        return -EINVAL;
        if ((size_t) snprintf(buf, size, "%s." TLS_SANDBOX_DOMAIN, id) >= size)
                return -ENOBUFS;
        return 0;
}

/* A DNS host a connection must name as well as its sandbox's name (an X509_VERIFY_PARAM checks
 * any one of its names, not all): checked by verify_second_name(). */
static int second_name_index = -1;
static pthread_once_t second_name_once = PTHREAD_ONCE_INIT;

static void second_name_free(void *parent, void *ptr, CRYPTO_EX_DATA *ad, int idx, long argl, void *argp) {
        free(ptr);
}

static void second_name_init(void) {
        second_name_index = SSL_get_ex_new_index(0, NULL, NULL, NULL, second_name_free);
}

static int verify_second_name(int ok, X509_STORE_CTX *x) {
        SSL *ssl;
        const char *name;

        if (!ok || X509_STORE_CTX_get_error_depth(x) != 0)
                return ok;
        ssl = X509_STORE_CTX_get_ex_data(x, SSL_get_ex_data_X509_STORE_CTX_idx());
        name = ssl && second_name_index >= 0 ? SSL_get_ex_data(ssl, second_name_index) : NULL;
        if (name && X509_check_host(X509_STORE_CTX_get_current_cert(x), name, 0, X509_CHECK_FLAG_NO_WILDCARDS,
                                    NULL) != 1) {
                /* Reported as the address it is (the host list holds the sandbox's name). */
                X509_STORE_CTX_set_error(x, X509_V_ERR_IP_ADDRESS_MISMATCH);
                return 0;
        }
        return ok;
}

static int require_sandbox(X509_VERIFY_PARAM *param, const char *sandbox_id) {
        char name[TLS_SANDBOX_NAME_MAX];
        int r = tls_sandbox_name(sandbox_id, name, sizeof(name));

        if (r < 0)
                return r;
        /* No wildcards: agentd never issues one, and "*.sandbox.agentix" must name no sandbox. */
        X509_VERIFY_PARAM_set_hostflags(param, X509_CHECK_FLAG_NO_WILDCARDS);
        return X509_VERIFY_PARAM_set1_host(param, name, 0) == 1 ? 0 : -ENOMEM;
}

int tls_context_require_sandbox(SSL_CTX *ctx, const char *sandbox_id) {
        return require_sandbox(SSL_CTX_get0_param(ctx), sandbox_id);
}

int tls_client_new(SSL_CTX *ctx, int fd, const char *host, const char *sandbox_id, SSL **ret) {
        _cleanup_(SSL_freep) SSL *ssl = NULL;
        X509_VERIFY_PARAM *param;
        bool ip;
        int r;

        if (!ctx || fd < 0 || !host || !host[0])
                return -EINVAL;
        ip = host_is_ip(host);
        ssl = SSL_new(ctx);
        if (!ssl)
                return -ENOMEM;
        param = SSL_get0_param(ssl);
        if (sandbox_id) {
                /* The sandbox's name and the address: OpenSSL enforces both (the host list, then
                 * the IP address), so a neighbour's runtime on the same address fails the first
                 * and a certificate of this sandbox's served elsewhere the second. */
                r = require_sandbox(param, sandbox_id);
                if (r < 0)
                        return r;
                /* No SNI with the sandbox's name: it would say in the clear which sandbox is
                 * reached. A DNS host is sent, as without an id. */
                if (ip) {
                        if (X509_VERIFY_PARAM_set1_ip_asc(param, host) != 1)
                                return -EINVAL;
                } else {
                        char *copy;

                        if (SSL_set_tlsext_host_name(ssl, host) != 1)
                                return -ENOMEM;
                        if (pthread_once(&second_name_once, second_name_init) != 0 || second_name_index < 0)
                                return -ENOMEM;
                        copy = strdup(host);
                        if (!copy || SSL_set_ex_data(ssl, second_name_index, copy) != 1) {
                                free(copy);
                                return -ENOMEM;
                        }
                        SSL_set_verify(ssl, SSL_VERIFY_PEER, verify_second_name);
                }
        } else if (ip) {
                if (X509_VERIFY_PARAM_set1_ip_asc(param, host) != 1)
                        return -EINVAL;
        } else {
                X509_VERIFY_PARAM_set_hostflags(param, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
                if (X509_VERIFY_PARAM_set1_host(param, host, 0) != 1 || SSL_set_tlsext_host_name(ssl, host) != 1)
                        return -EINVAL;
        }
        if (SSL_set_fd(ssl, fd) != 1)
                return -EBADF;
        SSL_set_connect_state(ssl);
        *ret = TAKE_PTR(ssl);
        return 0;
}

const char *tls_handshake_error(SSL *ssl, int ssl_ret, char *buf, size_t size) {
        long v = SSL_get_verify_result(ssl);
        unsigned long e;
        char detail[200] = "";

        if (v == X509_V_ERR_HOSTNAME_MISMATCH) {
                const char *want = X509_VERIFY_PARAM_get0_host(SSL_get0_param(ssl), 0);
                size_t n = want ? strlen(want) : 0, d = strlen("." TLS_SANDBOX_DOMAIN);

                if (n > d && streq(want + n - d, "." TLS_SANDBOX_DOMAIN)) {
                        snprintf(buf, size, "the runtime's TLS certificate was made for another sandbox than %.*s "
                                 "(an impostor: another sandbox's runtime, or a redirected connection)",
                                 (int) (n - d), want);
                        ERR_clear_error();
                        return buf;
                }
        }
        switch (v) {
        case X509_V_OK:
                break;
        case X509_V_ERR_HOSTNAME_MISMATCH:
        case X509_V_ERR_IP_ADDRESS_MISMATCH:
                snprintf(buf, size, "the runtime's TLS certificate names another address than the one dialled "
                         "(an impostor, or a certificate made for another sandbox)");
                ERR_clear_error();
                return buf;
        case X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT:
        case X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN:
        case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY:
        case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT:
        case X509_V_ERR_CERT_SIGNATURE_FAILURE:
        case X509_V_ERR_UNABLE_TO_VERIFY_LEAF_SIGNATURE:
                snprintf(buf, size, "the runtime's TLS certificate was not issued by the CA this client trusts "
                         "(agentd's runtime CA): %s", X509_verify_cert_error_string(v));
                ERR_clear_error();
                return buf;
        default:
                snprintf(buf, size, "the runtime's TLS certificate was refused: %s", X509_verify_cert_error_string(v));
                ERR_clear_error();
                return buf;
        }
        e = ERR_peek_last_error();
        if (e)
                ERR_error_string_n(e, detail, sizeof(detail));
        ERR_clear_error();
        if (SSL_get_error(ssl, ssl_ret) == SSL_ERROR_SYSCALL && !detail[0])
                snprintf(buf, size, "the connection closed during the TLS handshake (is the runtime serving "
                         "plain HTTP?)");
        else
                snprintf(buf, size, "TLS handshake failed%s%s", detail[0] ? ": " : "", detail);
        return buf;
}

/* Map an OpenSSL result to -EAGAIN plus the readiness it waits for, -EPIPE or an error. */
static int step_result(SSL *ssl, int n, bool reading, uint32_t *ret_events) {
        switch (SSL_get_error(ssl, n)) {
        case SSL_ERROR_WANT_READ:
                *ret_events = EPOLLIN;
                return -EAGAIN;
        case SSL_ERROR_WANT_WRITE:
                *ret_events = EPOLLOUT;
                return -EAGAIN;
        case SSL_ERROR_ZERO_RETURN:
                ERR_clear_error();
                return -EPIPE;
        case SSL_ERROR_SYSCALL:
                /* A close without close_notify; for a reader it is the end of the stream too. */
                ERR_clear_error();
                if (errno == EAGAIN) {
                        *ret_events = reading ? EPOLLIN : EPOLLOUT;
                        return -EAGAIN;
                }
                return reading || errno == 0 || errno == EPIPE ? -EPIPE : -(errno ?: EIO);
        default:
                ERR_clear_error();
                return -EPROTO;
        }
}

int tls_handshake_step(SSL *ssl, uint32_t *ret_events) {
        int n;

        ERR_clear_error();
        errno = 0;
        n = SSL_do_handshake(ssl);
        if (n == 1)
                return 0;
        return step_result(ssl, n, false, ret_events);
}

ssize_t tls_read(SSL *ssl, void *buf, size_t size, uint32_t *ret_events) {
        size_t got = 0;
        int n;

        ERR_clear_error();
        errno = 0;
        n = SSL_read_ex(ssl, buf, size, &got);
        if (n == 1)
                return (ssize_t) got;
        return step_result(ssl, n, true, ret_events);
}

ssize_t tls_write(SSL *ssl, const void *buf, size_t size, uint32_t *ret_events) {
        size_t put = 0;
        int n;

        if (size == 0)
                return 0;
        ERR_clear_error();
        errno = 0;
        n = SSL_write_ex(ssl, buf, size, &put);
        if (n == 1)
                return (ssize_t) put;
        return step_result(ssl, n, false, ret_events);
}

bool tls_url_is_secure(const char *url) {
        return url && (strncasecmp(url, "https://", 8) == 0 || strncasecmp(url, "wss://", 6) == 0);
}

/* SPDX-License-Identifier: MIT */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/bn.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509v3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "macro.h"
#include "runtime-ca.h"
#include "tls.h"

#define CA_YEARS 10
#define CLOCK_SKEW_SEC 300 /* notBefore this far back: a node whose clock is a little behind */

struct RuntimeCA {
        uint64_t last_issue;
        EVP_PKEY *key;
        X509 *cert;
        char *pem;
};

RuntimeCA *runtime_ca_free(RuntimeCA *ca) {
        if (!ca)
                return NULL;
        EVP_PKEY_free(ca->key);
        X509_free(ca->cert);
        free(ca->pem);
        free(ca);
        return NULL;
}

const char *runtime_ca_pem(const RuntimeCA *ca) {
        return ca->pem;
}

const char *runtime_ca_default_dir(void) {
        static char dir[512];

        if (!dir[0]) {
                const char *state = getenv("STATE_DIRECTORY");
                /* STATE_DIRECTORY may list several, separated by ':'; agentd.service names one. */
                snprintf(dir, sizeof(dir), "%.*s/runtime-ca", state ? (int) strcspn(state, ":") : 17,
                         state ?: "/var/lib/agentix");
        }
        return dir;
}

/* "WHAT PATH: why", with OpenSSL's reason when it has one. */
static int set_error(char **ret_error, int r, const char *what, const char *path) {
        char detail[256] = "";
        unsigned long e = ERR_peek_last_error();

        if (e)
                ERR_error_string_n(e, detail, sizeof(detail));
        ERR_clear_error();
        if (ret_error) {
                if (asprintf(ret_error, "%s %s: %s%s%s", what, path, strerror(r < 0 ? -r : r), detail[0] ? ": " : "",
                             detail) < 0)
                        *ret_error = NULL;
        }
        return r;
}

static EVP_PKEY *new_p256_key(void) {
        return EVP_EC_gen("P-256");
}

static int random_serial(X509 *x) {
        unsigned char b[16];
        BIGNUM *bn;
        int ok;

        if (RAND_bytes(b, sizeof(b)) != 1)
                return -EIO;
        b[0] &= 0x7f; /* positive */
        b[0] |= 0x01; /* and 16 bytes long */
        bn = BN_bin2bn(b, sizeof(b), NULL);
        ok = bn && BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(x)) != NULL;
        BN_free(bn);
        return ok ? 0 : -EIO;
}

static int add_ext(X509 *x, X509 *issuer, int nid, const char *value) {
        X509V3_CTX ctx;
        X509_EXTENSION *ext;
        int ok;

        X509V3_set_ctx(&ctx, issuer, x, NULL, NULL, 0);
        ext = X509V3_EXT_conf_nid(NULL, &ctx, nid, value);
        if (!ext)
                return -EINVAL;
        ok = X509_add_ext(x, ext, -1);
        X509_EXTENSION_free(ext);
        return ok ? 0 : -EIO;
}

static char *to_pem(X509 *cert, EVP_PKEY *key, size_t *ret_size) {
        BIO *bio = BIO_new(BIO_s_secmem());
        char *data, *pem = NULL;
        long n;

        if (!bio)
                return NULL;
        if ((cert && PEM_write_bio_X509(bio, cert) != 1) ||
            (key && PEM_write_bio_PrivateKey(bio, key, NULL, NULL, 0, NULL, NULL) != 1))
                goto out;
        n = BIO_get_mem_data(bio, &data);
        if (n <= 0)
                goto out;
        pem = OPENSSL_malloc((size_t) n + 1);
        if (!pem)
                goto out;
        memcpy(pem, data, (size_t) n);
        pem[n] = 0;
        if (ret_size)
                *ret_size = (size_t) n;
out:
        BIO_free(bio);
        return pem;
}

static int make_ca(RuntimeCA *ca) {
        char host[256] = "", cn[320];
        X509_NAME *name;

        ca->key = new_p256_key();
        ca->cert = X509_new();
        if (!ca->key || !ca->cert)
                return -ENOMEM;
        (void) gethostname(host, sizeof(host) - 1);
        snprintf(cn, sizeof(cn), "agentix runtime CA on %s", host[0] ? host : "this host");
        name = X509_get_subject_name(ca->cert);
        if (X509_set_version(ca->cert, 2) != 1 || random_serial(ca->cert) < 0 ||
            !X509_gmtime_adj(X509_getm_notBefore(ca->cert), -CLOCK_SKEW_SEC) ||
            !X509_gmtime_adj(X509_getm_notAfter(ca->cert), (long) CA_YEARS * 365 * 24 * 3600) ||
            X509_NAME_add_entry_by_txt(name, "O", MBSTRING_UTF8, (const unsigned char *) "agentix", -1, -1, 0) != 1 ||
            X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8, (const unsigned char *) cn, -1, -1, 0) != 1 ||
            X509_set_issuer_name(ca->cert, name) != 1 || X509_set_pubkey(ca->cert, ca->key) != 1 ||
            add_ext(ca->cert, ca->cert, NID_basic_constraints, "critical,CA:TRUE,pathlen:0") < 0 ||
            add_ext(ca->cert, ca->cert, NID_key_usage, "critical,keyCertSign,cRLSign") < 0 ||
            add_ext(ca->cert, ca->cert, NID_subject_key_identifier, "hash") < 0 ||
            X509_sign(ca->cert, ca->key, EVP_sha256()) <= 0)
                return -EIO;
        return 0;
}

/* Write data to dir/name with mode, whole or not at all (a temporary file renamed). */
static int write_file(const char *dir, const char *name, const char *data, mode_t mode) {
        _cleanup_free_ char *path = NULL, *tmp = NULL;
        _cleanup_close_ int fd = -EBADF;
        size_t left = strlen(data);

        if (asprintf(&path, "%s/%s", dir, name) < 0 || asprintf(&tmp, "%s/.%s.new", dir, name) < 0)
                return -ENOMEM;
        (void) unlink(tmp);
        fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode);
        if (fd < 0)
                return negative_errno();
        while (left > 0) {
                ssize_t n = write(fd, data, left);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        int r = negative_errno();
                        (void) unlink(tmp);
                        return r;
                }
                data += n;
                left -= (size_t) n;
        }
        if (fsync(fd) < 0 || rename(tmp, path) < 0) {
                int r = negative_errno();
                (void) unlink(tmp);
                return r;
        }
        return 0;
}

static int read_pem(const char *dir, const char *name, bool key, void **ret) {
        _cleanup_free_ char *path = NULL;
        _cleanup_fclose_ FILE *f = NULL;

        if (asprintf(&path, "%s/%s", dir, name) < 0)
                return -ENOMEM;
        f = fopen(path, "re");
        if (!f)
                return negative_errno();
        *ret = key ? (void *) PEM_read_PrivateKey(f, NULL, NULL, (void *) "")
                   : (void *) PEM_read_X509(f, NULL, NULL, NULL);
        return *ret ? 0 : -EBADMSG;
}

int runtime_ca_open(const char *dir, RuntimeCA **ret, char **ret_error) {
        _cleanup_free_ char *key_path = NULL, *cert_path = NULL;
        RuntimeCA *ca;
        bool has_key, has_cert;
        int r;

        if (ret_error)
                *ret_error = NULL;
        if (mkdir(dir, 0700) < 0 && errno != EEXIST)
                return set_error(ret_error, negative_errno(), "Cannot make", dir);
        if (asprintf(&key_path, "%s/ca.key", dir) < 0 || asprintf(&cert_path, "%s/ca.crt", dir) < 0)
                return -ENOMEM;
        has_key = access(key_path, F_OK) == 0;
        has_cert = access(cert_path, F_OK) == 0;
        if (has_key != has_cert) {
                if (ret_error && asprintf(ret_error, "%s holds only one of ca.key and ca.crt: remove it to make a "
                                          "new runtime CA", dir) < 0)
                        *ret_error = NULL;
                return -ENOENT;
        }

        ca = calloc(1, sizeof(*ca));
        if (!ca)
                return -ENOMEM;
        if (has_key) {
                r = read_pem(dir, "ca.key", true, (void **) &ca->key);
                if (r < 0) {
                        set_error(ret_error, r, "Cannot read the CA key in", dir);
                        goto fail;
                }
                r = read_pem(dir, "ca.crt", false, (void **) &ca->cert);
                if (r < 0) {
                        set_error(ret_error, r, "Cannot read the CA certificate in", dir);
                        goto fail;
                }
                if (X509_check_private_key(ca->cert, ca->key) != 1) {
                        r = set_error(ret_error, -EBADMSG, "ca.key does not belong to ca.crt in", dir);
                        goto fail;
                }
        } else {
                _cleanup_free_ char *key_pem = NULL;
                size_t n = 0;
                char *p;

                r = make_ca(ca);
                if (r < 0) {
                        set_error(ret_error, r, "Cannot make a runtime CA in", dir);
                        goto fail;
                }
                p = to_pem(NULL, ca->key, &n);
                if (!p || !(key_pem = strdup(p))) {
                        if (p)
                                OPENSSL_clear_free(p, n);
                        r = -ENOMEM;
                        goto fail;
                }
                OPENSSL_clear_free(p, n);
                /* The key first: a crash between the two leaves "one alone", said clearly. */
                r = write_file(dir, "ca.key", key_pem, 0600);
                explicit_bzero(key_pem, strlen(key_pem));
                if (r < 0) {
                        set_error(ret_error, r, "Cannot write the CA key to", dir);
                        goto fail;
                }
        }
        {
                char *p = to_pem(ca->cert, NULL, NULL);
                ca->pem = p ? strdup(p) : NULL;
                OPENSSL_free(p);
                if (!ca->pem) {
                        r = -ENOMEM;
                        goto fail;
                }
        }
        if (!has_cert) {
                r = write_file(dir, "ca.crt", ca->pem, 0644);
                if (r < 0) {
                        set_error(ret_error, r, "Cannot write the CA certificate to", dir);
                        goto fail;
                }
        }
        *ret = ca;
        return 0;
fail:
        runtime_ca_free(ca);
        return r;
}

static bool host_is_plain(const char *host) {
        /* What may follow "IP:" or "DNS:" in a subjectAltName line: no ',' or ':' tricks. */
        for (const char *p = host; *p; p++)
                if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
                      *p == '.' || *p == '-' || *p == ':'))
                        return false;
        return host[0] && strlen(host) < 254;
}

uint64_t runtime_ca_next_issue(RuntimeCA *ca) {
        struct timespec ts;
        uint64_t now;

        clock_gettime(CLOCK_REALTIME, &ts);
        now = (uint64_t) ts.tv_sec * 1000000ULL + (uint64_t) ts.tv_nsec / 1000ULL;
        ca->last_issue = MAX(now, ca->last_issue + 1);
        return ca->last_issue;
}

int runtime_ca_issue(RuntimeCA *ca, const char *host, const char *sandbox_id, uint64_t not_after, char **ret_pem,
                     size_t *ret_size) {
        unsigned char addr[16];
        char san[400], sandbox_name[TLS_SANDBOX_NAME_MAX];
        X509_NAME *name;
        EVP_PKEY *key = NULL;
        X509 *x = NULL;
        time_t now = time(NULL);
        bool ip = inet_pton(AF_INET, host, addr) == 1 || inet_pton(AF_INET6, host, addr) == 1;
        int r = -EIO;

        if (!host_is_plain(host) || (!ip && strchr(host, ':')) || tls_sandbox_name(sandbox_id, sandbox_name, sizeof(sandbox_name)) < 0)
                return -EINVAL;
        if (not_after <= (uint64_t) now + CLOCK_SKEW_SEC)
                not_after = (uint64_t) now + CLOCK_SKEW_SEC;
        /* The address, which clients that know no more check, and the sandbox's name, which
         * tells it from its neighbours on the same address (a swarm node's). */
        snprintf(san, sizeof(san), "%s:%s,DNS:%s", ip ? "IP" : "DNS", host, sandbox_name);
        key = new_p256_key();
        x = X509_new();
        if (!key || !x) {
                r = -ENOMEM;
                goto out;
        }
        name = X509_get_subject_name(x);
        if (X509_set_version(x, 2) != 1 || random_serial(x) < 0 ||
            !X509_gmtime_adj(X509_getm_notBefore(x), -CLOCK_SKEW_SEC) ||
            !ASN1_TIME_set(X509_getm_notAfter(x), (time_t) not_after) ||
            X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8, (const unsigned char *) host, -1, -1, 0) != 1 ||
            X509_set_issuer_name(x, X509_get_subject_name(ca->cert)) != 1 || X509_set_pubkey(x, key) != 1 ||
            add_ext(x, ca->cert, NID_basic_constraints, "critical,CA:FALSE") < 0 ||
            add_ext(x, ca->cert, NID_key_usage, "critical,digitalSignature") < 0 ||
            add_ext(x, ca->cert, NID_ext_key_usage, "serverAuth") < 0 ||
            add_ext(x, ca->cert, NID_subject_alt_name, san) < 0 ||
            add_ext(x, ca->cert, NID_authority_key_identifier, "keyid:always") < 0 ||
            X509_sign(x, ca->key, EVP_sha256()) <= 0)
                goto out;
        *ret_pem = to_pem(x, key, ret_size);
        r = *ret_pem ? 0 : -ENOMEM;
out:
        ERR_clear_error();
        X509_free(x);
        EVP_PKEY_free(key);
        return r;
}

/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/kdf.h>
#include <openssl/params.h>
#include <openssl/rand.h>
#include <string.h>

#include "tls-handover.h"

#define MAGIC "AXTLS2"
#define MAGIC_LEN 6
#define ISSUED_LEN 8
#define HEAD_LEN (MAGIC_LEN + ISSUED_LEN) /* in the clear, authenticated */
#define SALT_LEN 16
#define NONCE_LEN 12
#define TAG_LEN 16
#define KEY_LEN 32
#define OVERHEAD (HEAD_LEN + SALT_LEN + NONCE_LEN + TAG_LEN)

static int derive_key(const char *token, const unsigned char *salt, unsigned char key[static KEY_LEN]) {
        EVP_KDF *kdf = EVP_KDF_fetch(NULL, "HKDF", NULL);
        EVP_KDF_CTX *ctx = kdf ? EVP_KDF_CTX_new(kdf) : NULL;
        OSSL_PARAM params[5];
        int r = -EIO;

        if (!token || !token[0]) {
                r = -EINVAL;
                goto out;
        }
        if (!ctx)
                goto out;
        params[0] = OSSL_PARAM_construct_utf8_string(OSSL_KDF_PARAM_DIGEST, (char *) "SHA256", 0);
        params[1] = OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_KEY, (void *) token, strlen(token));
        params[2] = OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_SALT, (void *) salt, SALT_LEN);
        params[3] = OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_INFO, (void *) "agentix tls handover",
                                                      strlen("agentix tls handover"));
        params[4] = OSSL_PARAM_construct_end();
        if (EVP_KDF_derive(ctx, key, KEY_LEN, params) == 1)
                r = 0;
out:
        EVP_KDF_CTX_free(ctx);
        EVP_KDF_free(kdf);
        return r;
}

int tls_handover_seal(const char *token, uint64_t issued, const char *pem, size_t size, Buffer *ret) {
        unsigned char key[KEY_LEN], *p;
        EVP_CIPHER_CTX *ctx = NULL;
        int n = 0, r;

        if (size == 0 || size + OVERHEAD > TLS_HANDOVER_MAX)
                return -EINVAL;
        r = buffer_reserve(ret, size + OVERHEAD);
        if (r < 0)
                return r;
        p = buffer_data(ret) + ret->len;
        memcpy(p, MAGIC, MAGIC_LEN);
        for (size_t i = 0; i < ISSUED_LEN; i++)
                p[MAGIC_LEN + i] = (unsigned char) (issued >> (8 * (ISSUED_LEN - 1 - i)));
        if (RAND_bytes(p + HEAD_LEN, SALT_LEN + NONCE_LEN) != 1)
                return -EIO;
        r = derive_key(token, p + HEAD_LEN, key);
        if (r < 0)
                return r;
        r = -EIO;
        ctx = EVP_CIPHER_CTX_new();
        if (!ctx || EVP_EncryptInit_ex(ctx, EVP_aes_256_gcm(), NULL, key, p + HEAD_LEN + SALT_LEN) != 1 ||
            EVP_EncryptUpdate(ctx, NULL, &n, p, HEAD_LEN) != 1 ||
            EVP_EncryptUpdate(ctx, p + HEAD_LEN + SALT_LEN + NONCE_LEN, &n, (const unsigned char *) pem, (int) size) != 1 ||
            (size_t) n != size ||
            EVP_EncryptFinal_ex(ctx, p + HEAD_LEN + SALT_LEN + NONCE_LEN + size, &n) != 1 ||
            EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG, TAG_LEN, p + OVERHEAD - TAG_LEN + size) != 1)
                goto out;
        ret->len += size + OVERHEAD;
        r = 0;
out:
        OPENSSL_cleanse(key, sizeof(key));
        EVP_CIPHER_CTX_free(ctx);
        return r;
}

int tls_handover_open(const char *token, const void *message, size_t size, uint64_t after, uint64_t *ret_issued,
                      char **ret_pem, size_t *ret_size) {
        const unsigned char *m = message;
        unsigned char key[KEY_LEN];
        EVP_CIPHER_CTX *ctx = NULL;
        char *pem = NULL;
        uint64_t issued = 0;
        size_t len;
        int n = 0, r;

        if (size <= OVERHEAD || size > TLS_HANDOVER_MAX || memcmp(m, MAGIC, MAGIC_LEN) != 0)
                return -EBADMSG;
        len = size - OVERHEAD;
        r = derive_key(token, m + HEAD_LEN, key);
        if (r < 0)
                return r;
        pem = OPENSSL_malloc(len + 1);
        ctx = EVP_CIPHER_CTX_new();
        r = -ENOMEM;
        if (!pem || !ctx)
                goto out;
        r = -EBADMSG;
        if (EVP_DecryptInit_ex(ctx, EVP_aes_256_gcm(), NULL, key, m + HEAD_LEN + SALT_LEN) != 1 ||
            EVP_DecryptUpdate(ctx, NULL, &n, m, HEAD_LEN) != 1 ||
            EVP_DecryptUpdate(ctx, (unsigned char *) pem, &n, m + HEAD_LEN + SALT_LEN + NONCE_LEN, (int) len) != 1 ||
            EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_TAG, TAG_LEN, (void *) (m + size - TAG_LEN)) != 1 ||
            EVP_DecryptFinal_ex(ctx, (unsigned char *) pem + n, &n) != 1)
                goto out;
        pem[len] = 0;
        /* Authenticated above: only now is issued agentd's word. */
        for (size_t i = 0; i < ISSUED_LEN; i++)
                issued = issued << 8 | m[MAGIC_LEN + i];
        if (issued <= after) {
                r = -ESTALE;
                goto out;
        }
        if (ret_issued)
                *ret_issued = issued;
        *ret_pem = TAKE_PTR(pem);
        if (ret_size)
                *ret_size = len;
        r = 0;
out:
        OPENSSL_cleanse(key, sizeof(key));
        EVP_CIPHER_CTX_free(ctx);
        if (pem)
                OPENSSL_clear_free(pem, len + 1);
        return r;
}

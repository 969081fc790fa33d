/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stdio.h>
#include <string.h>

#include "proxy-token.h"

int runtime_token_derive(const char *runtime_token, const char *purpose, char ret[static PROXY_TOKEN_LEN + 1]) {
        unsigned char mac[EVP_MAX_MD_SIZE];
        unsigned int n = 0;

        if (!runtime_token || !runtime_token[0])
                return -EINVAL;
        if (!HMAC(EVP_sha256(), runtime_token, (int) strlen(runtime_token), (const unsigned char *) purpose,
                  strlen(purpose), mac, &n) ||
            n * 2 != PROXY_TOKEN_LEN)
                return -EIO;
        for (unsigned i = 0; i < n; i++)
                snprintf(ret + 2 * i, 3, "%02x", mac[i]);
        return 0;
}

int proxy_token(const char *runtime_token, unsigned port, char ret[static PROXY_TOKEN_LEN + 1]) {
        char msg[32];

        if (port == 0 || port > 65535)
                return -EINVAL;
        (void) snprintf(msg, sizeof(msg), "agentix-proxy:%u", port);
        return runtime_token_derive(runtime_token, msg, ret);
}

bool proxy_token_valid(const char *runtime_token, unsigned port, const char *token, size_t len) {
        char want[PROXY_TOKEN_LEN + 1];

        if (len != PROXY_TOKEN_LEN || proxy_token(runtime_token, port, want) < 0)
                return false;
        return CRYPTO_memcmp(want, token, PROXY_TOKEN_LEN) == 0;
}

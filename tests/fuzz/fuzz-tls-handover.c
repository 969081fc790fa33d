/* SPDX-License-Identifier: MIT */
/* What POST /tls/install reads from anyone who reaches a runtime waiting for its certificate:
 * a sealed certificate (tls-handover.h), then, once it opened, a PEM text for a server
 * context (tls.h). Arbitrary bytes never open with a token they were not sealed with; a message
 * sealed with the token opens to what was sealed (and the count it was sealed with), and one
 * changed byte, the count's included, makes it refused. */
#include <errno.h>
#include <openssl/crypto.h>
#include <string.h>

#include "fuzz-util.h"
#include "tls-handover.h"
#include "tls.h"

#define TOKEN "fuzz-token-0123456789abcdef"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        Buffer sealed = BUFFER_NULL;
        char *pem = NULL;
        size_t n = 0;
        uint64_t issued = 0, want = 0;
        SSL_CTX *ctx = NULL;
        char *error = NULL;

        /* As it comes off the network. */
        CHECK(tls_handover_open(TOKEN, data, size, 0, &issued, &pem, &n) == -EBADMSG);

        /* The same bytes as a sealed plain text: they come back as they were, once. */
        for (size_t i = 0; i < size && i < 8; i++)
                want = want << 8 | data[i];
        want |= 1; /* agentd's counts are never 0 */
        if (size > 0 && size <= 4096 && tls_handover_seal(TOKEN, want, (const char *) data, size, &sealed) == 0) {
                /* Not above what was installed: refused, whatever it holds. */
                CHECK(tls_handover_open(TOKEN, buffer_data(&sealed), sealed.len, want, &issued, &pem, &n) == -ESTALE);
                CHECK(tls_handover_open(TOKEN, buffer_data(&sealed), sealed.len, want - 1, &issued, &pem, &n) == 0);
                CHECK(n == size && memcmp(pem, data, size) == 0 && issued == want);
                /* What a runtime does with an opened text: a server context, or an error. */
                if (tls_server_context_new(pem, n, &ctx, &error) == 0)
                        SSL_CTX_free(ctx);
                free(error);
                OPENSSL_clear_free(pem, n + 1);
                buffer_data(&sealed)[data[0] % sealed.len] ^= 0x20;
                CHECK(tls_handover_open(TOKEN, buffer_data(&sealed), sealed.len, 0, &issued, &pem, &n) == -EBADMSG);
        }
        buffer_done(&sealed);
        return 0;
}

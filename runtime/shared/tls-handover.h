/* SPDX-License-Identifier: MIT */
#pragma once

/* How agentd hands a runtime its TLS certificate and key without a file, an environment
 * variable or a label: over the network to the runtime's POST /tls/install, sealed with a key
 * only agentd and that runtime know, derived from the runtime's token (HKDF-SHA256, a random
 * salt per message) and AES-256-GCM. Anyone who reads or changes the message on the way learns
 * nothing and cannot make the runtime take another key; the runtime serves nothing but /health
 * and /tls/install in the clear until it has its certificate (agentix-server(8)).
 *
 * Sealed message: "AXTLS2" | issued (8, big endian) | salt (16) | nonce (12) | ciphertext |
 * tag (16); the magic and issued are authenticated too. The plain text is the PEM of the
 * certificate (and chain) and of its key. issued is agentd's count (runtime_ca_next_issue(),
 * microseconds since the epoch, rising): a runtime takes no message whose issued is not above
 * the one it installed last, so a message recorded on the way (the first goes over plain HTTP)
 * and sent again later cannot put back an older certificate. Not the certificate's notBefore:
 * that has whole seconds (two issued in one second would tie) and is set back for clock skew. */

#include <stddef.h>

#include "buffer.h"

#define TLS_HANDOVER_PATH "/tls/install"
#define TLS_HANDOVER_MAX (64u * 1024u)

#include <stdint.h>

int tls_handover_seal(const char *token, uint64_t issued, const char *pem, size_t size, Buffer *ret);
/* *ret_pem: malloc'ed, NUL-terminated; the caller clears it (OPENSSL_clear_free) after use.
 * -EBADMSG when the message was not sealed with this token or was changed; -ESTALE when it is
 * genuine but its issued is not above after (the installed certificate's: a replay). */
int tls_handover_open(const char *token, const void *message, size_t size, uint64_t after, uint64_t *ret_issued,
                      char **ret_pem, size_t *ret_size);

/* SPDX-License-Identifier: MIT */
#pragma once

/* How agentd hands a runtime its TLS certificate and key without a file, an environment
 * variable or a label: over the network to the runtime's POST /tls/install, sealed with a key
 * only agentd and that runtime know, derived from the runtime's token (HKDF-SHA256, a random
 * salt per message) and AES-256-GCM. Anyone who reads or changes the message on the way learns
 * nothing and cannot make the runtime take another key; the runtime serves nothing but /health
 * and /tls/install in the clear until it has its certificate (agentix-server(8)).
 *
 * Sealed message: "AXTLS1" | salt (16) | nonce (12) | ciphertext | tag (16). The plain text is
 * the PEM of the certificate (and chain) and of its key. */

#include <stddef.h>

#include "buffer.h"

#define TLS_HANDOVER_PATH "/tls/install"
#define TLS_HANDOVER_MAX (64u * 1024u)

int tls_handover_seal(const char *token, const char *pem, size_t size, Buffer *ret);
/* *ret_pem: malloc'ed, NUL-terminated; the caller clears it (OPENSSL_clear_free) after use.
 * -EBADMSG when the message was not sealed with this token or was changed. */
int tls_handover_open(const char *token, const void *message, size_t size, char **ret_pem, size_t *ret_size);

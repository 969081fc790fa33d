/* SPDX-License-Identifier: MIT */
#pragma once

/* TLS for runtime traffic (OpenSSL): the contexts agentix-server, agentix-e2b and agentd's
 * metrics endpoint serve with, the client context every libagentix connection to an https://
 * runtime verifies with (agentd's runtime CA, and the address in the URL), and non-blocking
 * reads and writes that say which way the socket must become ready (a TLS read may need to
 * write, and a write to read).
 *
 * The runtime's certificate is checked against the address the client dialled: an IP address
 * in the URL must be in the certificate's subjectAltName IP entries, a name in its DNS entries.
 * A client that knows which sandbox it wants checks the sandbox's name too (both must match):
 * agentd names each sandbox's runtime ID.sandbox.agentix in its certificate, because on a swarm
 * node every runtime has the node's address, and the address alone would let one sandbox's
 * runtime pass for its neighbour's. Nothing else (no system trust store) is trusted: the CA
 * given is the only anchor. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <openssl/ssl.h>

#include "macro.h"

DEFINE_TRIVIAL_CLEANUP_FUNC(SSL_CTX *, SSL_CTX_free);
DEFINE_TRIVIAL_CLEANUP_FUNC(SSL *, SSL_free);

/* A server context from one PEM text holding the certificate (then any intermediates) and its
 * private key, in any order. TLS 1.2 and 1.3 only. *ret_error (malloc'ed) says what is wrong. */
int tls_server_context_new(const char *pem, size_t size, SSL_CTX **ret, char **ret_error);
/* The same from two files (--tls-cert, --tls-key). */
int tls_server_context_from_files(const char *cert_path, const char *key_path, SSL_CTX **ret, char **ret_error);

/* A client context trusting only the CA certificate(s) in ca_pem; peers are verified. */
int tls_client_context_new(const char *ca_pem, size_t size, SSL_CTX **ret, char **ret_error);
/* The DNS name agentd's certificate for sandbox id's runtime carries beside its address. */
#define TLS_SANDBOX_DOMAIN "sandbox.agentix"
#define TLS_SANDBOX_NAME_MAX 80
/* "ID.sandbox.agentix" in buf; -EINVAL when id cannot be a DNS label (1-63 of a-z, 0-9, '-',
 * not starting or ending with '-'). */
int tls_sandbox_name(const char *id, char *buf, size_t size);

/* A client connection on the connected (or connecting) socket fd that will verify that the
 * peer's certificate names host (an IP address or a DNS name; brackets of an IPv6 URL host
 * removed by the caller) and, with sandbox_id, also that sandbox's name (tls_sandbox_name()).
 * Sets SNI for a DNS host (never the sandbox's name: that would say in the clear which sandbox
 * is reached). The SSL does not own fd. */
int tls_client_new(SSL_CTX *ctx, int fd, const char *host, const char *sandbox_id, SSL **ret);
/* For a client whose library does the handshake (curl, which checks the URL's host itself):
 * make ctx's connections also require sandbox id's name. */
int tls_context_require_sandbox(SSL_CTX *ctx, const char *sandbox_id);

/* After a failed handshake: one line a person can act on ("the runtime's certificate was not
 * issued by agentd's runtime CA", "names another address", ...), in buf. */
const char *tls_handshake_error(SSL *ssl, int ssl_ret, char *buf, size_t size);

/* Non-blocking steps on a socket. Each returns >= 0 (bytes, or 0 when the handshake is done),
 * -EAGAIN with *ret_events (EPOLLIN or EPOLLOUT) the socket must become ready for before the
 * same call is made again, -EPIPE when the peer closed the TLS session (reads: a close_notify
 * or a plain close), or another negative errno. */
int tls_handshake_step(SSL *ssl, uint32_t *ret_events);
ssize_t tls_read(SSL *ssl, void *buf, size_t size, uint32_t *ret_events);
ssize_t tls_write(SSL *ssl, const void *buf, size_t size, uint32_t *ret_events);

/* Whether a URL's scheme asks for TLS (https://, wss://). */
bool tls_url_is_secure(const char *url);

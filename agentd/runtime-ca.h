/* SPDX-License-Identifier: MIT */
#pragma once

/* agentd's certificate authority for runtime TLS: an ECDSA P-256 key and a self-signed CA
 * certificate in $STATE_DIRECTORY/runtime-ca/ (ca.key 0600, ca.crt), made at the first start
 * that needs them. The key never leaves agentd; Manager.RuntimeCA publishes the certificate,
 * which clients verify runtimes with. Each TLS sandbox gets a server certificate naming the
 * address its runtime URL names and the sandbox itself (DNS ID.sandbox.agentix, tls.h: on a
 * swarm node every runtime has the node's address), valid no longer than the sandbox may live,
 * issued here and handed over sealed (tls-handover.h).
 *
 * To rotate: stop agentd, remove the directory, start agentd. A new CA is made, and agentd
 * issues every TLS sandbox it adopts a new certificate (its old one no longer verifies). */

#include <stddef.h>
#include <stdint.h>

typedef struct RuntimeCA RuntimeCA;

/* dir: the directory of ca.key and ca.crt (made 0700 when missing). Neither file: a new CA;
 * both: loaded, and checked to belong together; one alone: an error (nothing is overwritten). */
int runtime_ca_open(const char *dir, RuntimeCA **ret, char **ret_error);
RuntimeCA *runtime_ca_free(RuntimeCA *ca);

/* The CA certificate, PEM. */
const char *runtime_ca_pem(const RuntimeCA *ca);

/* A server certificate for sandbox_id's runtime at host (an IP address or a DNS name), naming
 * both, valid until not_after (unix seconds; one in the past: a few minutes from now), with a
 * new key: *ret_pem holds the certificate then the key (OPENSSL_malloc'ed; free with
 * OPENSSL_clear_free(pem, size)). */
int runtime_ca_issue(RuntimeCA *ca, const char *host, const char *sandbox_id, uint64_t not_after, char **ret_pem,
                     size_t *ret_size);

/* What the next sealed handover carries for its runtime to refuse older ones with
 * (tls-handover.h): microseconds since the epoch, above every value this agentd gave before
 * (a later agentd's are above them as long as the clock does not go back). */
uint64_t runtime_ca_next_issue(RuntimeCA *ca);

/* The directory agentd keeps its CA in: $STATE_DIRECTORY/runtime-ca (or /var/lib/agentix/…). */
const char *runtime_ca_default_dir(void);

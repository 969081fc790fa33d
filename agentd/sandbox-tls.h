/* SPDX-License-Identifier: MIT */
#pragma once

/* A sandbox whose runtime serves TLS (its backend's Backend.tls, AgentdSandboxSpec.tls): once
 * the backend made it, or found it at start, agentd hands its runtime a certificate naming the
 * address its URL names and the sandbox (runtime-tls.h) and its URL becomes https://. Adopted
 * ones are asked first, and get a new certificate only when theirs does not verify (agentd's
 * CA changed, or agentd stopped before the runtime had one) or ends too soon or too late.
 *
 * A certificate ends with its sandbox (its expiry, plus SANDBOX_TLS_GRACE_SEC for the delete
 * to be done), and lives SANDBOX_TLS_LIFETIME_MAX_SEC at most: a key taken from a runtime is
 * worth nothing once its sandbox is gone. A sandbox whose expiry changes (Extend, SetTTL, a
 * claim from a pool) gets a new certificate, and so does one that lives on past its
 * certificate, SANDBOX_TLS_RENEW_BEFORE_SEC before its end. */

#include "sandbox.h"

#define SANDBOX_TLS_GRACE_SEC (10ULL * 60)
#define SANDBOX_TLS_LIFETIME_MAX_SEC (30ULL * 24 * 3600)
#define SANDBOX_TLS_RENEW_BEFORE_SEC (10ULL * 24 * 3600)

typedef void (*sandbox_tls_done_t)(Sandbox *s, const char *error);

/* Without TLS, done(s, NULL) at once; else done() later, from the loop (s->tls_handover is set
 * meanwhile; sandbox_free() stops it). A negative errno when it cannot start (done() is not
 * called). */
int sandbox_tls_secure(Sandbox *s, bool adopted, sandbox_tls_done_t done);

/* s's expiry changed: a new certificate for its runtime, from the loop (once what is on its
 * way is done; a paused sandbox's when it runs again). A no-op without TLS. */
void sandbox_tls_renew(Sandbox *s);

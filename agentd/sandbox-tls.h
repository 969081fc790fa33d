/* SPDX-License-Identifier: MIT */
#pragma once

/* A sandbox whose runtime serves TLS (its backend's Backend.tls, AgentdSandboxSpec.tls): once
 * the backend made it, or found it at start, agentd hands its runtime a certificate for the
 * address its URL names (runtime-tls.h) and its URL becomes https://. Adopted ones are asked
 * first, and get a new certificate only when theirs does not verify (agentd's CA changed, or
 * agentd stopped before the runtime had one). */

#include "sandbox.h"

typedef void (*sandbox_tls_done_t)(Sandbox *s, const char *error);

/* Without TLS, done(s, NULL) at once; else done() later, from the loop (s->tls_handover is set
 * meanwhile; sandbox_free() stops it). A negative errno when it cannot start (done() is not
 * called). */
int sandbox_tls_secure(Sandbox *s, bool adopted, sandbox_tls_done_t done);

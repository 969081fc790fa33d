/* SPDX-License-Identifier: MIT */
#pragma once

/* The claim of a pooled sandbox: runtime::claim over libagentix on agentd's event loop, made
 * with the runtime's start token (only agentd ever had it), giving the runtime the claimer's
 * new token and the create's env and workdir (agentix-server(8)). */

#include <systemd/sd-event.h>

typedef struct SandboxClaim SandboxClaim;

/* error: NULL when the runtime took the claim, else one line for a person. already_claimed:
 * the runtime says it was claimed before (a claim agentd made before it restarted). */
typedef void (*sandbox_claim_done_t)(SandboxClaim *claim, const char *error, bool already_claimed, void *userdata);

/* env: KEY=VALUE strings, NULL-terminated, or NULL; workdir or NULL. */
int sandbox_claim_run(sd_event *event, const char *url, const char *id, const char *ca_pem, const char *start_token, const char *new_token,
                      char *const *env, const char *workdir, sandbox_claim_done_t done, void *userdata,
                      SandboxClaim **ret);
/* Stop (the done callback is not called). */
SandboxClaim *sandbox_claim_free(SandboxClaim *claim);

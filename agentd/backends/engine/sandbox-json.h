/* SPDX-License-Identifier: MIT */
#pragma once

/* What every Engine API backend gives a sandbox's container or service: agentd's labels, which
 * adoption reads back, and the runtime's environment. */

#include <jansson.h>

#include "agentix/agentd-backend.h"

/* The caller's labels and agentd's org.agentix.* keys (the egress list as CIDRs separated by
 * spaces, "*" for none; network, runtime and platform for a pool's sandbox). NULL: no memory. */
json_t *sandbox_labels_json(const AgentdSandboxSpec *s, const char *bundle_id);
/* KEY=VALUE strings: AGENTIX_TOKEN, AGENTIX_CLAIMABLE=1 for a pool's sandbox, then the
 * caller's environment without those two (they are agentd's to set). NULL: no memory. */
json_t *sandbox_env_json(const AgentdSandboxSpec *s);

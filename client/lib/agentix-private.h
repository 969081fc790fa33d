/* SPDX-License-Identifier: MIT */
#pragma once

/* Not part of the public API (not installed): hooks for libagentix's own tests. */

#include "agentix.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Drop the current connection as if the network had; the client reconnects and resumes its
 * calls as it would after a real drop. */
AGENTIX_API void agentix_client_drop_for_testing(agentix_client *c);

#ifdef __cplusplus
}
#endif

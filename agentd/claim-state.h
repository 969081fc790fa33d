/* SPDX-License-Identifier: MIT */
#pragma once

/* What a claim of a pooled sandbox decided, kept where a restarted agentd finds it: a
 * container's labels cannot change after it was made, and they say only that it was made for a
 * pool. One JSON file per claimed sandbox, STATE/claims/ID.json (STATE: $STATE_DIRECTORY,
 * /var/lib/agentix under systemd's StateDirectory=agentix), written to a temporary file and
 * renamed over, so a reader sees the old claim or the new one, never half of one. Written
 * before the runtime is asked (a crash in between: the next agentd finishes the claim) and
 * removed when the sandbox goes. */

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct ClaimState {
        char *id;
        uid_t owner;
        char *token;             /* the claimer's (the start token is in the container) */
        uint64_t created_at;     /* claimed at, µs CLOCK_REALTIME */
        uint64_t expires_at;
        char *pool;
        char *bound_to;          /* bind_to_caller: the creator's unique bus name, or NULL */
        char **env;              /* KEY=VALUE, for a claim to finish after a restart */
        char *workdir;
        char **labels;           /* key=value, the caller's own */
} ClaimState;

ClaimState *claim_state_free(ClaimState *c);
/* The directory claims are kept in (made on first use). */
const char *claim_state_dir(void);
int claim_state_save(const ClaimState *c);
/* -ENOENT: no claim for id (a pool member nobody took). */
int claim_state_load(const char *id, ClaimState **ret);
int claim_state_remove(const char *id);

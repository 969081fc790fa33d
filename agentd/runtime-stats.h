/* SPDX-License-Identifier: MIT */
#pragma once

/* A sandbox's usage as its runtime reads it from inside (sandbox::stats over libagentix, on
 * agentd's loop): for a backend that cannot read it itself (no stats(): the Swarm backend,
 * whose manager has no stats for containers on other nodes). One reading per sandbox at a
 * time; whoever asks while one is on its way gets its answer. */

#include <systemd/sd-event.h>

#include "agentix/agentd-backend.h"

typedef struct RuntimeStats RuntimeStats;

/* Askers one reading answers at most; more get BackendUnavailable at once. */
#define RUNTIME_STATS_WAITERS_MAX 64
#define RUNTIME_STATS_DEADLINE_MS 5000

/* Ask through *slot (the sandbox's; NULL: no reading on its way, one is started). done() is
 * called once for this asker, never before this returns; *slot is NULL again after the
 * reading. A negative errno when the reading cannot start (done() is not called then). */
int runtime_stats_ask(sd_event *event, const char *url, const char *id, const char *token, const char *ca_pem, RuntimeStats **slot,
                      agentd_stats_t done,
                      void *userdata);

/* The sandbox is gone: every asker's done() with NoSuchSandbox. NULL. */
RuntimeStats *runtime_stats_free(RuntimeStats *rs);

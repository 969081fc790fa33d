/* SPDX-License-Identifier: MIT */
#pragma once

/* Sandbox.GetStats(): what a sandbox uses now, as its backend reads it (stats(), ABI 5) or,
 * for a backend without stats(), as its runtime does (runtime-stats.h), with
 * cpu_percent worked out here over the interval since the sandbox was last asked (or since it
 * was made, the first time): 100 is one CPU kept busy, as `docker stats` counts. */

#include <systemd/sd-bus.h>

#include "sandbox.h"

/* Ask s's backend; answer call with the a{sv} (a key left out: the backend cannot tell). 1 when
 * the answer is on its way, or a negative errno / error set (no backend support, say). */
int sandbox_stats_reply(Manager *m, Sandbox *s, sd_bus_message *call, sd_bus_error *error);

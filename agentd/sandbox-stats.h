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

/* s's usage, to done() (once, never before this returns): from its backend's stats(), else
 * from its runtime (runtime-stats.h); from its runtime too when the backend says it cannot
 * read (BackendUnavailable) while s runs. A negative errno when it cannot be asked (done() is not
 * called): -ENOTCONN not running, -EAGAIN paused with only its runtime to ask, -EBUSY too many
 * askers waiting. A runtime that serves TLS is verified against its backend's runtime_ca_pem. */
int sandbox_read_stats(sd_event *event, Sandbox *s, agentd_stats_t done, void *userdata);

/* SPDX-License-Identifier: MIT */
#pragma once

#include "agentix-module.h"

#define SANDBOX_STATS_SIGNATURE "() -> map"
#define SANDBOX_STATS_DOC "What the sandbox uses now, from its own cgroup: cpu_usec, memory_*, pids_*, net_*, io_*, time."

int sandbox_stats(agentix_call *call, const msgpack_object *argv, size_t argc);

/* SPDX-License-Identifier: MIT */
#pragma once

/* A container's usage from the kernel's own files, found through one of its processes (its
 * init, whose pid the engine's inspect gives): /proc/PID/cgroup says where its cgroup is, in
 * cgroup v2 (one hierarchy) or v1 (one per controller: cpuacct, memory, pids, blkio, mounted
 * under /sys/fs/cgroup/<controllers>), and /proc/PID/net/dev counts the interfaces of its
 * network namespace. Reading them costs a few small reads of in-memory files: no call to the
 * engine, cheap enough for every sandbox every second.
 *
 * root is put in front of /proc and /sys ("" for the real ones; tests give a directory of
 * their own). The cgroup path must name container_id, or the pid is not the container's any
 * more (it exited and the number was reused): -ESRCH. What a hierarchy does not have stays
 * AGENTD_STATS_UNKNOWN. */

#include <sys/types.h>

#include "agentix/agentd-backend.h"

int cgroup_stats_read(const char *root, pid_t pid, const char *container_id, AgentdSandboxStats *ret);

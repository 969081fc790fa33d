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

/* Under cgroup v1 the kernel counts a cgroup's block I/O (blkio.throttle.io_service_bytes) only
 * on a disk whose queue has blk-throttle on, and it turns that on for good once any cgroup has
 * a throttle rule for the disk: without one, every container reads 0 bytes (`docker stats`
 * too). agentd gives each sandbox a rule no disk reaches, on the disk below the engine's data.
 * *ret: that disk's node, "/dev/NAME" (the whole disk where dev is a partition: rules are per
 * disk). -ENODEV: dev is no block device's (overlay, tmpfs, btrfs' anonymous devices) or its
 * node is not at /dev/NAME. root as above. */
#define CGROUP_V1_COUNTING_RATE (UINT64_C(1) << 50) /* bytes/s: 1 PiB/s */
int cgroup_v1_counting_disk(const char *root, dev_t dev, char **ret);

/* SPDX-License-Identifier: MIT */
#pragma once

/* A container's usage from the kernel's own files. From the host (agentd's engine backends),
 * through one of its processes (its init, whose pid the engine's inspect gives):
 * /proc/PID/cgroup says where its cgroup is, in cgroup v2 (one hierarchy) or v1 (one per
 * controller: cpuacct, memory, pids, blkio, mounted under /sys/fs/cgroup/<controllers>), and
 * /proc/PID/net/dev counts the interfaces of its network namespace. From inside the container
 * (sandbox::stats, for backends whose engine agentd cannot read): cgroup_stats_read_own().
 * Reading them costs a few small reads of in-memory files: cheap enough for every sandbox
 * every second.
 *
 * root is put in front of /proc and /sys ("" for the real ones; tests give a directory of
 * their own). The cgroup path must name container_id, or the pid is not the container's any
 * more (it exited and the number was reused): -ESRCH. What a hierarchy does not have stays
 * CGROUP_STATS_UNKNOWN. */

#include <stdint.h>
#include <sys/types.h>

/* What a cgroup (and the network namespace beside it) used; agentd's AgentdSandboxStats and
 * sandbox::stats' keys alike. CGROUP_STATS_UNKNOWN where the files do not tell. */
#define CGROUP_STATS_UNKNOWN UINT64_MAX
typedef struct CgroupStats {
        uint64_t time;                  /* when read: µs since the epoch */
        uint64_t cpu_usec;              /* CPU time of all its processes, since it started */
        uint64_t memory_current;        /* bytes charged to it now (page cache included) */
        uint64_t memory_peak;           /* the most it was charged */
        uint64_t memory_limit;          /* unknown also when unlimited */
        uint64_t pids_current;
        uint64_t pids_limit;
        uint64_t net_rx_bytes;          /* the namespace's interfaces, loopback aside */
        uint64_t net_tx_bytes;
        uint64_t io_read_bytes;         /* block devices, since it started */
        uint64_t io_write_bytes;
} CgroupStats;

int cgroup_stats_read(const char *root, pid_t pid, const char *container_id, CgroupStats *ret);

/* The same from inside a container: its cgroup is the root of what is mounted at
 * /sys/fs/cgroup (a cgroup namespace under v2; under v1 the engine mounts each controller's
 * directory of the container there), its network namespace our own (/proc/self/net/dev).
 * -ENOENT: no cgroup files are mounted. */
int cgroup_stats_read_own(const char *root, CgroupStats *ret);

/* Under cgroup v1 the kernel counts a cgroup's block I/O (blkio.throttle.io_service_bytes) only
 * on a disk whose queue has blk-throttle on, and it turns that on for good once any cgroup has
 * a throttle rule for the disk: without one, every container reads 0 bytes (`docker stats`
 * too). agentd gives each sandbox a rule no disk reaches, on the disk below the engine's data.
 * *ret: that disk's node, "/dev/NAME" (the whole disk where dev is a partition: rules are per
 * disk). -ENODEV: dev is no block device's (overlay, tmpfs, btrfs' anonymous devices) or its
 * node is not at /dev/NAME. root as above. */
#define CGROUP_V1_COUNTING_RATE (UINT64_C(1) << 50) /* bytes/s: 1 PiB/s */
int cgroup_v1_counting_disk(const char *root, dev_t dev, char **ret);

/* SPDX-License-Identifier: MIT */
#pragma once

/* --max-processes: a pids cgroup of its own for the worker, so the worker and every process
 * its calls start (and whatever those leave behind) count against one bound; fork() fails with
 * EAGAIN past it. Needs a pids controller we may write to: cgroup v1's pids hierarchy, or a
 * delegated cgroup v2 subtree. Inside a container that is rarely the case, and the
 * container's own pids limit is what protects the host there. */

#include <sys/types.h>

typedef struct PidsLimit PidsLimit;

/* Create the cgroup below our own, with pids.max = max. A clear error when it cannot be had. */
int pids_limit_new(unsigned max, PidsLimit **ret);
/* Move a process (and so all it will fork) into the cgroup. */
int pids_limit_add(PidsLimit *p, pid_t pid);
/* Processes in the cgroup now. */
int pids_limit_current(PidsLimit *p, unsigned *ret);
/* Remove the cgroup (its processes must be gone). */
PidsLimit *pids_limit_free(PidsLimit *p);
const char *pids_limit_path(const PidsLimit *p);

/* SPDX-License-Identifier: MIT */
#pragma once

/* Everything the worker does to its own process before it runs any module code. */

#include "worker.h"

/* The lowest fd number the frame socket is moved to: far from 0/1/2, which children inherit. */
#define WORKER_FRAME_FD_MIN 10

/* Move the frame socket to an fd >= WORKER_FRAME_FD_MIN (close-on-exec), point fds 0 and 1 at
 * /dev/null (2 stays the server's stderr, for logs), close every other inherited fd, set
 * resource limits (no core dumps, RLIMIT_NOFILE soft = hard capped at 65536, optional
 * $AGENTIX_WORKER_RLIMIT_AS bytes and $AGENTIX_WORKER_RLIMIT_NPROC processes), die with the
 * server (PR_SET_PDEATHSIG), set no_new_privs and load the seccomp filter (unless
 * opts->no_seccomp). Must run while the process has one thread. Returns the new frame fd. */
int worker_confine(int frame_fd, const WorkerOptions *opts);

/* Was a seccomp filter loaded into this process? */
bool worker_seccomp_active(void);

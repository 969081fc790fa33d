/* SPDX-License-Identifier: MIT */
#pragma once

/* The worker: a process forked (and exec'd as `agentix-server --worker …`) by the server. It
 * reads CALL/IN/END_IN/CANCEL/SHUTDOWN frames (frame.h) from its frame socket, runs each call
 * on a thread of its own, and writes RESULT/ITEM/END/ERROR frames back. Exactly one terminal
 * frame per CALL, always — even after a CANCEL — so the server knows when a call's slot frees. */

#include <stdbool.h>
#include <stddef.h>

typedef struct WorkerOptions {
        const char *module_dir;      /* NULL: $AGENTIX_MODULE_DIR, else AGENTIX_MODULE_DIR_DEFAULT */
        const char *seccomp_profile; /* Docker-format JSON file; NULL: the built-in default profile */
        bool no_seccomp;             /* debugging only (--no-seccomp) */
        size_t max_frame;            /* largest frame payload accepted; 0: FRAME_DEFAULT_MAX */
        unsigned max_calls;          /* concurrent calls; 0: 1024 */
} WorkerOptions;

/* Run the worker on `frame_fd` until SHUTDOWN or EOF. Returns the process exit status. */
int worker_main(int frame_fd, const WorkerOptions *opts);

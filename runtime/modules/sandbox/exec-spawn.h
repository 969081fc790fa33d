/* SPDX-License-Identifier: MIT */
#pragma once

/* Starting `<shell> -c <command>` with posix_spawn(), or the command's program itself when it
 * is plain words and no shell was asked for (exec-plain.h). glibc implements it with
 * clone(CLONE_VM|CLONE_VFORK): no page tables are copied, so the cost does not grow with the
 * worker's size, and only async-signal-safe work runs in the child — safe in a multi-threaded
 * process. The child gets:
 *   - its own session and process group (POSIX_SPAWN_SETSID), so the whole tree can be killed;
 *   - every signal at its default disposition and an empty signal mask;
 *   - fds 0/1/2 as the options ask, and nothing else (closefrom(3) → close_range);
 *   - with a PTY, the slave opened by path after setsid(): it becomes the controlling terminal.
 * Exec failures come back as posix_spawn()'s return value (ENOENT: no such shell). */

#include "exec.h"

typedef struct ExecChild {
        pid_t pid;      /* = process group id = session id */
        int pidfd;      /* polls readable when the child exits; -EBADF if pidfd_open() is unavailable */
        int stdin_fd;   /* pipe write end (non-blocking); -EBADF for /dev/null or with a PTY */
        int stdout_fd;  /* pipe read end (non-blocking); -EBADF with a PTY */
        int stderr_fd;  /* pipe read end (non-blocking); -EBADF when merged or with a PTY */
        int pty_fd;     /* PTY master (non-blocking); -EBADF without a PTY */
} ExecChild;

#define EXEC_CHILD_NULL                                                                 \
        (ExecChild) {                                                                   \
                .pid = 0, .pidfd = -EBADF, .stdin_fd = -EBADF, .stdout_fd = -EBADF,     \
                .stderr_fd = -EBADF, .pty_fd = -EBADF,                                  \
        }

int exec_spawn(const ExecOptions *o, ExecChild *ret, ExecStage *ret_stage);

/* Close all fds (does not kill or reap). */
void exec_child_close(ExecChild *c);

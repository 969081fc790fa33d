/* SPDX-License-Identifier: MIT */
#pragma once

/* Running one shell command: the core of sandbox::exec, in plain C (no msgpack, no worker), so
 * that it can be tested on its own. sandbox.c adapts it to the three call shapes.
 *
 *   exec_start()     spawns `<shell> -c <command>` in a new session (exec-spawn.c)
 *   exec_run_loop()  moves bytes until the command is done (exec-run.c): output to a callback,
 *                    stdin from a buffer, control items from an inbox callback; it enforces the
 *                    timeout, the output cap and cancellation (a pollable fd plus a predicate)
 *   exec_run_free()  kills what is left of the process group, reaps, closes
 *
 * Process-group policy: a timeout, a cancellation or a hook error kills the whole process group
 * with SIGKILL. A normal exit does not: background jobs (`server &`) keep running. If they hold
 * the output pipes, the loop waits ExecOptions.exit_grace_usec after the shell exited, then
 * closes its ends and returns (a job writing later gets EPIPE/SIGPIPE, as with `cmd | head`). */

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#define EXEC_DEFAULT_SHELL "/bin/sh"
#define EXEC_FALLBACK_SHELL "/nix/runtime/bin/sh"

#define EXEC_EXIT_TIMEOUT 124          /* like timeout(1) */
#define EXEC_STDIN_BUFFER_MAX (64u * 1024u)

typedef enum ExecStream {
        EXEC_STREAM_STDOUT,
        EXEC_STREAM_STDERR,
        EXEC_STREAM_PTY,
} ExecStream;

const char *exec_stream_to_string(ExecStream s);

typedef enum ExecStdin {
        EXEC_STDIN_NULL,        /* /dev/null, or an immediate EOF on a PTY */
        EXEC_STDIN_DATA,        /* stdin_data, then EOF */
        EXEC_STDIN_INTERACTIVE, /* stdin_data, then whatever exec_run_write_stdin() adds, until
                                 * exec_run_close_stdin() */
} ExecStdin;

typedef struct ExecOptions {
        const char *shell;          /* NULL: exec_default_shell() */
        const char *command;
        const char *cwd;            /* NULL: the worker's */
        const struct ExecAccount *account; /* NULL: the worker's own; else the command takes it
                                     * through agentix-exec-as (exec-as.h) */
        char *const *env;           /* NULL: the worker's environ */

        ExecStdin stdin_mode;
        const void *stdin_data;     /* borrowed for the life of the run */
        size_t stdin_size;

        bool merge_stderr;          /* stdout and stderr share one pipe: exact arrival order */
        bool pty;                   /* stdin/stdout/stderr on a new PTY; output as EXEC_STREAM_PTY */
        unsigned rows, cols;        /* initial PTY size */
        bool pty_plain;             /* the PTY neither echoes input nor turns \n into \r\n: a
                                     * program drives it, not a person (shell sessions) */

        uint64_t timeout_usec;      /* 0: none */
        uint64_t max_output;        /* bytes handed to on_output; more is read and dropped */
        uint64_t coalesce_usec;     /* 0: hand over each read at once; else gather small reads
                                     * of one stream for at most this long */
        uint64_t exit_grace_usec;   /* how long to wait for the pipes once the shell exited */
} ExecOptions;

/* Sensible defaults: no timeout, no cap, no coalescing, 100 ms exit grace, 24×80. */
#define EXEC_OPTIONS_DEFAULT                            \
        (ExecOptions) {                                 \
                .max_output = UINT64_MAX,               \
                .exit_grace_usec = 100 * 1000,          \
                .rows = 24,                             \
                .cols = 80,                             \
        }

typedef struct ExecRun ExecRun;

typedef enum ExecInboxStatus {
        EXEC_INBOX_EMPTY = 0,  /* nothing to take now; wait for the wait_fd */
        EXEC_INBOX_ITEM = 1,   /* took one item; there may be more */
        EXEC_INBOX_CLOSED = 2, /* the inbox is closed for good: end of stdin */
} ExecInboxStatus;

typedef struct ExecHooks {
        void *userdata;

        /* Polled for POLLIN; readable when cancelled or when the inbox has something (-1: none). */
        int wait_fd;
        /* Checked when wait_fd is readable, and every few ms while the loop does not watch it. */
        bool (*is_cancelled)(void *userdata);

        /* Output in arrival order. A negative return stops the run (the group is killed);
         * -ECANCELED counts as a cancellation. Should not block when output_ready is set. */
        int (*on_output)(void *userdata, ExecStream stream, const void *data, size_t size);

        /* Backpressure (optional): while it returns false the loop reads no output — the child
         * blocks once its pipe is full — and waits for output_fd (POLLIN) instead, while the
         * timeout, the inbox and cancellation are served as usual. Once the command timed out
         * (its group is killed), what is left in the pipes is delivered regardless. */
        bool (*output_ready)(void *userdata);
        int output_fd;

        /* Take at most one inbox item and apply it with exec_run_write_stdin() & co. Called only
         * while the stdin buffer has room, so a slow reader throttles the inbox. Returns an
         * ExecInboxStatus, or a negative errno to stop the run (the group is killed). */
        int (*on_inbox)(void *userdata, ExecRun *run);
        /* Optional: take one urgent item (a signal, a resize), if one is next in the inbox.
         * Called while the stdin buffer is full too — every EXEC_URGENT_CHECK_USEC — so a
         * signal gets through to a child that does not read its stdin. Returns like on_inbox
         * (EXEC_INBOX_EMPTY: no urgent item waiting). */
        int (*on_inbox_urgent)(void *userdata, ExecRun *run);
} ExecHooks;

/* How long an urgent inbox item may wait while the stdin buffer is full. */
#define EXEC_URGENT_CHECK_USEC (10u * 1000u)

typedef struct ExecResult {
        int exit_code;        /* exit status; 128+N when killed by signal N; 124 on timeout */
        int signal;           /* the signal that killed the shell, 0 if it exited */
        bool timed_out;
        bool truncated;       /* more than max_output bytes were produced */
        uint64_t output_size; /* bytes produced, including dropped ones */
} ExecResult;

/* The shell used when ExecOptions.shell is NULL: /bin/sh if it is executable, else
 * /nix/runtime/bin/sh (bundles on images without /bin/sh). */
const char *exec_default_shell(void);

/* Where exec_start() failed, so the caller can say what went wrong. */
typedef enum ExecStage {
        EXEC_STAGE_SETUP, /* pipes, memory */
        EXEC_STAGE_PTY,   /* allocating the pseudo-terminal */
        EXEC_STAGE_SPAWN, /* starting the shell (ENOENT: the shell or cwd is missing) */
} ExecStage;

int exec_start(const ExecOptions *o, ExecRun **ret, ExecStage *ret_stage);

/* Returns 0 when the command finished (or timed out) with *ret filled in, -ECANCELED when
 * cancelled, or the negative errno a hook returned. The group is killed in the last two cases. */
int exec_run_loop(ExecRun *run, const ExecHooks *hooks, ExecResult *ret);

ExecRun *exec_run_free(ExecRun *run);
static inline void exec_run_freep(ExecRun **r) {
        exec_run_free(*r);
}
#define _cleanup_exec_run_ _cleanup_(exec_run_freep)

pid_t exec_run_pid(const ExecRun *run); /* also the process group and session id */

/* ---- for on_inbox ---- */

/* Queue bytes for the child's stdin (copied). Ignored after EOF or once the child closed its
 * stdin. */
int exec_run_write_stdin(ExecRun *run, const void *data, size_t size);
/* End stdin once the queued bytes are written: close the pipe, or send VEOF on a PTY. */
void exec_run_close_stdin(ExecRun *run);
/* Send a signal to the process group. */
int exec_run_signal(ExecRun *run, int sig);
/* Resize the PTY: -ENOTTY without one, -EINVAL for a zero or too large size. */
int exec_run_resize(ExecRun *run, unsigned rows, unsigned cols);

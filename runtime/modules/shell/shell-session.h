/* SPDX-License-Identifier: MIT */
#pragma once

/* One persistent shell session: an interactive bash on a PTY of its own, in which commands run
 * one after the other and what they change (cwd, variables, functions, aliases, jobs) stays.
 * Plain C (no msgpack, no worker), so that it is tested on its own; shell.c makes the module.
 *
 * How a command's end is known: bash runs PROMPT_COMMAND before each prompt, with $? still the
 * status of the command before; the session sets it to print a marker holding a nonce of its
 * own and that status. The PTY neither echoes nor rewrites output (pty_plain) and is not in
 * canonical mode, so commands of any length and output without a final newline pass as they
 * are. Job control is off (bash +m, as in a script): every command stays in the shell's process
 * group, so an interrupt is SIGINT to that group, the same on every runtime (gVisor's terminals
 * send no signal on ^C), and `cmd &` ignores it; `jobs`, `wait` and `kill %N` work, `fg`/`bg`
 * do not. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define SHELL_OUTPUT_MAX_DEFAULT (1024u * 1024u)
/* After SIGINT, how long a command has to give the prompt back before it is killed. */
#define SHELL_INTERRUPT_GRACE_USEC (2ULL * 1000 * 1000)
/* Output that arrives between runs (a background job's) is kept for the next run, up to this. */
#define SHELL_PENDING_MAX (256u * 1024u)

typedef struct ShellSession ShellSession;

typedef struct ShellOpenOptions {
        const char *shell;    /* bash; NULL: the bundle's, else bash on PATH */
        const char *cwd;      /* NULL: the worker's */
        char *const *env;     /* NULL: the worker's environment */
        uint64_t timeout_usec; /* for the shell to come up (0: 10 s) */
} ShellOpenOptions;

typedef struct ShellRunResult {
        char *output;         /* malloc'ed, NUL-terminated (output_size bytes before the NUL) */
        size_t output_size;
        int exit_code;        /* the command's $?; -1 when none came (the shell ended) */
        bool timed_out;       /* interrupted (and, if it did not stop, killed) at the timeout */
        bool truncated;       /* more than max_output bytes came; the rest was dropped */
        bool ended;           /* the shell itself is gone (`exit`, killed): the session is over */
} ShellRunResult;

/* Start a session. On failure *ret_error (malloc'ed) says why. */
int shell_session_open(const ShellOpenOptions *o, ShellSession **ret, char **ret_error);

/* Run command (one or more lines). timeout_usec 0: none. wait_fd (or -1) polls readable when
 * cancelled() (may be NULL) should be asked; a cancelled run interrupts the command as a timeout
 * does and returns -ECANCELED. One run at a time per session (-EBUSY otherwise). */
int shell_session_run(ShellSession *s, const char *command, uint64_t timeout_usec, size_t max_output, int wait_fd,
                      bool (*cancelled)(void *userdata), void *userdata, ShellRunResult *ret);
void shell_run_result_done(ShellRunResult *r);

/* SIGINT to the running command and the shell (^C): the prompt comes back. */
int shell_session_interrupt(ShellSession *s);
/* Bytes to the running command's standard input (the terminal), e.g. an answer to `read`. */
int shell_session_input(ShellSession *s, const void *data, size_t size);

pid_t shell_session_pid(const ShellSession *s);
/* A run's command is in the shell (so input written now goes to it, not ahead of it). */
bool shell_session_running(const ShellSession *s);
/* A run holds the session (from its start, before its command is sent). */
bool shell_session_busy(const ShellSession *s);
bool shell_session_ended(const ShellSession *s);     /* the shell is gone */

/* End the session: SIGHUP to the shell's process group, SIGKILL after a moment, reaped, freed.
 * Not while a run is in progress (shell_session_kill() first makes it return). */
void shell_session_free(ShellSession *s);
/* SIGKILL to every process of the session (a run in progress returns with ended). */
void shell_session_kill(ShellSession *s);

/* SPDX-License-Identifier: MIT */
#pragma once

/* One run of sandbox::exec from the command line, shared by `exec` and `shell`: output written
 * to ours as it arrives (or gathered for --json), our stdin forwarded (bidi), a PTY with our
 * terminal in raw mode and its size followed (SIGWINCH), our signals passed on or turned into
 * cancellation, and the command's exit status as ours. */

#include <stdbool.h>
#include <stdint.h>

typedef struct ExecSpec {
        const char *command;     /* one shell command line */
        const char *cwd;         /* NULL: the worker's */
        char **env;              /* "KEY=VALUE", or "KEY" to unset; NULL-terminated; may be NULL */
        double timeout_sec;      /* 0: none */
        int64_t max_output;      /* bytes of output; < 0: no limit */
        const char *shell;       /* the sandbox program that runs `command` (sh -c); NULL: the server's */
        bool interactive;        /* forward our stdin: a bidi call */
        bool tty;                /* a PTY in the sandbox (bidi) */
} ExecSpec;

/* Connect, run, and return the exit status: the command's, or agentixctl's own when the call
 * failed (see agentixctl.h). verb names the command in error messages. */
int exec_session_run(const char *verb, const ExecSpec *spec);

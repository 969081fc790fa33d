/* SPDX-License-Identifier: MIT */
#pragma once

/* The arguments of sandbox::exec, from the msgpack objects the worker bound to the signature,
 * checked and turned into ExecOptions. Bad values raise a typed error on the call (ValueError,
 * TypeError, FileNotFoundError, NotADirectoryError, PermissionError) naming the argument. */

#include "agentix-module.h"
#include "exec-as.h"
#include "exec.h"

#define SANDBOX_EXEC_SIGNATURE                                                          \
        "(command: str, timeout: float? = None, cwd: str? = None, env: map? = None, "   \
        "stdin: str|bytes? = None, max_output: int = 10485760, pty: bool = False, "     \
        "rows: int = 24, cols: int = 80, shell: str? = None, report_pid: bool = False, "         \
        "user: str? = None) -> map"

enum {
        SANDBOX_ARG_COMMAND,
        SANDBOX_ARG_TIMEOUT,
        SANDBOX_ARG_CWD,
        SANDBOX_ARG_ENV,
        SANDBOX_ARG_STDIN,
        SANDBOX_ARG_MAX_OUTPUT,
        SANDBOX_ARG_PTY,
        SANDBOX_ARG_ROWS,
        SANDBOX_ARG_COLS,
        SANDBOX_ARG_SHELL,
        SANDBOX_ARG_REPORT_PID,
        SANDBOX_ARG_USER,
        _SANDBOX_ARG_MAX,
};

#define SANDBOX_DEFAULT_TIMEOUT_SEC 1800
/* A unary result is one message (256 MiB at most); replacement characters can triple invalid
 * bytes, so keep the cap well below. Streams have no such limit. */
#define SANDBOX_UNARY_MAX_OUTPUT (64u * 1024u * 1024u)
#define SANDBOX_ENV_MAX 4096u

typedef struct SandboxExecArgs {
        ExecOptions opts;  /* points into the fields below and into the call's arguments */
        char *command;
        char *cwd;
        char *shell;
        char **env;        /* NULL: the worker's environment */
        char **user_env;   /* the worker's environment with the account's HOME, USER, LOGNAME */
        bool report_pid;   /* stream, bidi: a first item {pid} */
        ExecAccount account; /* `user`; opts.account points here when one was named */
} SandboxExecArgs;

/* Returns 0, or a negative value from agentix_call_raise() to return from the function. */
int sandbox_exec_args_parse(agentix_call *call, const msgpack_object *argv, size_t argc, SandboxExecArgs *ret);
void sandbox_exec_args_done(SandboxExecArgs *a);

/* Shared with the shell module; fn names the function in messages ("exec"). */
/* A `timeout` argument (seconds, 0: none) in µs; default_usec when nil. 0, or the raised error. */
int sandbox_parse_timeout(agentix_call *call, const char *fn, const msgpack_object *o, uint64_t default_usec,
                          uint64_t *ret_usec);
/* cwd must be an absolute path to a directory: 0, or the raised error. */
int sandbox_check_cwd(agentix_call *call, const char *fn, const char *cwd);
/* An `env` argument (map of str to str or None) merged over base into *ret (strv); NULL when
 * the argument is nil. 0, or the raised error. */
int sandbox_parse_env(agentix_call *call, const char *fn, const msgpack_object *o, char *const *base, char ***ret);

/* An int argument `name` of fn() in [min, max] (mp_get_int()): 0 and *ret, or the raised
 * ArgumentError naming it (an int out of range, or not an int). */
int sandbox_parse_int(agentix_call *call, const char *fn, const char *name, const msgpack_object *o, int64_t min,
                      int64_t max, int64_t *ret);

/* Raise the error for a failed exec_start(). */
int sandbox_raise_start_error(agentix_call *call, const SandboxExecArgs *a, ExecStage stage, int error);

/* Python's name for an errno: FileNotFoundError, PermissionError, … (OSError otherwise). */
const char *sandbox_errno_type(int error);

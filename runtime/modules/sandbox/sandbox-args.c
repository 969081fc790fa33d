/* SPDX-License-Identifier: MIT */
#include <inttypes.h>
#include <math.h>
#include <sys/stat.h>

#include "envelope.h"
#include "exec-env.h"
#include "macro.h"
#include "mp-check.h"
#include "pty.h"
#include "sandbox-args.h"

const char *sandbox_errno_type(int error) {
        switch (abs(error)) {
        case ENOENT:
                return "FileNotFoundError";
        case EACCES:
        case EPERM:
                return "PermissionError";
        case ENOTDIR:
                return "NotADirectoryError";
        case ENOMEM:
                return "MemoryError";
        default:
                return "OSError";
        }
}

/* A str argument as a C string; the signature checked the type, but not for NUL bytes. */
static int get_cstr(agentix_call *call, const msgpack_object *o, const char *name, char **ret) {
        char *s;

        if (agentix_arg_is_nil(o)) {
                *ret = NULL;
                return 0;
        }
        s = agentix_arg_strdup(o);
        if (!s) {
                if (errno == ENOMEM)
                        return -ENOMEM;
                return agentix_call_raise(call, "ValueError", "exec() argument '%s' must not contain NUL bytes", name);
        }
        *ret = s;
        return 0;
}

int sandbox_parse_int(agentix_call *call, const char *fn, const char *name, const msgpack_object *o, int64_t min,
                      int64_t max, int64_t *ret) {
        char got[32];
        int r;

        r = mp_get_int(o, min, max, ret);
        if (r == 0)
                return 0;
        if (o->type == MSGPACK_OBJECT_POSITIVE_INTEGER)
                snprintf(got, sizeof(got), "%" PRIu64, o->via.u64);
        else if (o->type == MSGPACK_OBJECT_NEGATIVE_INTEGER)
                snprintf(got, sizeof(got), "%" PRId64, o->via.i64);
        else
                snprintf(got, sizeof(got), "%s", mp_type_name(o->type));
        return agentix_call_raise(call, "ArgumentError", "%s() argument '%s' must be an int from %" PRId64 " to %" PRId64
                                  ", got %s", fn, name, min, max, got);
}

int sandbox_parse_timeout(agentix_call *call, const char *fn, const msgpack_object *o, uint64_t default_usec,
                          uint64_t *ret_usec) {
        double sec;

        if (agentix_arg_is_nil(o)) {
                *ret_usec = default_usec;
                return 0;
        }
        /* Seconds as a double (the signature makes an int a float anyway), each integer from
         * the field its type keeps it in; the range is checked below. */
        if (o->type == MSGPACK_OBJECT_POSITIVE_INTEGER)
                sec = (double) o->via.u64;
        else if (o->type == MSGPACK_OBJECT_NEGATIVE_INTEGER)
                sec = (double) o->via.i64;
        else if (o->type == MSGPACK_OBJECT_FLOAT32 || o->type == MSGPACK_OBJECT_FLOAT64)
                sec = o->via.f64;
        else
                return agentix_call_raise(call, "TypeError", "%s() argument 'timeout' must be a number, got %s", fn,
                                          mp_type_name(o->type));

        if (isnan(sec) || sec < 0)
                return agentix_call_raise(call, "ValueError",
                                          "%s() argument 'timeout' must be >= 0 seconds (0: no timeout), got %g", fn, sec);
        if (sec > 1e9) /* ~31 years; also catches inf */
                return agentix_call_raise(call, "ValueError",
                                          "%s() argument 'timeout' is too large (%g s); use 0 for no timeout", fn, sec);
        /* A positive timeout below 1 µs still means "time out", not "no timeout". */
        *ret_usec = sec == 0 ? 0 : MAX((uint64_t) (sec * 1e6), (uint64_t) 1);
        return 0;
}

int sandbox_check_cwd(agentix_call *call, const char *fn, const char *cwd) {
        struct stat st;

        if (cwd[0] != '/')
                return agentix_call_raise(call, "ValueError", "%s() argument 'cwd' must be an absolute path, got '%s'", fn, cwd);
        if (stat(cwd, &st) < 0) {
                int e = errno;

                return agentix_call_raise(call, sandbox_errno_type(e), "%s() cwd '%s': %s", fn, cwd, strerror(e));
        }
        if (!S_ISDIR(st.st_mode))
                return agentix_call_raise(call, "NotADirectoryError", "%s() cwd '%s' is not a directory", fn, cwd);
        return 0;
}

int sandbox_parse_env(agentix_call *call, const char *fn, const msgpack_object *o, char *const *base, char ***ret) {
        _cleanup_free_ EnvOverride *ov = NULL;
        uint32_t n;
        int r;

        if (agentix_arg_is_nil(o)) {
                *ret = NULL;
                return 0;
        }
        n = o->via.map.size;
        if (n > SANDBOX_ENV_MAX)
                return agentix_call_raise(call, "ValueError", "%s() argument 'env' has %" PRIu32 " entries, at most %u are allowed",
                                          fn, n, SANDBOX_ENV_MAX);
        ov = calloc(MAX(n, 1u), sizeof(EnvOverride));
        if (!ov)
                return -ENOMEM;

        for (uint32_t i = 0; i < n; i++) {
                const msgpack_object *k = &o->via.map.ptr[i].key, *v = &o->via.map.ptr[i].val;

                if (k->type != MSGPACK_OBJECT_STR)
                        return agentix_call_raise(call, "TypeError", "%s() argument 'env': keys must be str, got %s", fn, mp_type_name(k->type));
                if (!env_key_is_valid(k->via.str.ptr, k->via.str.size))
                        return agentix_call_raise(call, "ValueError",
                                                  "%s() argument 'env': invalid variable name '%.*s' (empty, or contains '=' or NUL)",
                                                  fn, (int) k->via.str.size, k->via.str.ptr);
                ov[i].key = k->via.str.ptr;
                ov[i].key_len = k->via.str.size;
                if (v->type == MSGPACK_OBJECT_NIL)
                        continue; /* unset */
                if (v->type != MSGPACK_OBJECT_STR)
                        return agentix_call_raise(call, "TypeError", "%s() argument 'env': value of '%.*s' must be str or None, got %s",
                                                  fn, (int) k->via.str.size, k->via.str.ptr, mp_type_name(v->type));
                if (!env_value_is_valid(v->via.str.ptr, v->via.str.size))
                        return agentix_call_raise(call, "ValueError", "%s() argument 'env': value of '%.*s' contains a NUL byte",
                                                  fn, (int) k->via.str.size, k->via.str.ptr);
                ov[i].value = v->via.str.size > 0 ? v->via.str.ptr : "";
                ov[i].value_len = v->via.str.size;
        }

        r = env_merge(base, ov, n, ret);
        return r;
}

static int parse_terminal_size(agentix_call *call, const msgpack_object *o, const char *name, unsigned *ret) {
        int64_t v;
        int r;

        r = sandbox_parse_int(call, "exec", name, o, 1, PTY_SIZE_MAX, &v);
        if (r < 0)
                return r;
        *ret = (unsigned) v;
        return 0;
}

/* `user`: the account the command runs as, by name or uid; its HOME, USER and LOGNAME go into
 * the environment the caller's `env` is merged over. */
static int parse_user(agentix_call *call, const msgpack_object *o, SandboxExecArgs *a) {
        extern char **environ;
        _cleanup_free_ char *name = NULL;
        EnvOverride ov[3];
        int r;

        r = get_cstr(call, o, "user", &name);
        if (r < 0 || !name)
                return r;
        r = exec_account_lookup(name, &a->account);
        if (r == -ENOENT)
                return agentix_call_raise(call, "LookupError", "exec() argument 'user': no account '%s' in this sandbox", name);
        if (r < 0)
                return agentix_call_raise(call, "ValueError", "exec() argument 'user' must be an account name or uid, got '%s'",
                                          name);
        if (exec_account_is_own(&a->account))
                return 0;
        if (geteuid() != 0)
                return agentix_call_raise(call, "PermissionError",
                                          "exec() argument 'user': the runtime runs as uid %u, not root, and cannot run "
                                          "commands as '%s'", (unsigned) geteuid(), name);
        if (!exec_as_helper())
                return agentix_call_raise(call, "FileNotFoundError",
                                          "exec() argument 'user': %s is missing (beside agentix-worker or in %s)",
                                          EXEC_AS_HELPER, AGENTIX_LIBEXECDIR);
        a->opts.account = &a->account;
        ov[0] = (EnvOverride) { "HOME", 4, a->account.home, strlen(a->account.home) };
        ov[1] = (EnvOverride) { "USER", 4, a->account.name, strlen(a->account.name) };
        ov[2] = (EnvOverride) { "LOGNAME", 7, a->account.name, strlen(a->account.name) };
        return env_merge(environ, ov, ELEMENTSOF(ov), &a->user_env);
}

int sandbox_exec_args_parse(agentix_call *call, const msgpack_object *argv, size_t argc, SandboxExecArgs *ret) {
        extern char **environ;
        agentix_shape shape = agentix_call_shape(call);
        SandboxExecArgs a = { .opts = EXEC_OPTIONS_DEFAULT };
        const msgpack_object *in;
        int64_t max_output;
        int r;

        if (argc != _SANDBOX_ARG_MAX)
                return agentix_call_raise(call, "RuntimeError", "exec() got %zu bound arguments, expected %d", argc, _SANDBOX_ARG_MAX);

        r = get_cstr(call, &argv[SANDBOX_ARG_COMMAND], "command", &a.command);
        if (r < 0)
                goto fail;
        if (!a.command) {
                r = agentix_call_raise(call, "TypeError", "exec() argument 'command' must be str");
                goto fail;
        }
        a.opts.command = a.command;

        r = sandbox_parse_timeout(call, "exec", &argv[SANDBOX_ARG_TIMEOUT],
                                  (uint64_t) SANDBOX_DEFAULT_TIMEOUT_SEC * 1000000u, &a.opts.timeout_usec);
        if (r < 0)
                goto fail;

        r = get_cstr(call, &argv[SANDBOX_ARG_CWD], "cwd", &a.cwd);
        if (r < 0)
                goto fail;
        if (a.cwd) {
                r = sandbox_check_cwd(call, "exec", a.cwd);
                if (r < 0)
                        goto fail;
                a.opts.cwd = a.cwd;
        }

        r = parse_user(call, &argv[SANDBOX_ARG_USER], &a);
        if (r < 0)
                goto fail;
        r = sandbox_parse_env(call, "exec", &argv[SANDBOX_ARG_ENV], a.user_env ?: environ, &a.env);
        if (r < 0)
                goto fail;
        if (!a.env)
                a.env = TAKE_PTR(a.user_env);
        a.opts.env = a.env;

        in = &argv[SANDBOX_ARG_STDIN];
        if (in->type == MSGPACK_OBJECT_STR || in->type == MSGPACK_OBJECT_BIN) {
                a.opts.stdin_mode = EXEC_STDIN_DATA;
                a.opts.stdin_data = in->type == MSGPACK_OBJECT_STR ? in->via.str.ptr : in->via.bin.ptr;
                a.opts.stdin_size = in->type == MSGPACK_OBJECT_STR ? in->via.str.size : in->via.bin.size;
        }
        if (shape == AGENTIX_SHAPE_BIDI)
                a.opts.stdin_mode = EXEC_STDIN_INTERACTIVE;

        r = sandbox_parse_int(call, "exec", "max_output", &argv[SANDBOX_ARG_MAX_OUTPUT], 0, INT64_MAX, &max_output);
        if (r < 0)
                goto fail;
        if (shape == AGENTIX_SHAPE_UNARY && (uint64_t) max_output > SANDBOX_UNARY_MAX_OUTPUT) {
                r = agentix_call_raise(call, "ArgumentError",
                                       "exec() argument 'max_output' must be at most %u for a unary call (the result is one "
                                       "message); use the stream shape for more", SANDBOX_UNARY_MAX_OUTPUT);
                goto fail;
        }
        a.opts.max_output = (uint64_t) max_output;

        if (argv[SANDBOX_ARG_PTY].type != MSGPACK_OBJECT_BOOLEAN) {
                r = agentix_call_raise(call, "TypeError", "exec() argument 'pty' must be bool");
                goto fail;
        }
        a.opts.pty = argv[SANDBOX_ARG_PTY].via.boolean;
        r = parse_terminal_size(call, &argv[SANDBOX_ARG_ROWS], "rows", &a.opts.rows);
        if (r < 0)
                goto fail;
        r = parse_terminal_size(call, &argv[SANDBOX_ARG_COLS], "cols", &a.opts.cols);
        if (r < 0)
                goto fail;

        r = get_cstr(call, &argv[SANDBOX_ARG_SHELL], "shell", &a.shell);
        if (r < 0)
                goto fail;
        if (a.shell && !*a.shell) {
                r = agentix_call_raise(call, "ValueError", "exec() argument 'shell' must not be empty");
                goto fail;
        }
        a.opts.shell = a.shell;
        if (argv[SANDBOX_ARG_REPORT_PID].type != MSGPACK_OBJECT_BOOLEAN) {
                r = agentix_call_raise(call, "TypeError", "exec() argument 'report_pid' must be bool");
                goto fail;
        }
        a.report_pid = argv[SANDBOX_ARG_REPORT_PID].via.boolean;

        /* One pipe for stdout and stderr keeps their exact order in the combined output. */
        a.opts.merge_stderr = shape == AGENTIX_SHAPE_UNARY;
        /* Streams gather small reads for a moment: fewer, larger items, still prompt. */
        a.opts.coalesce_usec = shape == AGENTIX_SHAPE_UNARY ? 0 : 2000;

        *ret = a;
        if (ret->opts.account)
                ret->opts.account = &ret->account; /* it pointed into the local copy */
        return 0;

fail:
        sandbox_exec_args_done(&a);
        return r;
}

void sandbox_exec_args_done(SandboxExecArgs *a) {
        free(a->command);
        free(a->cwd);
        free(a->shell);
        strv_free(a->env);
        strv_free(a->user_env);
        *a = (SandboxExecArgs) {};
}

int sandbox_raise_start_error(agentix_call *call, const SandboxExecArgs *a, ExecStage stage, int error) {
        const char *shell = a->opts.shell ?: exec_default_shell();

        switch (stage) {
        case EXEC_STAGE_PTY:
                return agentix_call_raise(call, sandbox_errno_type(error), "Failed to allocate a pseudo-terminal: %s",
                                          strerror(-error));
        case EXEC_STAGE_SPAWN:
                if (error == -ENOENT && !a->opts.shell && access(shell, X_OK) < 0)
                        return agentix_call_raise(call, "FileNotFoundError", "No shell to run the command: neither %s nor %s exists",
                                                  EXEC_DEFAULT_SHELL, EXEC_FALLBACK_SHELL);
                if (error == -ENOENT && (!strchr(shell, '/') || access(shell, F_OK) < 0))
                        return agentix_call_raise(call, "FileNotFoundError", "Shell '%s' not found", shell);
                return agentix_call_raise(call, sandbox_errno_type(error), "Failed to start '%s -c …'%s%s: %s", shell,
                                          a->opts.cwd ? " in " : "", a->opts.cwd ?: "", strerror(-error));
        default:
                if (error == -ENOMEM)
                        return error;
                return agentix_call_raise(call, sandbox_errno_type(error), "Failed to set up the command: %s", strerror(-error));
        }
}

/* SPDX-License-Identifier: MIT */
/* Built-in module "shell": persistent shell sessions (shell-session.h) by id, for agents that
 * drive one long-lived bash (SWE-agent, OpenHands, MCP "bash" tools).
 *
 *   open(cwd: str? = None, env: map? = None, shell: str? = None, name: str? = None) -> str
 *       the session's id: the name given (unique among the open sessions), else a made-up one
 *   run(id: str, command: str, timeout: float? = None, max_output: int = 1048576) -> map
 *       → {output, exit_code, timed_out, truncated, ended}
 *   interrupt(id: str) -> None          ^C to the foreground job
 *   input(id: str, data: str|bytes) -> None
 *   close(id: str) -> None
 *   list() -> list                      [{id, pid, running, cwd}]
 *
 * Sessions live in the worker, so they outlive a client's reconnect and end with the sandbox
 * (or a worker that dies). At most SHELL_SESSIONS_MAX at once. Errors: SessionNotFound,
 * SessionBusy (a run is in progress on it), SessionExists (open with a name in use),
 * TooManySessions, and those of exec's arguments. */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "agentix-module.h"
#include "buffer.h"
#include "exec-env.h"
#include "macro.h"
#include "sandbox-args.h"
#include "shell-session.h"
#include "strv.h"
#include "utf8.h"

#define SHELL_SESSIONS_MAX 32
#define SHELL_ID_LEN 12          /* a made-up id */
#define SHELL_NAME_MAX 64        /* a name given to open() */
#define SHELL_OUTPUT_MAX_LIMIT (64u * 1024u * 1024u)

typedef struct Slot {
        char id[SHELL_NAME_MAX + 1];
        ShellSession *session;
        unsigned refs;        /* the table's one (while open) and one per call using it */
        bool closed;          /* out of the table: freed when the last call lets go */
} Slot;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static Slot slots[SHELL_SESSIONS_MAX];

static Slot *acquire(const msgpack_object *id) {
        Slot *found = NULL;

        if (id->type != MSGPACK_OBJECT_STR)
                return NULL;
        pthread_mutex_lock(&lock);
        for (size_t i = 0; i < SHELL_SESSIONS_MAX; i++)
                if (slots[i].session && !slots[i].closed && id->via.str.size == strlen(slots[i].id) &&
                    memcmp(slots[i].id, id->via.str.ptr, id->via.str.size) == 0) {
                        found = &slots[i];
                        found->refs++;
                        break;
                }
        pthread_mutex_unlock(&lock);
        return found;
}

static void release(Slot *slot) {
        ShellSession *gone = NULL;

        pthread_mutex_lock(&lock);
        if (--slot->refs == 0) {
                gone = slot->session;
                *slot = (Slot) {};
        }
        pthread_mutex_unlock(&lock);
        shell_session_free(gone); /* outside the lock: it waits for the shell to go */
}

static inline void releasep(Slot **slot) {
        if (*slot)
                release(*slot);
}
#define _cleanup_release_ _cleanup_(releasep)

static int raise_not_found(agentix_call *call, const msgpack_object *id) {
        return agentix_call_raise(call, "SessionNotFound", "no shell session '%.*s' (shell::list() shows those there are)",
                                  id->type == MSGPACK_OBJECT_STR ? (int) MIN(id->via.str.size, 64u) : 1,
                                  id->type == MSGPACK_OBJECT_STR ? id->via.str.ptr : "?");
}

static int shell_open(agentix_call *call, const msgpack_object *argv, size_t argc) {
        extern char **environ;
        static const EnvOverride dumb = { .key = "TERM", .key_len = 4, .value = "dumb", .value_len = 4 };
        static const char alphabet[] = "abcdefghijklmnopqrstuvwxyz0123456789";
        _cleanup_free_ char *cwd = NULL, *shell = NULL, *name = NULL, *error = NULL;
        _cleanup_strv_free_ char **base = NULL, **env = NULL;
        ShellSession *s = NULL;
        uint8_t random[SHELL_ID_LEN];
        Slot *slot = NULL;
        int r;

        cwd = agentix_arg_strdup(&argv[0]);
        shell = agentix_arg_strdup(&argv[2]);
        name = agentix_arg_strdup(&argv[3]);
        if ((!cwd && !agentix_arg_is_nil(&argv[0])) || (!shell && !agentix_arg_is_nil(&argv[2])) ||
            (!name && !agentix_arg_is_nil(&argv[3])))
                return errno == ENOMEM ? -ENOMEM
                                       : agentix_call_raise(call, "ValueError", "open() arguments must not contain NUL bytes");
        if (name && (strlen(name) == 0 || strlen(name) > SHELL_NAME_MAX ||
                     strspn(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-") != strlen(name)))
                return agentix_call_raise(call, "ValueError", "open() argument 'name' must be 1 to %u letters, digits, "
                                          "'_', '.' or '-'", SHELL_NAME_MAX);
        if (cwd && (r = sandbox_check_cwd(call, "open", cwd)) < 0)
                return r;
        /* A program reads this terminal: no colours, no pagers' screen control (unless asked). */
        r = env_merge(environ, &dumb, 1, &base);
        if (r < 0)
                return r;
        r = sandbox_parse_env(call, "open", &argv[1], base, &env);
        if (r < 0)
                return r;

        pthread_mutex_lock(&lock);
        for (size_t i = 0; name && i < SHELL_SESSIONS_MAX; i++)
                if ((slots[i].session || slots[i].refs > 0) && !slots[i].closed && streq(slots[i].id, name)) {
                        pthread_mutex_unlock(&lock);
                        return agentix_call_raise(call, "SessionExists", "a shell session named '%s' is open already: "
                                                  "run in it, or close it first", name);
                }
        for (size_t i = 0; i < SHELL_SESSIONS_MAX && !slot; i++)
                if (!slots[i].session && slots[i].refs == 0) {
                        slot = &slots[i];
                        slot->refs = 1; /* reserved while the shell comes up */
                        if (name)
                                strcpy(slot->id, name); /* so that a second open of the name waits for none */
                }
        pthread_mutex_unlock(&lock);
        if (!slot)
                return agentix_call_raise(call, "TooManySessions", "%u shell sessions are open, the most there may be: "
                                          "close one first", SHELL_SESSIONS_MAX);

        r = shell_session_open(&(ShellOpenOptions) { .shell = shell, .cwd = cwd, .env = env ?: base }, &s, &error);
        if (r >= 0 && getrandom(random, sizeof(random), 0) != sizeof(random))
                r = -errno;
        pthread_mutex_lock(&lock);
        if (r >= 0) {
                if (!name) {
                        for (size_t i = 0; i < SHELL_ID_LEN; i++)
                                slot->id[i] = alphabet[random[i] % (sizeof(alphabet) - 1)];
                        slot->id[SHELL_ID_LEN] = 0;
                }
                slot->session = s;
        } else
                *slot = (Slot) {};
        pthread_mutex_unlock(&lock);
        if (r < 0) {
                shell_session_free(s);
                return error ? agentix_call_raise(call, r == -ENOENT ? "FileNotFoundError" : "OSError", "%s", error) : r;
        }
        return agentix_pack_cstr(agentix_call_result(call), slot->id);
}

static bool call_cancelled(void *userdata) {
        return agentix_call_cancelled(userdata);
}

static int shell_run(agentix_call *call, const msgpack_object *argv, size_t argc) {
        _cleanup_release_ Slot *slot = acquire(&argv[0]);
        _cleanup_free_ char *command = NULL;
        _cleanup_buffer_ Buffer text = BUFFER_NULL;
        ShellRunResult res = {};
        uint64_t timeout_usec = 0;
        msgpack_packer *pk;
        int64_t max_output;
        int r;

        if (!slot)
                return raise_not_found(call, &argv[0]);
        command = agentix_arg_strdup(&argv[1]);
        if (!command)
                return errno == ENOMEM ? -ENOMEM
                                       : agentix_call_raise(call, "ValueError", "run() argument 'command' must not contain NUL bytes");
        r = sandbox_parse_timeout(call, "run", &argv[2], 0, &timeout_usec); /* none unless asked */
        if (r < 0)
                return r;
        r = sandbox_parse_int(call, "run", "max_output", &argv[3], 0, SHELL_OUTPUT_MAX_LIMIT, &max_output);
        if (r < 0)
                return r;

        r = shell_session_run(slot->session, command, timeout_usec, (size_t) max_output, agentix_call_wait_fd(call),
                              call_cancelled, call, &res);
        if (r == -EBUSY)
                return agentix_call_raise(call, "SessionBusy", "shell session '%s' is running a command: wait for it, "
                                          "or shell::interrupt() it", slot->id);
        if (r == -EPIPE)
                return agentix_call_raise(call, "SessionNotFound", "shell session '%s' has ended", slot->id);
        if (r < 0)
                return r;
        r = utf8_append_sanitized(&text, (const uint8_t *) res.output, res.output_size);
        pk = agentix_call_result(call);
        if (r >= 0 && msgpack_pack_map(pk, 5) < 0)
                r = -ENOMEM;
        if (r >= 0) {
                (void) agentix_pack_cstr(pk, "output");
                (void) msgpack_pack_str_with_body(pk, text.len ? (const char *) buffer_data(&text) : "", text.len);
                if (res.exit_code >= 0)
                        (void) agentix_pack_kv_int(pk, "exit_code", res.exit_code);
                else {
                        (void) agentix_pack_cstr(pk, "exit_code");
                        (void) msgpack_pack_nil(pk);
                }
                (void) agentix_pack_kv_bool(pk, "timed_out", res.timed_out);
                (void) agentix_pack_kv_bool(pk, "truncated", res.truncated);
                (void) agentix_pack_kv_bool(pk, "ended", res.ended);
        }
        if (res.ended) {
                /* `exit` or a dead shell: the session is over, its id goes. */
                pthread_mutex_lock(&lock);
                if (!slot->closed) {
                        slot->closed = true;
                        slot->refs--;
                }
                pthread_mutex_unlock(&lock);
        }
        shell_run_result_done(&res);
        return r;
}

static int shell_interrupt(agentix_call *call, const msgpack_object *argv, size_t argc) {
        _cleanup_release_ Slot *slot = acquire(&argv[0]);

        if (!slot)
                return raise_not_found(call, &argv[0]);
        return shell_session_interrupt(slot->session);
}

static int shell_input(agentix_call *call, const msgpack_object *argv, size_t argc) {
        _cleanup_release_ Slot *slot = acquire(&argv[0]);
        const msgpack_object *d = &argv[1];

        if (!slot)
                return raise_not_found(call, &argv[0]);
        if (d->type == MSGPACK_OBJECT_STR)
                return shell_session_input(slot->session, d->via.str.ptr, d->via.str.size);
        return shell_session_input(slot->session, d->via.bin.ptr, d->via.bin.size);
}

static int shell_close(agentix_call *call, const msgpack_object *argv, size_t argc) {
        Slot *slot = acquire(&argv[0]);

        if (!slot)
                return raise_not_found(call, &argv[0]);
        pthread_mutex_lock(&lock);
        if (!slot->closed) {
                slot->closed = true;
                slot->refs--; /* the table's */
        }
        pthread_mutex_unlock(&lock);
        /* A run in progress returns (ended) and lets go; the last to let go ends the shell. */
        if (shell_session_busy(slot->session))
                shell_session_kill(slot->session);
        release(slot);
        return 0;
}

static int shell_list(agentix_call *call, const msgpack_object *argv, size_t argc) {
        msgpack_packer *pk = agentix_call_result(call);
        size_t n = 0;
        int r = 0;

        pthread_mutex_lock(&lock);
        for (size_t i = 0; i < SHELL_SESSIONS_MAX; i++)
                n += slots[i].session && !slots[i].closed;
        if (msgpack_pack_array(pk, n) < 0)
                r = -ENOMEM;
        for (size_t i = 0; r >= 0 && i < SHELL_SESSIONS_MAX; i++) {
                char link[64], cwd[4096];
                ssize_t len;

                if (!slots[i].session || slots[i].closed)
                        continue;
                snprintf(link, sizeof(link), "/proc/%d/cwd", (int) shell_session_pid(slots[i].session));
                len = readlink(link, cwd, sizeof(cwd) - 1);
                cwd[len > 0 ? len : 0] = 0;
                (void) msgpack_pack_map(pk, 4);
                (void) agentix_pack_kv_str(pk, "id", slots[i].id);
                (void) agentix_pack_kv_int(pk, "pid", shell_session_pid(slots[i].session));
                (void) agentix_pack_kv_bool(pk, "running", shell_session_running(slots[i].session));
                (void) agentix_pack_kv_str(pk, "cwd", len > 0 ? cwd : NULL);
        }
        pthread_mutex_unlock(&lock);
        return r;
}

static const agentix_function shell_functions[] = {
        { "open", AGENTIX_SHAPE_UNARY, "(cwd: str? = None, env: map? = None, shell: str? = None, name: str? = None) -> str",
          shell_open, "start a persistent shell session; returns its id (the name, when one is given)" },
        { "run", AGENTIX_SHAPE_UNARY, "(id: str, command: str, timeout: float? = None, max_output: int = 1048576) -> map",
          shell_run, "run a command in a session: {output, exit_code, timed_out, truncated, ended}" },
        { "interrupt", AGENTIX_SHAPE_UNARY, "(id: str) -> none", shell_interrupt, "^C to the session's foreground job" },
        { "input", AGENTIX_SHAPE_UNARY, "(id: str, data: str|bytes) -> none", shell_input,
          "bytes to the running command's input" },
        { "close", AGENTIX_SHAPE_UNARY, "(id: str) -> none", shell_close, "end a session and its jobs" },
        { "list", AGENTIX_SHAPE_UNARY, "() -> list", shell_list, "the open sessions: [{id, pid, running, cwd}]" },
        {},
};

const agentix_module agentix_builtin_shell = {
        .abi = AGENTIX_MODULE_ABI,
        .name = "shell",
        .doc = "Persistent shell sessions: state (cwd, variables, functions, jobs) kept between commands.",
        .functions = shell_functions,
};

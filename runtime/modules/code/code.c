/* SPDX-License-Identifier: MIT */
/* Built-in module "code": stateful code contexts on Jupyter kernels (jupyter-kernel.h), for data
 * agents (E2B's code interpreter, CodeAct): variables, imports and figures persist between runs.
 *
 *   create_context(language: str? = None, cwd: str? = None, env: map? = None) -> str
 *       a new context on the kernel for `language` (a kernelspec's name or language; default
 *       python), started now; its id
 *   run(code: str, context: str? = None, language: str? = None, env: map? = None,
 *       timeout: float? = None, max_output: int = 16777216) -> stream of items (code-output.h)
 *       in `context`, else in the language's default context (made on first use: id
 *       "default-KERNEL"); env applies to this run only (python kernels)
 *   interrupt(context: str) -> None      ^C to the kernel
 *   restart(context: str) -> None        a fresh kernel: state is gone
 *   delete_context(id: str) -> None
 *   contexts() -> list                   [{id, language, kernel, cwd, pid, running, queued}]
 *
 * Runs on one context go one at a time, in the order they came (a FIFO of waiting calls, at
 * most CODE_QUEUE_MAX, joined in arrival order: run is AGENTIX_FUNCTION_ORDERED); a cancelled
 * waiting call leaves the queue. A kernel that dies during a
 * run gives an error item (DeadKernelError) and is started again by the next run. Kernels are
 * the worker's children: the worker's seccomp filter and the sandbox's limits hold for them.
 * Errors: ContextNotFound, KernelNotFound (naming the kernels there are), KernelError (it would
 * not start), TooManyContexts, ContextBusy (the queue is full), and ValueError for arguments. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <time.h>

#include "agentix-module.h"
#include "code-output.h"
#include "envelope.h"
#include "exec-env.h"
#include "jupyter-kernel.h"
#include "macro.h"
#include "module-registry.h"
#include "sandbox-args.h"
#include "strv.h"

#define CODE_CONTEXTS_MAX 16
#define CODE_QUEUE_MAX 32
#define CODE_ID_MAX 64
#define CODE_OUTPUT_MAX_LIMIT (256u * 1024u * 1024u)

typedef struct Waiter Waiter;
struct Waiter {
        Waiter *next;
        bool front;  /* a restart: goes ahead of the runs */
};

typedef struct Context {
        char id[CODE_ID_MAX + 1];
        char *kernel_name, *language, *cwd;
        char **env;               /* the kernel's environment (NULL: the worker's) */
        JupyterKernel *kernel;    /* NULL: not started, or dead and freed */
        bool in_use;              /* a run or restart holds the kernel */
        bool restarting;          /* the run in progress ends because of a restart */
        Waiter *queue;            /* waiting calls, first first */
        unsigned queued;
        unsigned refs;            /* the table's (while listed) and one per call using it */
        bool deleted;
        bool is_default;          /* a language's default context */
        pthread_cond_t turn;
} Context;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static Context *contexts[CODE_CONTEXTS_MAX];

static void context_free(Context *c) {
        if (!c)
                return;
        jupyter_kernel_free(c->kernel);
        free(c->kernel_name);
        free(c->language);
        free(c->cwd);
        strv_free(c->env);
        pthread_cond_destroy(&c->turn);
        free(c);
}

/* Under lock. */
static Context *find(const char *id, size_t len) {
        for (size_t i = 0; i < CODE_CONTEXTS_MAX; i++)
                if (contexts[i] && strlen(contexts[i]->id) == len && memcmp(contexts[i]->id, id, len) == 0)
                        return contexts[i];
        return NULL;
}

static void release(Context *c) {
        bool gone;

        pthread_mutex_lock(&lock);
        gone = --c->refs == 0;
        pthread_mutex_unlock(&lock);
        if (gone)
                context_free(c); /* outside the lock: it waits for the kernel to go */
}

static inline void releasep(Context **c) {
        if (*c)
                release(*c);
}
#define _cleanup_release_ _cleanup_(releasep)

static Context *acquire(const msgpack_object *id) {
        Context *c;

        if (id->type != MSGPACK_OBJECT_STR)
                return NULL;
        pthread_mutex_lock(&lock);
        c = find(id->via.str.ptr, id->via.str.size);
        if (c)
                c->refs++;
        pthread_mutex_unlock(&lock);
        return c;
}

static int raise_not_found(agentix_call *call, const msgpack_object *id) {
        return agentix_call_raise(call, "ContextNotFound", "no code context '%.*s' (code::contexts() lists them)",
                                  id->type == MSGPACK_OBJECT_STR ? (int) MIN(id->via.str.size, 64u) : 1,
                                  id->type == MSGPACK_OBJECT_STR ? id->via.str.ptr : "?");
}

/* ---- the queue: one holder of the kernel at a time, first come first served ------------------ */

static bool call_cancelled(void *userdata) {
        return userdata && agentix_call_cancelled(userdata);
}

/* Wait for our turn on c. -ECANCELED when the call was cancelled meanwhile, -ENOENT when the
 * context was deleted, -EBUSY when the queue is full. */
static int take_turn(Context *c, agentix_call *call, bool front) {
        Waiter me = { .front = front };
        Waiter **tail;
        int r = 0;

        pthread_mutex_lock(&lock);
        if (!front && c->queued >= CODE_QUEUE_MAX) {
                pthread_mutex_unlock(&lock);
                return -EBUSY;
        }
        /* Restarts go after other restarts, ahead of every run. */
        for (tail = &c->queue; *tail && (!front || (*tail)->front); tail = &(*tail)->next)
                ;
        me.next = *tail;
        *tail = &me;
        c->queued++;
        /* In the queue: the client's next run (code::run is ORDERED) may come after us. */
        agentix_call_let_next_start(call);
        for (;;) {
                struct timespec until;

                if (c->deleted) {
                        r = -ENOENT;
                        break;
                }
                if (call_cancelled(call)) {
                        r = -ECANCELED;
                        break;
                }
                if (c->queue == &me && !c->in_use)
                        break;
                /* Cancellation has no condition variable: look every 100 ms. */
                clock_gettime(CLOCK_REALTIME, &until);
                until.tv_nsec += 100 * 1000 * 1000;
                if (until.tv_nsec >= 1000 * 1000 * 1000) {
                        until.tv_sec++;
                        until.tv_nsec -= 1000 * 1000 * 1000;
                }
                (void) pthread_cond_timedwait(&c->turn, &lock, &until);
        }
        for (tail = &c->queue; *tail != &me; tail = &(*tail)->next)
                ;
        *tail = me.next;
        c->queued--;
        if (r == 0)
                c->in_use = true;
        pthread_cond_broadcast(&c->turn);
        pthread_mutex_unlock(&lock);
        return r;
}

static void end_turn(Context *c) {
        pthread_mutex_lock(&lock);
        /* A ^C asked for this turn's run (code_interrupt, under the lock) stays with it. */
        if (c->kernel)
                jupyter_kernel_forget_interrupt(c->kernel);
        c->in_use = false;
        c->restarting = false;
        pthread_cond_broadcast(&c->turn);
        pthread_mutex_unlock(&lock);
}

/* ---- kernels ----------------------------------------------------------------------------- */

/* Start c's kernel (on our turn). 0, or the raised error. */
static int start_kernel(agentix_call *call, Context *c) {
        _cleanup_free_ char *error = NULL, *found = NULL;
        KernelSpecs specs = {};
        const KernelSpec *spec;
        JupyterKernel *k = NULL;
        int r;

        r = kernelspecs_find(c->env, &specs);
        if (r < 0)
                return r;
        spec = kernelspecs_pick(&specs, c->kernel_name);
        if (!spec) {
                found = kernelspecs_describe(&specs);
                kernelspecs_done(&specs);
                return agentix_call_raise(call, "KernelNotFound", "kernel '%s' is not there any more; kernels found: %s",
                                          c->kernel_name, found ?: "?");
        }
        r = jupyter_kernel_start(&(JupyterStartOptions) { .spec = spec, .cwd = c->cwd, .env = c->env }, &k, &error);
        kernelspecs_done(&specs);
        if (r < 0)
                return error ? agentix_call_raise(call, "KernelError", "%s", error) : r;
        pthread_mutex_lock(&lock);
        c->kernel = k;
        pthread_mutex_unlock(&lock);
        return 0;
}

/* Drop a dead kernel (on our turn) so that the next start makes a new one. */
static void drop_kernel(Context *c) {
        JupyterKernel *k;

        pthread_mutex_lock(&lock);
        k = TAKE_PTR(c->kernel);
        pthread_mutex_unlock(&lock);
        jupyter_kernel_free(k);
}

/* A new context in the table, for the kernel `want` names; it takes env (freed on failure).
 * With is_default, the language's default context: found if it is there, made otherwise. */
static int context_make(agentix_call *call, const char *want, const char *cwd, char **env, bool is_default,
                        Context **ret) {
        static const char alphabet[] = "abcdefghijklmnopqrstuvwxyz0123456789";
        _cleanup_free_ char *found = NULL;
        KernelSpecs specs = {};
        const KernelSpec *spec;
        Context *c;
        uint8_t random[12];
        size_t slot = CODE_CONTEXTS_MAX;
        char id[CODE_ID_MAX + 1];
        int r;

        /* A run without a context: its language's default context is usually there already,
         * and then the kernelspecs need not be read again. */
        pthread_mutex_lock(&lock);
        for (size_t i = 0; is_default && i < CODE_CONTEXTS_MAX; i++)
                if (contexts[i] && contexts[i]->is_default &&
                    (streq(contexts[i]->kernel_name, want) || strcasecmp(contexts[i]->language, want) == 0)) {
                        c = contexts[i];
                        c->refs++;
                        pthread_mutex_unlock(&lock);
                        strv_free(env);
                        *ret = c;
                        return 0;
                }
        pthread_mutex_unlock(&lock);

        r = kernelspecs_find(env, &specs);
        if (r < 0) {
                strv_free(env);
                return r;
        }
        spec = kernelspecs_pick(&specs, want);
        if (!spec) {
                found = kernelspecs_describe(&specs);
                kernelspecs_done(&specs);
                strv_free(env);
                return agentix_call_raise(call, "KernelNotFound", "no Jupyter kernel for '%s' in this sandbox; kernels "
                                          "found: %s (a bundle with python3 and ipykernel provides python3)", want,
                                          found ?: "?");
        }
        if (is_default)
                snprintf(id, sizeof(id), "default-%.*s", CODE_ID_MAX - 8, spec->name);
        else {
                if (getrandom(random, sizeof(random), 0) != sizeof(random)) {
                        kernelspecs_done(&specs);
                        strv_free(env);
                        return -errno;
                }
                for (size_t i = 0; i < sizeof(random); i++)
                        id[i] = alphabet[random[i] % (sizeof(alphabet) - 1)];
                id[sizeof(random)] = 0;
        }

        pthread_mutex_lock(&lock);
        c = is_default ? find(id, strlen(id)) : NULL;
        if (c) {
                c->refs++;
                pthread_mutex_unlock(&lock);
                kernelspecs_done(&specs);
                strv_free(env);
                *ret = c;
                return 0;
        }
        for (size_t i = 0; i < CODE_CONTEXTS_MAX && slot == CODE_CONTEXTS_MAX; i++)
                if (!contexts[i])
                        slot = i;
        if (slot == CODE_CONTEXTS_MAX) {
                pthread_mutex_unlock(&lock);
                kernelspecs_done(&specs);
                strv_free(env);
                return agentix_call_raise(call, "TooManyContexts", "%u code contexts are open, the most there may be: "
                                          "delete one first (code::delete_context)", CODE_CONTEXTS_MAX);
        }
        c = calloc(1, sizeof(*c));
        if (c) {
                strcpy(c->id, id);
                c->kernel_name = strdup(spec->name);
                c->language = strdup(spec->language);
                c->cwd = cwd ? strdup(cwd) : NULL;
                c->env = env;
                env = NULL;
                c->is_default = is_default;
                c->refs = 2; /* the table's and the caller's */
                pthread_cond_init(&c->turn, NULL);
                if (!c->kernel_name || !c->language || (cwd && !c->cwd)) {
                        c->refs = 1;
                        context_free(c);
                        c = NULL;
                }
        }
        if (c)
                contexts[slot] = c;
        pthread_mutex_unlock(&lock);
        kernelspecs_done(&specs);
        strv_free(env);
        if (!c)
                return -ENOMEM;
        *ret = c;
        return 0;
}

/* Out of the table; the last call to let go frees it (and its kernel). */
static void context_unlist(Context *c) {
        bool listed = false;

        pthread_mutex_lock(&lock);
        for (size_t i = 0; i < CODE_CONTEXTS_MAX; i++)
                if (contexts[i] == c) {
                        contexts[i] = NULL;
                        listed = true;
                }
        c->deleted = true;
        if (listed)
                c->refs--;
        pthread_cond_broadcast(&c->turn);
        pthread_mutex_unlock(&lock);
}

/* ---- arguments ---------------------------------------------------------------------------- */

static int parse_kernel_env(agentix_call *call, const char *fn, const msgpack_object *o, char ***ret) {
        extern char **environ;

        *ret = NULL;
        /* Programs read a terminal-less output: no colours, no pagers. */
        static const EnvOverride dumb = { .key = "TERM", .key_len = 4, .value = "dumb", .value_len = 4 };
        _cleanup_strv_free_ char **base = NULL;
        int r;

        r = env_merge(environ, &dumb, 1, &base);
        if (r < 0)
                return r;
        r = sandbox_parse_env(call, fn, o, base, ret);
        if (r < 0)
                return r;
        if (!*ret)
                *ret = TAKE_PTR(base);
        return 0;
}

static int create_context(agentix_call *call, const msgpack_object *argv, size_t argc) {
        _cleanup_free_ char *language = agentix_arg_strdup(&argv[0]), *cwd = agentix_arg_strdup(&argv[1]);
        _cleanup_release_ Context *c = NULL;
        char **env = NULL;
        int r;

        if ((!language && !agentix_arg_is_nil(&argv[0])) || (!cwd && !agentix_arg_is_nil(&argv[1])))
                return errno == ENOMEM ? -ENOMEM
                                       : agentix_call_raise(call, "ValueError", "create_context() arguments must not contain NUL bytes");
        if (cwd && (r = sandbox_check_cwd(call, "create_context", cwd)) < 0)
                return r;
        r = parse_kernel_env(call, "create_context", &argv[2], &env);
        if (r < 0)
                return r;
        r = context_make(call, language ?: "python", cwd, env, false, &c);
        if (r < 0)
                return r;
        /* Started now, so that a kernel that cannot start says so here. */
        r = take_turn(c, call, false);
        if (r >= 0) {
                r = start_kernel(call, c);
                end_turn(c);
        }
        if (r < 0) {
                context_unlist(c);
                return r == -ECANCELED || r == -ENOENT ? 0 : r;
        }
        return agentix_pack_cstr(agentix_call_result(call), c->id);
}

/* Python that sets (or, after the run, restores) os.environ for one run's env. */
static char *env_code(char *const *env, bool restore) {
        _cleanup_free_ char *literal = NULL;
        json_t *j = json_object();
        char *code;

        if (!j)
                return NULL;
        for (char *const *e = env; e && *e; e++) {
                const char *eq = strchr(*e, '=');
                _cleanup_free_ char *key = strndup(*e, (size_t) (eq - *e));

                if (!key || json_object_set_new(j, key, json_string(eq + 1)) < 0) {
                        json_decref(j);
                        return NULL;
                }
        }
        /* ASCII-only JSON of strings is a valid Python dict literal. */
        literal = json_dumps(j, JSON_COMPACT | JSON_ENSURE_ASCII);
        json_decref(j);
        if (!literal)
                return NULL;
        if (restore)
                code = strdup("import os as _agentix_os\n"
                              "for _agentix_k, _agentix_v in _agentix_saved_env.items():\n"
                              "    if _agentix_v is None: _agentix_os.environ.pop(_agentix_k, None)\n"
                              "    else: _agentix_os.environ[_agentix_k] = _agentix_v\n"
                              "del _agentix_os, _agentix_k, _agentix_v, _agentix_saved_env\n");
        else if (asprintf(&code,
                          "import os as _agentix_os\n"
                          "_agentix_env = %s\n"
                          "_agentix_saved_env = {k: _agentix_os.environ.get(k) for k in _agentix_env}\n"
                          "_agentix_os.environ.update(_agentix_env)\n"
                          "del _agentix_os, _agentix_env\n", literal) < 0)
                code = NULL;
        return code;
}

typedef struct RunState {
        agentix_call *call;
        CodeOutput output;
        int error;  /* the first failure to send */
} RunState;

static int send_item(RunState *s, int (*pack)(RunState *s, msgpack_packer *pk, const void *arg), const void *arg) {
        msgpack_packer *pk = agentix_call_item_begin(s->call);
        int r;

        r = pack(s, pk, arg);
        if (r == 0) /* nothing packed: nothing to send */
                return 0;
        if (r < 0) {
                /* Something half-packed must not go out: end sends it, so send a valid stand-in. */
                (void) msgpack_pack_nil(pk);
                (void) agentix_call_item_end(s->call);
                return r;
        }
        return agentix_call_item_end(s->call);
}

static int pack_message(RunState *s, msgpack_packer *pk, const void *arg) {
        return code_output_pack(&s->output, arg, pk);
}

static int pack_notice(RunState *s, msgpack_packer *pk, const void *arg) {
        int r = code_output_pack_notice(&s->output, pk);
        return r < 0 ? r : 1;
}

static int on_message(void *userdata, const JupyterMessage *m) {
        RunState *s = userdata;
        int r;

        /* Past the cap nothing is packed; item_begin has nothing to wait for then, but a
         * begun item must be ended: hence the packers decide first whether there is one. */
        r = send_item(s, pack_message, m);
        if (r >= 0 && code_output_notice_due(&s->output))
                r = send_item(s, pack_notice, NULL);
        if (r < 0 && s->error == 0)
                s->error = r;
        return r;
}

typedef struct ErrorArg {
        const char *name;
        const char *value;
} ErrorArg;

static int pack_own_error(RunState *s, msgpack_packer *pk, const void *arg) {
        const ErrorArg *e = arg;
        int r = code_output_pack_error(pk, e->name, e->value);
        return r < 0 ? r : 1;
}

static int run_silently(Context *c, const char *code) {
        JupyterExecuteHooks h = { .wait_fd = -1 };
        JupyterExecuteResult res;
        int r;

        r = jupyter_kernel_execute(c->kernel, code, true, 10ULL * 1000 * 1000, &h, &res);
        if (r < 0)
                return r;
        return res.died ? -ESRCH : streq(res.status, "ok") ? 0 : -EIO;
}

static int code_run(agentix_call *call, const msgpack_object *argv, size_t argc) {
        _cleanup_free_ char *code = agentix_arg_strdup(&argv[0]), *id = agentix_arg_strdup(&argv[1]),
                            *language = agentix_arg_strdup(&argv[2]), *set_env = NULL, *restore_env = NULL;
        _cleanup_strv_free_ char **run_env = NULL;
        _cleanup_release_ Context *c = NULL;
        JupyterExecuteResult res = {};
        uint64_t timeout_usec = 0;
        int64_t max_output;
        RunState s = { .call = call };
        char message[256];
        int r;

        if (!code || (!id && !agentix_arg_is_nil(&argv[1])) || (!language && !agentix_arg_is_nil(&argv[2])))
                return errno == ENOMEM ? -ENOMEM
                                       : agentix_call_raise(call, "ValueError", "run() arguments must not contain NUL bytes");
        if (id && language)
                return agentix_call_raise(call, "ValueError", "run() takes a context or a language, not both: a context "
                                          "has its language");
        r = sandbox_parse_timeout(call, "run", &argv[4], 0, &timeout_usec);
        if (r < 0)
                return r;
        r = sandbox_parse_int(call, "run", "max_output", &argv[5], 0, CODE_OUTPUT_MAX_LIMIT, &max_output);
        if (r < 0)
                return r;
        s.output.max_output = (size_t) max_output;
        r = sandbox_parse_env(call, "run", &argv[3], NULL, &run_env);
        if (r < 0)
                return r;

        if (id) {
                c = acquire(&argv[1]);
                if (!c)
                        return raise_not_found(call, &argv[1]);
        } else {
                char **env = NULL;

                r = parse_kernel_env(call, "run", &(msgpack_object) { .type = MSGPACK_OBJECT_NIL }, &env);
                if (r >= 0)
                        r = context_make(call, language ?: "python", NULL, env, true, &c);
                if (r < 0)
                        return r;
        }
        if (!strv_isempty(run_env)) {
                if (!streq(c->language, "python"))
                        return agentix_call_raise(call, "ValueError", "run() argument 'env' works with python kernels; "
                                                  "context '%s' runs '%s' (%s)", c->id, c->kernel_name, c->language);
                set_env = env_code(run_env, false);
                restore_env = env_code(run_env, true);
                if (!set_env || !restore_env)
                        return -ENOMEM;
        }

        r = take_turn(c, call, false);
        if (r == -EBUSY)
                return agentix_call_raise(call, "ContextBusy", "%u runs are waiting on code context '%s' already: wait "
                                          "for them", CODE_QUEUE_MAX, c->id);
        if (r == -ENOENT)
                return agentix_call_raise(call, "ContextNotFound", "code context '%s' was deleted", c->id);
        if (r < 0)
                return r == -ECANCELED ? 0 : r;
        if (c->kernel && !jupyter_kernel_alive(c->kernel))
                drop_kernel(c);
        if (!c->kernel)
                r = start_kernel(call, c);
        if (r >= 0 && set_env)
                r = run_silently(c, set_env) < 0 ? agentix_call_raise(call, "KernelError", "could not set env in context "
                                                                      "'%s'", c->id) : 0;
        if (r >= 0) {
                JupyterExecuteHooks h = {
                        .userdata = &s,
                        .on_message = on_message,
                        .wait_fd = agentix_call_wait_fd(call),
                        .cancelled = call_cancelled,
                };

                r = jupyter_kernel_execute(c->kernel, code, false, timeout_usec, &h, &res);
                if (r == -ESRCH)
                        res.died = true, r = 0;
        }
        if (r >= 0 && !res.died && res.status[0] == '\0')
                /* ipykernel drops a request whose ^C came before its code ran, saying nothing. */
                (void) send_item(&s, pack_own_error,
                                 &(ErrorArg) { "KeyboardInterrupt", "interrupted before the code started" });
        if (r >= 0 && res.timed_out && !res.died) {
                snprintf(message, sizeof(message), "the run took longer than its timeout of %.3g s and was interrupted; "
                         "the context keeps its state", (double) timeout_usec / 1e6);
                (void) send_item(&s, pack_own_error, &(ErrorArg) { "TimeoutError", message });
        }
        if (r >= 0 && res.died) {
                if (c->restarting)
                        snprintf(message, sizeof(message), "context '%s' was restarted during the run", c->id);
                else
                        snprintf(message, sizeof(message), "the kernel of context '%s' died%s; the next run starts a "
                                 "new one (state is lost)", c->id, res.timed_out ? " after its timeout" : "");
                (void) send_item(&s, pack_own_error, &(ErrorArg) { "DeadKernelError", message });
                drop_kernel(c);
        } else if (r >= 0 && restore_env)
                (void) run_silently(c, restore_env);
        end_turn(c);
        if (r < 0)
                return r;
        /* A client that went away (cancelled) or could not take an item: nothing more to say. */
        return s.error == -ECANCELED ? 0 : s.error;
}

static int code_interrupt(agentix_call *call, const msgpack_object *argv, size_t argc) {
        _cleanup_release_ Context *c = acquire(&argv[0]);
        int r = 0;

        if (!c)
                return raise_not_found(call, &argv[0]);
        pthread_mutex_lock(&lock);
        /* c->kernel is only swapped under the lock, and freed on a turn: while in_use holds the
         * kernel it cannot go away under us. */
        if (c->kernel && c->in_use)
                r = jupyter_kernel_ask_interrupt(c->kernel);
        pthread_mutex_unlock(&lock);
        return r == -ESRCH ? 0 : r;
}

static int code_restart(agentix_call *call, const msgpack_object *argv, size_t argc) {
        _cleanup_release_ Context *c = acquire(&argv[0]);
        int r;

        if (!c)
                return raise_not_found(call, &argv[0]);
        pthread_mutex_lock(&lock);
        if (c->kernel && c->in_use) {
                c->restarting = true;
                jupyter_kernel_kill(c->kernel); /* the run in progress ends with DeadKernelError */
        }
        pthread_mutex_unlock(&lock);
        r = take_turn(c, call, true);
        if (r == -ENOENT)
                return agentix_call_raise(call, "ContextNotFound", "code context '%s' was deleted", c->id);
        if (r < 0)
                return r == -ECANCELED ? 0 : r;
        drop_kernel(c);
        r = start_kernel(call, c);
        end_turn(c);
        return r;
}

static int code_delete_context(agentix_call *call, const msgpack_object *argv, size_t argc) {
        _cleanup_release_ Context *c = acquire(&argv[0]);

        if (!c)
                return raise_not_found(call, &argv[0]);
        pthread_mutex_lock(&lock);
        if (c->kernel)
                jupyter_kernel_kill(c->kernel); /* a run in progress returns; the last reference frees */
        pthread_mutex_unlock(&lock);
        context_unlist(c);
        return 0;
}

static int code_contexts(agentix_call *call, const msgpack_object *argv, size_t argc) {
        msgpack_packer *pk = agentix_call_result(call);
        size_t n = 0;
        int r = 0;

        pthread_mutex_lock(&lock);
        for (size_t i = 0; i < CODE_CONTEXTS_MAX; i++)
                n += contexts[i] != NULL;
        r |= msgpack_pack_array(pk, n);
        for (size_t i = 0; i < CODE_CONTEXTS_MAX; i++) {
                const Context *c = contexts[i];

                if (!c)
                        continue;
                r |= msgpack_pack_map(pk, 7);
                r |= agentix_pack_kv_str(pk, "id", c->id);
                r |= agentix_pack_kv_str(pk, "language", c->language);
                r |= agentix_pack_kv_str(pk, "kernel", c->kernel_name);
                r |= agentix_pack_kv_str(pk, "cwd", c->cwd);
                if (c->kernel)
                        r |= agentix_pack_kv_int(pk, "pid", jupyter_kernel_pid(c->kernel));
                else {
                        r |= mp_pack_cstr(pk, "pid");
                        r |= msgpack_pack_nil(pk);
                }
                r |= agentix_pack_kv_bool(pk, "running", c->in_use);
                r |= agentix_pack_kv_int(pk, "queued", c->queued);
        }
        pthread_mutex_unlock(&lock);
        return r < 0 ? -ENOMEM : 0;
}

/* The worker is done: its kernels, in sessions of their own, would outlive it. */
void code_module_shutdown(void) {
        for (size_t i = 0; i < CODE_CONTEXTS_MAX; i++) {
                Context *c = TAKE_PTR(contexts[i]);

                if (!c)
                        continue;
                if (--c->refs == 0)
                        context_free(c);
                else if (c->kernel)
                        jupyter_kernel_kill(c->kernel); /* a call still holds it: at least the kernel goes */
        }
}

static const agentix_function code_functions[] = {
        { "create_context", AGENTIX_SHAPE_UNARY, "(language: str? = None, cwd: str? = None, env: map? = None) -> str",
          create_context, "a new code context on a Jupyter kernel (default language python); returns its id" },
        { "run", AGENTIX_SHAPE_STREAM,
          "(code: str, context: str? = None, language: str? = None, env: map? = None, timeout: float? = None, "
          "max_output: int = 16777216)",
          code_run, "run code in a context: a stream of {type: stdout|stderr|result|error|execution_count, …}",
          AGENTIX_FUNCTION_ORDERED },
        { "interrupt", AGENTIX_SHAPE_UNARY, "(context: str) -> none", code_interrupt, "^C to a context's kernel" },
        { "restart", AGENTIX_SHAPE_UNARY, "(context: str) -> none", code_restart, "a fresh kernel for a context" },
        { "delete_context", AGENTIX_SHAPE_UNARY, "(id: str) -> none", code_delete_context,
          "end a context and its kernel" },
        { "contexts", AGENTIX_SHAPE_UNARY, "() -> list", code_contexts,
          "the contexts: [{id, language, kernel, cwd, pid, running, queued}]" },
        {},
};

const agentix_module agentix_builtin_code = {
        .abi = AGENTIX_MODULE_ABI,
        .name = "code",
        .doc = "Stateful code contexts on Jupyter kernels: variables, imports and figures kept between runs.",
        .functions = code_functions,
};

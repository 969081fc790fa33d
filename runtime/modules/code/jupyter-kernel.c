/* SPDX-License-Identifier: MIT */
#include <arpa/inet.h>
#include <errno.h>
#include <stdatomic.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <zmq.h>

#include "exec-env.h"
#include "jupyter-kernel.h"
#include "macro.h"
#include "strv.h"

#define LOG_TAIL_MAX 2048
#define FRAMES_MAX 32   /* frames of one message kept; buffers beyond are dropped */
/* Messages taken from a socket in one turn of execute()'s loop: a kernel that sends without
 * pause (or a client that takes items slowly) must not keep the loop from its deadline, the
 * caller's cancellation and the kernel's death. */
#define MESSAGES_PER_TURN 64

enum { PORT_SHELL, PORT_IOPUB, PORT_STDIN, PORT_CONTROL, PORT_HB, N_PORTS };

struct JupyterKernel {
        JupyterSession session;
        char *name, *language;
        bool interrupt_message;
        char *dir;              /* private directory: connection.json, kernel.log, ipc sockets */
        char *ipc;              /* the channels' socket path prefix (DIR/kernel): PREFIX-PORT; NULL: tcp */
        pid_t pid;              /* = its process group */
        int pidfd;
        bool reaped;
        void *shell, *iopub, *control;
        pthread_mutex_t control_lock;
        atomic_bool interrupt_asked; /* a ^C for the run in progress (jupyter_kernel_ask_interrupt) */
};

/* One ZeroMQ context for the worker: its I/O thread serves every kernel. */
static void *zmq_context;
static pthread_once_t zmq_once = PTHREAD_ONCE_INIT;

static void zmq_context_make(void) {
        zmq_context = zmq_ctx_new();
        /* Closing a socket never waits for unsent messages to a dead kernel. */
        if (zmq_context)
                (void) zmq_ctx_set(zmq_context, ZMQ_BLOCKY, 0);
}

/* Ports the kernel will bind: free now (bound to port 0 and released). Racy by nature, as in
 * jupyter_client; the sandbox is ours, so nobody else is racing for loopback ports. */
static int free_ports(int ports[N_PORTS]) {
        int fds[N_PORTS], r = 0;

        for (size_t i = 0; i < N_PORTS; i++)
                fds[i] = -EBADF;
        for (size_t i = 0; i < N_PORTS && r == 0; i++) {
                struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
                socklen_t len = sizeof(a);

                fds[i] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
                if (fds[i] < 0 || bind(fds[i], (struct sockaddr *) &a, sizeof(a)) < 0 ||
                    getsockname(fds[i], (struct sockaddr *) &a, &len) < 0)
                        r = -errno;
                else
                        ports[i] = ntohs(a.sin_port);
        }
        for (size_t i = 0; i < N_PORTS; i++)
                safe_close(fds[i]);
        return r;
}

static int write_connection_file(JupyterKernel *k, const int ports[N_PORTS], char **ret_path) {
        _cleanup_free_ char *path = NULL;
        json_t *j;
        int r;

        if (asprintf(&path, "%s/connection.json", k->dir) < 0)
                return -ENOMEM;
        j = json_pack("{s:i, s:i, s:i, s:i, s:i, s:s, s:s, s:s, s:s, s:s}", "shell_port", ports[PORT_SHELL],
                      "iopub_port", ports[PORT_IOPUB], "stdin_port", ports[PORT_STDIN], "control_port",
                      ports[PORT_CONTROL], "hb_port", ports[PORT_HB], "ip", k->ipc ?: "127.0.0.1", "key", k->session.key,
                      "transport", k->ipc ? "ipc" : "tcp", "signature_scheme", "hmac-sha256", "kernel_name", k->name);
        if (!j)
                return -ENOMEM;
        r = json_dump_file(j, path, JSON_COMPACT) < 0 ? -EIO : 0;
        json_decref(j);
        if (r < 0)
                return r;
        *ret_path = TAKE_PTR(path);
        return 0;
}

/* `arg` with every "{connection_file}" and "{resource_dir}" filled in. */
static char *fill_in(const char *arg, const char *connection_file, const char *resource_dir) {
        static const char cf[] = "{connection_file}", rd[] = "{resource_dir}";
        char *out = NULL;
        size_t size = 0;
        FILE *f = open_memstream(&out, &size);

        if (!f)
                return NULL;
        for (const char *p = arg; *p;)
                if (strncmp(p, cf, strlen(cf)) == 0) {
                        fputs(connection_file, f);
                        p += strlen(cf);
                } else if (strncmp(p, rd, strlen(rd)) == 0) {
                        fputs(resource_dir, f);
                        p += strlen(rd);
                } else
                        fputc(*p++, f);
        if (fclose(f) != 0) {
                free(out);
                return NULL;
        }
        return out;
}

/* base in PATH's directories (only those under /nix with bundle_only), or NULL. */
static char *search_path(const char *base, char *const *env, bool bundle_only) {
        _cleanup_free_ char *copy = strdup(env_get(env, "PATH") ?: "/usr/local/bin:/usr/bin:/bin");
        char *saveptr = NULL;

        if (!copy)
                return NULL;
        for (char *dir = strtok_r(copy, ":", &saveptr); dir; dir = strtok_r(NULL, ":", &saveptr)) {
                char *candidate;

                if (dir[0] != '/' || (bundle_only && !startswith(dir, "/nix/")))
                        continue;
                if (asprintf(&candidate, "%s/%s", dir, base) < 0)
                        return NULL;
                if (access(candidate, X_OK) == 0)
                        return candidate;
                free(candidate);
        }
        return NULL;
}

/* The program to run for argv[0]. A kernelspec names its interpreter by the path it had where
 * it was installed (/usr/bin/python3) or by a bare name (python3). A bundle's kernelspec (under
 * /nix) runs the bundle's interpreter even when the task image has one of that path or name
 * earlier in PATH: the image's python3 has neither the bundle's packages nor, often, its
 * standard library (Debian's python3-minimal has no json), and fails on the bundle's
 * PYTHONPATH. Otherwise a missing absolute path is looked up by its last component in PATH, as
 * a bare name is. */
static char *find_program(const char *name, const char *spec_dir, char *const *env) {
        const char *base = strrchr(name, '/') ? strrchr(name, '/') + 1 : name;
        char *found;

        if (spec_dir && startswith(spec_dir, "/nix/") && !startswith(name, "/nix/")) {
                found = search_path(base, env, true);
                if (found)
                        return found;
        }
        if (strchr(name, '/') && (access(name, X_OK) == 0 || name[0] != '/'))
                return strdup(name);
        found = search_path(base, env, false);
        return found ?: strdup(name); /* posix_spawn reports ENOENT */
}

/* Does the kernelspec run ipykernel (python -m ipykernel_launcher, ipykernel, …)? */
static bool is_ipykernel(char **argv) {
        for (char **a = argv; a && *a; a++)
                if (strstr(*a, "ipykernel"))
                        return true;
        return false;
}

static int spawn_kernel(JupyterKernel *k, const JupyterStartOptions *o, const char *connection_file, char **ret_error) {
        extern char **environ;
        _cleanup_strv_free_ char **argv = NULL, **env = NULL;
        _cleanup_free_ char *program = NULL, *log = NULL;
        _cleanup_free_ EnvOverride *overrides = NULL;
        posix_spawn_file_actions_t fa;
        posix_spawnattr_t attr;
        sigset_t none, all;
        size_t n = strv_length(o->spec->env);
        int r;

        for (char **a = o->spec->argv; *a; a++) {
                char *filled = fill_in(*a, connection_file, o->spec->dir);

                if (!filled || strv_consume(&argv, filled) < 0)
                        return -ENOMEM;
        }
        /* IPython keeps its history in one SQLite file per profile: kernels running at once
         * (contexts of one sandbox, tests side by side) race on it, and the loser prints
         * "ERROR! Session/line number was not unique in database" into a run's output. Each
         * ipykernel keeps its history in memory instead (In[] and _ih work as before). */
        if (is_ipykernel(argv) && strv_extend(&argv, "--HistoryManager.hist_file=:memory:") < 0)
                return -ENOMEM;
        overrides = calloc(n + 1, sizeof(EnvOverride));
        if (!overrides)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                const char *e = o->spec->env[i], *eq = strchr(e, '=');

                overrides[i] = (EnvOverride) { .key = e, .key_len = (size_t) (eq - e), .value = eq + 1,
                                               .value_len = strlen(eq + 1) };
        }
        r = env_merge(o->env ?: environ, overrides, n, &env);
        if (r < 0)
                return r;
        program = find_program(argv[0], o->spec->dir, env);
        if (!program || asprintf(&log, "%s/kernel.log", k->dir) < 0)
                return -ENOMEM;
        /* argv[0] names the program found: Python finds its prefix (and standard library) from
         * argv[0] when it has a slash, and /usr/bin/python3 would send it to a missing /usr. */
        if (!streq(program, argv[0])) {
                free(argv[0]);
                argv[0] = strdup(program);
                if (!argv[0])
                        return -ENOMEM;
        }

        sigemptyset(&none);
        sigfillset(&all);
        posix_spawnattr_init(&attr);
        posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
        posix_spawnattr_setsigmask(&attr, &none);
        posix_spawnattr_setsigdefault(&attr, &all);
        posix_spawn_file_actions_init(&fa);
        posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
        posix_spawn_file_actions_addopen(&fa, 1, log, O_WRONLY | O_CREAT | O_APPEND, 0600);
        posix_spawn_file_actions_adddup2(&fa, 1, 2);
        if (o->cwd)
                posix_spawn_file_actions_addchdir_np(&fa, o->cwd);
        posix_spawn_file_actions_addclosefrom_np(&fa, 3);
        r = -posix_spawn(&k->pid, program, &fa, &attr, argv, env);
        posix_spawn_file_actions_destroy(&fa);
        posix_spawnattr_destroy(&attr);
        if (r < 0) {
                if (asprintf(ret_error, "cannot start kernel '%s' (%s): %s", k->name, program, strerror(-r)) < 0)
                        *ret_error = NULL;
                k->pid = 0;
                return r;
        }
        k->pidfd = (int) syscall(SYS_pidfd_open, k->pid, 0);
        if (k->pidfd < 0)
                k->pidfd = -errno;
        return 0;
}

static void *socket_to(JupyterKernel *k, int type, int port) {
        char endpoint[128 + 16];
        int zero = 0;
        int64_t max = JUPYTER_MESSAGE_MAX;
        void *s = zmq_socket(zmq_context, type);

        if (!s)
                return NULL;
        if (k->ipc)
                snprintf(endpoint, sizeof(endpoint), "ipc://%s-%d", k->ipc, port);
        else
                snprintf(endpoint, sizeof(endpoint), "tcp://127.0.0.1:%d", port);
        (void) zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof(zero));
        (void) zmq_setsockopt(s, ZMQ_MAXMSGSIZE, &max, sizeof(max));
        if (type == ZMQ_SUB) {
                /* Output waits here while a slow client holds a run back; a kernel's PUB drops
                 * what a full subscriber queue cannot take, so the queue is deep. */
                int hwm = 100000;

                (void) zmq_setsockopt(s, ZMQ_RCVHWM, &hwm, sizeof(hwm));
                (void) zmq_setsockopt(s, ZMQ_SUBSCRIBE, "", 0);
        }
        if (zmq_connect(s, endpoint) < 0) {
                zmq_close(s);
                return NULL;
        }
        return s;
}

static int send_message(JupyterKernel *k, void *socket, const char *msg_type, const json_t *content, char *ret_msg_id,
                        size_t size) {
        JupyterOutgoing m;
        int r;

        r = jupyter_message_build(&k->session, msg_type, content, &m);
        if (r < 0)
                return r;
        for (size_t i = 0; i < 6 && r >= 0; i++)
                if (zmq_send(socket, m.frames[i].iov_base, m.frames[i].iov_len, i < 5 ? ZMQ_SNDMORE : 0) < 0)
                        r = -errno;
        if (r >= 0 && ret_msg_id)
                snprintf(ret_msg_id, size, "%s", m.msg_id);
        jupyter_outgoing_done(&m);
        return r;
}

/* One message from `socket` without waiting: 1 and *ret set, 0 none waiting, -EBADMSG/-EINVAL
 * a message that was dropped (bad signature, not JSON), <0 other errors. */
static int recv_message(JupyterKernel *k, void *socket, JupyterMessage *ret) {
        zmq_msg_t parts[FRAMES_MAX];
        struct iovec frames[FRAMES_MAX];
        size_t n = 0;
        int more = 1, r = 0;

        while (more) {
                zmq_msg_t part;
                size_t more_size = sizeof(more);

                zmq_msg_init(&part);
                if (zmq_msg_recv(&part, socket, n == 0 ? ZMQ_DONTWAIT : 0) < 0) {
                        r = errno == EAGAIN ? 0 : -errno;
                        zmq_msg_close(&part);
                        break;
                }
                (void) zmq_getsockopt(socket, ZMQ_RCVMORE, &more, &more_size);
                if (n < FRAMES_MAX) {
                        parts[n] = part;
                        frames[n] = (struct iovec) { zmq_msg_data(&parts[n]), zmq_msg_size(&parts[n]) };
                        n++;
                } else
                        zmq_msg_close(&part);
        }
        if (n > 0 && r == 0) {
                r = jupyter_message_parse(&k->session, frames, n, ret);
                if (r == 0)
                        r = 1;
        }
        for (size_t i = 0; i < n; i++)
                zmq_msg_close(&parts[i]);
        return r;
}

static bool pidfd_exited(JupyterKernel *k) {
        struct pollfd p = { .fd = k->pidfd, .events = POLLIN };

        if (k->reaped)
                return true;
        if (k->pidfd >= 0)
                return poll(&p, 1, 0) > 0;
        /* No pidfd (old kernel): signal 0 finds a zombie alive, so ask without reaping. */
        siginfo_t si = {};
        return waitid(P_PID, (id_t) k->pid, &si, WEXITED | WNOHANG | WNOWAIT) == 0 && si.si_pid == k->pid;
}

bool jupyter_kernel_alive(JupyterKernel *k) {
        return k && k->pid > 0 && !pidfd_exited(k);
}

/* Wait for the kernel to answer kernel_info on shell and for iopub to carry messages. */
static int wait_ready(JupyterKernel *k, uint64_t timeout_usec) {
        uint64_t deadline = now_usec() + timeout_usec, resend = 0;
        char msg_id[JUPYTER_MSG_ID_LEN + 16] = "";
        bool replied = false, published = false;
        int r;

        while (!(replied && published)) {
                zmq_pollitem_t items[] = {
                        { .socket = k->shell, .events = ZMQ_POLLIN },
                        { .socket = k->iopub, .events = ZMQ_POLLIN },
                };
                uint64_t now = now_usec();
                JupyterMessage m;

                if (pidfd_exited(k))
                        return -ESRCH;
                if (now >= deadline)
                        return -ETIMEDOUT;
                /* Until iopub's subscription reaches the kernel, its messages are lost: ask
                 * again now and then; each answer comes with status messages on iopub. */
                if (now >= resend) {
                        r = send_message(k, k->shell, "kernel_info_request", NULL, msg_id, sizeof(msg_id));
                        if (r < 0)
                                return r;
                        resend = now + 500 * 1000;
                }
                if (zmq_poll(items, 2, 100) < 0 && errno != EINTR)
                        return -errno;
                while ((r = recv_message(k, k->shell, &m)) != 0) {
                        if (r < 0)
                                continue;
                        replied = replied || streq(m.msg_type, "kernel_info_reply");
                        jupyter_message_done(&m);
                }
                while ((r = recv_message(k, k->iopub, &m)) != 0) {
                        if (r < 0)
                                continue;
                        published = true;
                        jupyter_message_done(&m);
                }
        }
        return 0;
}

char *jupyter_kernel_log_tail(const JupyterKernel *k) {
        _cleanup_free_ char *path = NULL;
        _cleanup_close_ int fd = -EBADF;
        char buf[LOG_TAIL_MAX + 1];
        struct stat st;
        ssize_t n;
        off_t from;

        if (asprintf(&path, "%s/kernel.log", k->dir) < 0)
                return NULL;
        fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0 || fstat(fd, &st) < 0)
                return strdup("");
        from = st.st_size > LOG_TAIL_MAX ? st.st_size - LOG_TAIL_MAX : 0;
        n = pread(fd, buf, LOG_TAIL_MAX, from);
        buf[n > 0 ? n : 0] = 0;
        /* Trailing newlines off; from the middle of a line, start at the next one. */
        while (n > 0 && buf[n - 1] == '\n')
                buf[--n] = 0;
        if (from > 0 && strchr(buf, '\n'))
                return strdup(strchr(buf, '\n') + 1);
        return strdup(buf);
}

int jupyter_kernel_start(const JupyterStartOptions *o, JupyterKernel **ret, char **ret_error) {
        extern char **environ;
        _cleanup_free_ char *connection_file = NULL;
        const char *tmp = env_get(o->env ?: environ, "TMPDIR");
        int ports[N_PORTS];
        JupyterKernel *k;
        int r;

        *ret_error = NULL;
        pthread_once(&zmq_once, zmq_context_make);
        if (!zmq_context)
                return -errno ?: -ENOMEM;
        k = calloc(1, sizeof(*k));
        if (!k)
                return -ENOMEM;
        k->pidfd = -EBADF;
        pthread_mutex_init(&k->control_lock, NULL);
        k->name = strdup(o->spec->name);
        k->language = strdup(o->spec->language);
        k->interrupt_message = o->spec->interrupt_message;
        if (asprintf(&k->dir, "%s/agentix-kernel-XXXXXX", tmp && tmp[0] == '/' ? tmp : "/tmp") < 0)
                k->dir = NULL;
        if (!k->name || !k->language || !k->dir) {
                r = -ENOMEM;
                goto fail;
        }
        if (!mkdtemp(k->dir)) {
                r = -errno;
                if (asprintf(ret_error, "cannot make the kernel's directory %s: %s", k->dir, strerror(-r)) < 0)
                        *ret_error = NULL;
                free(k->dir);
                k->dir = NULL;
                goto fail;
        }
        /* ipykernel speaks ZeroMQ over Unix sockets in the kernel's private (0700) directory:
         * over TCP, every account in the sandbox could reach its ports on 127.0.0.1 (iopub is
         * a PUB socket that any subscriber reads, signatures or not: all the output of root's
         * kernel) and could take a port between free_ports() and the kernel's bind. Other
         * kernels may know only TCP, and a socket path has room for 107 bytes. */
        if (is_ipykernel(o->spec->argv) &&
            strlen(k->dir) + strlen("/kernel-N") < sizeof(((struct sockaddr_un *) NULL)->sun_path) &&
            asprintf(&k->ipc, "%s/kernel", k->dir) < 0) {
                k->ipc = NULL;
                r = -ENOMEM;
                goto fail;
        }
        r = jupyter_session_init(&k->session);
        if (r >= 0 && k->ipc)
                for (size_t i = 0; i < N_PORTS; i++)
                        ports[i] = (int) i + 1;
        else if (r >= 0)
                r = free_ports(ports);
        if (r >= 0)
                r = write_connection_file(k, ports, &connection_file);
        if (r >= 0)
                r = spawn_kernel(k, o, connection_file, ret_error);
        if (r < 0)
                goto fail;

        k->shell = socket_to(k, ZMQ_DEALER, ports[PORT_SHELL]);
        k->iopub = socket_to(k, ZMQ_SUB, ports[PORT_IOPUB]);
        k->control = socket_to(k, ZMQ_DEALER, ports[PORT_CONTROL]);
        if (!k->shell || !k->iopub || !k->control) {
                r = -errno ?: -ENOMEM;
                goto fail;
        }
        r = wait_ready(k, o->timeout_usec ?: JUPYTER_START_TIMEOUT_USEC);
        if (r < 0) {
                _cleanup_free_ char *tail = jupyter_kernel_log_tail(k);

                if (asprintf(ret_error, "kernel '%s' %s%s%s", k->name,
                             r == -ESRCH ? "exited while starting" : r == -ETIMEDOUT ? "did not answer in time" : strerror(-r),
                             tail && tail[0] ? ": " : "", tail ?: "") < 0)
                        *ret_error = NULL;
                goto fail;
        }
        *ret = k;
        return 0;
fail:
        jupyter_kernel_free(k);
        return r;
}

static void remove_dir(const char *dir) {
        static const char *const files[] = { "connection.json", "kernel.log", "kernel-1", "kernel-2", "kernel-3",
                                             "kernel-4", "kernel-5" };

        for (size_t i = 0; i < ELEMENTSOF(files); i++) {
                _cleanup_free_ char *p = NULL;

                if (asprintf(&p, "%s/%s", dir, files[i]) >= 0)
                        (void) unlink(p);
        }
        (void) rmdir(dir);
}

void jupyter_kernel_free(JupyterKernel *k) {
        if (!k)
                return;
        if (k->shell)
                zmq_close(k->shell);
        if (k->iopub)
                zmq_close(k->iopub);
        if (k->control)
                zmq_close(k->control);
        if (k->pid > 0 && !k->reaped) {
                (void) kill(-k->pid, SIGKILL);
                while (waitpid(k->pid, NULL, 0) < 0 && errno == EINTR)
                        ;
        }
        safe_close(k->pidfd);
        if (k->dir)
                remove_dir(k->dir);
        pthread_mutex_destroy(&k->control_lock);
        free(k->dir);
        free(k->ipc);
        free(k->name);
        free(k->language);
        free(k);
}

pid_t jupyter_kernel_pid(const JupyterKernel *k) {
        return k->pid;
}

const char *jupyter_kernel_name(const JupyterKernel *k) {
        return k->name;
}

const char *jupyter_kernel_language(const JupyterKernel *k) {
        return k->language;
}

int jupyter_kernel_interrupt(JupyterKernel *k) {
        int r = 0;

        if (!k->interrupt_message)
                return kill(k->pid, SIGINT) < 0 ? -errno : 0;
        pthread_mutex_lock(&k->control_lock);
        /* Earlier replies are of no interest: drop them so they do not pile up. */
        for (JupyterMessage m; (r = recv_message(k, k->control, &m)) != 0;)
                if (r > 0)
                        jupyter_message_done(&m);
        r = send_message(k, k->control, "interrupt_request", NULL, NULL, 0);
        pthread_mutex_unlock(&k->control_lock);
        return r;
}

int jupyter_kernel_ask_interrupt(JupyterKernel *k) {
        atomic_store(&k->interrupt_asked, true);
        return jupyter_kernel_interrupt(k);
}

void jupyter_kernel_forget_interrupt(JupyterKernel *k) {
        atomic_store(&k->interrupt_asked, false);
}

void jupyter_kernel_kill(JupyterKernel *k) {
        if (k->pid > 0 && !k->reaped)
                (void) kill(-k->pid, SIGKILL);
}

static bool fd_readable(int fd) {
        struct pollfd p = { .fd = fd, .events = POLLIN };

        return fd >= 0 && poll(&p, 1, 0) > 0;
}

int jupyter_kernel_execute(JupyterKernel *k, const char *code, bool silent, uint64_t timeout_usec,
                           const JupyterExecuteHooks *h, JupyterExecuteResult *ret) {
        char msg_id[JUPYTER_MSG_ID_LEN + 16];
        uint64_t deadline = timeout_usec ? now_usec() + timeout_usec : UINT64_MAX, last_interrupt = 0, idle_at = 0;
        bool idle = false, replied = false, interrupted = false, asked = false, heard_since_interrupt = false;
        json_t *content;
        int r;

        *ret = (JupyterExecuteResult) { .execution_count = -1 };
        if (!jupyter_kernel_alive(k))
                return -ESRCH;
        content = json_pack("{s:s, s:b, s:b, s:{}, s:b, s:b}", "code", code, "silent", silent, "store_history", !silent,
                            "user_expressions", "allow_stdin", false, "stop_on_error", false);
        if (!content)
                return -ENOMEM;
        r = send_message(k, k->shell, "execute_request", content, msg_id, sizeof(msg_id));
        json_decref(content);
        if (r < 0)
                return r;

        while (!(idle && replied)) {
                zmq_pollitem_t items[4] = {
                        { .socket = k->shell, .events = ZMQ_POLLIN },
                        { .socket = k->iopub, .events = ZMQ_POLLIN },
                };
                int n_items = 2;
                uint64_t now = now_usec();
                long wait_ms = 1000;
                JupyterMessage m;

                /* Time's up or the caller gave up: ^C once, then kill if it does not stop. */
                if (!interrupted && h->cancelled && fd_readable(h->wait_fd) && h->cancelled(h->userdata))
                        ret->cancelled = true;
                if (!interrupted && now >= deadline)
                        ret->timed_out = true;
                if (!interrupted && (ret->cancelled || ret->timed_out)) {
                        interrupted = true;
                        (void) jupyter_kernel_interrupt(k);
                        last_interrupt = now;
                        deadline = now + JUPYTER_INTERRUPT_GRACE_USEC;
                } else if (interrupted && now >= deadline) {
                        jupyter_kernel_kill(k);
                        deadline = UINT64_MAX;
                } else if (!interrupted && !silent && atomic_exchange(&k->interrupt_asked, false)) {
                        /* The user's ^C (sent already): repeated like ours while the kernel is
                         * silent, but never followed by a kill. */
                        asked = true;
                        heard_since_interrupt = false;
                        last_interrupt = now;
                } else if (((interrupted && deadline != UINT64_MAX) || asked) && !heard_since_interrupt &&
                           now - last_interrupt >= JUPYTER_INTERRUPT_REPEAT_USEC) {
                        /* A kernel ignores SIGINT between runs (ipykernel sets it only while
                         * user code runs): one that came as the run was starting is lost. But
                         * once the kernel says something, it is handling the first: a second
                         * would land in its own code. */
                        (void) jupyter_kernel_interrupt(k);
                        last_interrupt = now;
                }
                if (deadline != UINT64_MAX)
                        wait_ms = (long) MIN((deadline - MIN(deadline, now)) / 1000 + 1, 1000u);
                if (interrupted || asked)
                        wait_ms = MIN(wait_ms, (long) (JUPYTER_INTERRUPT_REPEAT_USEC / 1000));
                /* Idle without a reply: a ^C that landed after ipykernel took the request but
                 * before the code ran ends the handler with no reply at all. The reply (on
                 * another socket) may only be late: give it a moment, then end the run. */
                if (idle && !replied) {
                        if (now - idle_at >= JUPYTER_REPLY_GRACE_USEC)
                                break;
                        wait_ms = MIN(wait_ms, 50);
                }

                if (k->pidfd >= 0)
                        items[n_items++] = (zmq_pollitem_t) { .fd = k->pidfd, .events = ZMQ_POLLIN };
                if (h->wait_fd >= 0 && !interrupted)
                        items[n_items++] = (zmq_pollitem_t) { .fd = h->wait_fd, .events = ZMQ_POLLIN };
                else if (k->pidfd < 0)
                        wait_ms = MIN(wait_ms, 100); /* nothing wakes us for the kernel's death */
                r = zmq_poll(items, n_items, wait_ms);
                if (r < 0 && errno != EINTR)
                        return -errno;
                for (unsigned taken = 0; taken < MESSAGES_PER_TURN && (r = recv_message(k, k->iopub, &m)) != 0; taken++) {
                        const char *state;

                        if (r < 0)
                                continue;
                        if (!m.parent_msg_id || !streq(m.parent_msg_id, msg_id)) {
                                jupyter_message_done(&m); /* another run's, or the kernel's own */
                                continue;
                        }
                        /* What the kernel says before user code runs (busy, execute_input)
                         * does not show that a ^C sent then was taken. */
                        if (!streq(m.msg_type, "status") && !streq(m.msg_type, "execute_input"))
                                heard_since_interrupt = interrupted || asked;
                        state = json_string_value(json_object_get(m.content, "execution_state"));
                        if (streq(m.msg_type, "status")) {
                                if (!idle && streq(state ?: "", "idle")) {
                                        idle = true;
                                        idle_at = now_usec();
                                }
                        } else if (h->on_message && h->on_message(h->userdata, &m) < 0 && !interrupted) {
                                interrupted = true;
                                ret->cancelled = true;
                                (void) jupyter_kernel_interrupt(k);
                                last_interrupt = now_usec();
                                deadline = last_interrupt + JUPYTER_INTERRUPT_GRACE_USEC;
                        }
                        jupyter_message_done(&m);
                }
                for (unsigned taken = 0; taken < MESSAGES_PER_TURN && (r = recv_message(k, k->shell, &m)) != 0; taken++) {
                        if (r < 0)
                                continue;
                        if (m.parent_msg_id && streq(m.parent_msg_id, msg_id) && streq(m.msg_type, "execute_reply")) {
                                json_t *count = json_object_get(m.content, "execution_count");

                                replied = true;
                                snprintf(ret->status, sizeof(ret->status), "%s",
                                         json_string_value(json_object_get(m.content, "status")) ?: "");
                                if (json_is_integer(count))
                                        ret->execution_count = json_integer_value(count);
                        }
                        jupyter_message_done(&m);
                }
                if (!(idle && replied) && pidfd_exited(k)) {
                        ret->died = true;
                        break;
                }
        }
        return 0;
}

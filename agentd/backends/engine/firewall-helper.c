/* SPDX-License-Identifier: MIT */
/* Running agentix-firewall: once, waited for, at start (the networks' rules), and on the loop for
 * each sandbox with an egress list: asked through agentix-egress.socket (a privileged helper
 * service, so agentd itself needs no capabilities), or run as a child (watched through its
 * pidfd, so agentd needs no SIGCHLD handling). Either way its output is read as it comes, so
 * nothing blocks on a full pipe. */
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "firewall-helper.h"
#include "log.h"
#include "macro.h"
#include "strv.h"

#define CAP_NET_ADMIN_BIT 12
#define CAP_SYS_ADMIN_BIT 21
#define OUTPUT_MAX 4096
#define JOB_TIMEOUT_USEC (30ULL * 1000 * 1000)
#define ARGS_MAX 128
#define REQUEST_MAX 4096
#define EGRESS_SOCKET_DEFAULT "/run/agentix/egress.sock"

extern char **environ;

struct FirewallJob {
        pid_t pid;               /* -1: asked through the socket (output_fd) */
        int pidfd;
        int output_fd;
        sd_event_source *exit_source, *output_source, *timer;
        char output[OUTPUT_MAX + 1];
        size_t output_size;
        firewall_done_t done;
        void *userdata;
};

const char *firewall_helper_path(void) {
        return getenv("AGENTIX_FIREWALL") ?: AGENTIX_LIBEXECDIR "/agentix-firewall";
}

const char *firewall_egress_socket(void) {
        const char *path = getenv("AGENTIX_EGRESS_SOCKET") ?: EGRESS_SOCKET_DEFAULT;
        struct stat st;

        return stat(path, &st) >= 0 && S_ISSOCK(st.st_mode) ? path : NULL;
}

/* Our effective capabilities (/proc/self/status's CapEff), read once: agentd never changes them. */
static unsigned long long effective_capabilities(void) {
        static unsigned long long caps;
        static bool known;
        char line[256];

        if (!known) {
                _cleanup_fclose_ FILE *f = fopen("/proc/self/status", "re");

                while (f && fgets(line, sizeof(line), f))
                        if (sscanf(line, "CapEff: %llx", &caps) == 1)
                                break;
                known = true;
        }
        return caps;
}

bool firewall_helper_allowed(bool namespaces) {
        unsigned long long need = 1ULL << CAP_NET_ADMIN_BIT;

        if (namespaces)
                need |= 1ULL << CAP_SYS_ADMIN_BIT;
        return (effective_capabilities() & need) == need;
}

/* argv for the helper: its path, then args. */
static int make_argv(char *const *args, char **argv) {
        size_t n = 0;

        argv[n++] = (char *) firewall_helper_path();
        for (; args && *args; args++) {
                if (n >= ARGS_MAX)
                        return -E2BIG;
                argv[n++] = *args;
        }
        argv[n] = NULL;
        return 0;
}

/* Spawn it with stdin from /dev/null and stdout, stderr to output_fd (or ours: -1). */
static int spawn(char *const *args, int output_fd, pid_t *ret_pid) {
        char *argv[ARGS_MAX + 2];
        posix_spawn_file_actions_t fa;
        int r;

        r = make_argv(args, argv);
        if (r < 0)
                return r;
        if (posix_spawn_file_actions_init(&fa) != 0)
                return -ENOMEM;
        (void) posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
        if (output_fd >= 0)
                (void) posix_spawn_file_actions_adddup2(&fa, output_fd, STDOUT_FILENO);
        (void) posix_spawn_file_actions_adddup2(&fa, STDOUT_FILENO, STDERR_FILENO);
        r = posix_spawn(ret_pid, argv[0], &fa, NULL, argv, environ);
        posix_spawn_file_actions_destroy(&fa);
        return -r;
}

static int exit_status(int status) {
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

int firewall_helper_run(char *const *args) {
        int status, r;
        pid_t pid;

        r = spawn(args, -1, &pid);
        if (r < 0)
                return r;
        while (waitpid(pid, &status, 0) < 0)
                if (errno != EINTR)
                        return -errno;
        return exit_status(status);
}

static void job_free(FirewallJob *j) {
        sd_event_source_disable_unref(j->exit_source);
        sd_event_source_disable_unref(j->output_source);
        sd_event_source_disable_unref(j->timer);
        safe_close(j->pidfd);
        safe_close(j->output_fd);
        free(j);
}

/* Keep the first OUTPUT_MAX bytes, drop the rest; false at the end (or an error). */
static bool read_output(FirewallJob *j) {
        char discard[1024];
        ssize_t n;

        for (;;) {
                bool keep = j->output_size < OUTPUT_MAX;

                n = read(j->output_fd, keep ? j->output + j->output_size : discard,
                         keep ? OUTPUT_MAX - j->output_size : sizeof(discard));
                if (n > 0) {
                        if (keep)
                                j->output_size += (size_t) n;
                        continue;
                }
                if (n < 0 && errno == EINTR)
                        continue;
                return n < 0 && errno == EAGAIN;
        }
}

static void finish(FirewallJob *j, int status) {
        (void) read_output(j);
        j->output[j->output_size] = '\0';
        j->done(j->userdata, status, j->output);
        job_free(j);
}

/* The helper service's answer, complete: its last line "ok" is success. */
static void finish_answer(FirewallJob *j) {
        size_t n = j->output_size;

        while (n > 0 && j->output[n - 1] == '\n')
                n--;
        j->output[n] = '\0';
        if (n >= 2 && streq(j->output + n - 2, "ok") && (n == 2 || j->output[n - 3] == '\n')) {
                j->output[n - 2] = '\0';
                finish(j, 0);
        } else
                finish(j, 1);
}

static int on_output(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        FirewallJob *j = userdata;

        if (read_output(j))
                return 0;
        j->output_source = sd_event_source_disable_unref(j->output_source);
        if (j->pid < 0)
                finish_answer(j); /* the service closed the connection: it is done */
        return 0;
}

static int on_child_exit(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        FirewallJob *j = userdata;
        int status;
        pid_t p;

        p = waitpid(j->pid, &status, WNOHANG);
        if (p == 0)
                return 0; /* not yet (a spurious wake-up) */
        finish(j, p < 0 ? -errno : exit_status(status));
        return 0;
}

static int on_timeout(sd_event_source *s, uint64_t usec, void *userdata) {
        FirewallJob *j = userdata;

        j->timer = sd_event_source_disable_unref(j->timer);
        if (j->pid < 0) {
                log_warning("%s did not answer within 30 s.", firewall_egress_socket() ?: "The egress helper");
                finish(j, -ETIMEDOUT);
                return 0;
        }
        log_warning("%s took longer than 30 s: killed.", firewall_helper_path());
        (void) kill(j->pid, SIGKILL); /* its exit comes through the pidfd */
        return 0;
}

/* Read its output as it comes, and give it 30 s. */
static int watch_output(FirewallJob *j, sd_event *event) {
        int r;

        r = sd_event_add_io(event, &j->output_source, j->output_fd, EPOLLIN, on_output, j);
        if (r < 0)
                return r;
        return sd_event_add_time_relative(event, &j->timer, CLOCK_MONOTONIC, JOB_TIMEOUT_USEC, 0, on_timeout, j);
}

int firewall_helper_start(sd_event *event, char *const *args, firewall_done_t done, void *userdata,
                          FirewallJob **ret) {
        _cleanup_close_ int write_end = -EBADF;
        int pipefd[2], r;
        FirewallJob *j;

        j = calloc(1, sizeof(*j));
        if (!j)
                return -ENOMEM;
        *j = (FirewallJob) { .pid = -1, .pidfd = -EBADF, .output_fd = -EBADF, .done = done, .userdata = userdata };
        if (pipe2(pipefd, O_CLOEXEC | O_NONBLOCK) < 0) {
                r = -errno;
                job_free(j);
                return r;
        }
        j->output_fd = pipefd[0];
        write_end = pipefd[1];
        r = spawn(args, write_end, &j->pid);
        if (r < 0) {
                job_free(j);
                return r;
        }
        j->pidfd = (int) syscall(SYS_pidfd_open, j->pid, 0);
        if (j->pidfd < 0) {
                r = -errno;
                (void) kill(j->pid, SIGKILL);
                (void) waitpid(j->pid, NULL, 0);
                job_free(j);
                return r;
        }
        r = sd_event_add_io(event, &j->exit_source, j->pidfd, EPOLLIN, on_child_exit, j);
        if (r >= 0)
                r = watch_output(j, event);
        if (r < 0) {
                firewall_job_cancel(j);
                return r;
        }
        *ret = j;
        return 0;
}

int firewall_helper_ask(sd_event *event, const char *socket_path, char *const *args, firewall_done_t done,
                        void *userdata, FirewallJob **ret) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        char request[REQUEST_MAX];
        size_t n = 0;
        FirewallJob *j;
        ssize_t w;
        int r;

        if (strlen(socket_path) >= sizeof(sa.sun_path))
                return -ENAMETOOLONG;
        strcpy(sa.sun_path, socket_path);
        for (char *const *a = args; a && *a; a++) {
                int k = snprintf(request + n, sizeof(request) - n, "%s%s", n ? " " : "", *a);
                if (k < 0 || (size_t) k >= sizeof(request) - n - 1)
                        return -E2BIG;
                n += (size_t) k;
        }
        request[n++] = '\n';

        j = calloc(1, sizeof(*j));
        if (!j)
                return -ENOMEM;
        *j = (FirewallJob) { .pid = -1, .pidfd = -EBADF, .done = done, .userdata = userdata };
        j->output_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (j->output_fd < 0 || connect(j->output_fd, (struct sockaddr *) &sa, sizeof(sa)) < 0) {
                r = -errno;
                job_free(j);
                return r;
        }
        /* One short line into a fresh stream socket's buffer: written at once, or not at all. */
        w = send(j->output_fd, request, n, MSG_NOSIGNAL);
        if (w != (ssize_t) n || shutdown(j->output_fd, SHUT_WR) < 0) {
                r = w < 0 ? -errno : -EIO;
                job_free(j);
                return r;
        }
        r = watch_output(j, event);
        if (r < 0) {
                job_free(j);
                return r;
        }
        *ret = j;
        return 0;
}

bool firewall_egress_possible(void) {
        return firewall_egress_socket() || firewall_helper_allowed(true);
}

int firewall_egress_start(sd_event *event, const char *netns, char *const *cidrs, firewall_done_t done,
                          void *userdata, FirewallJob **ret) {
        const char *socket_path = firewall_egress_socket();
        _cleanup_strv_free_ char **args = NULL;
        int r;

        r = strv_extend(&args, "egress");
        if (r >= 0)
                r = strv_extend(&args, netns);
        for (char *const *c = cidrs; r >= 0 && c && *c; c++)
                r = strv_extend(&args, *c);
        if (r < 0)
                return r;
        if (socket_path)
                return firewall_helper_ask(event, socket_path, args, done, userdata, ret);
        if (!firewall_helper_allowed(true))
                return -EPERM;
        return firewall_helper_start(event, args, done, userdata, ret);
}

void firewall_job_cancel(FirewallJob *j) {
        if (!j)
                return;
        if (j->pid > 0) {
                (void) kill(j->pid, SIGKILL);
                (void) waitpid(j->pid, NULL, 0); /* SIGKILL'd: at once */
        }
        job_free(j);
}

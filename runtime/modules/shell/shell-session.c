/* SPDX-License-Identifier: MIT */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "buffer.h"
#include "exec-spawn.h"
#include "macro.h"
#include "shell-session.h"

#define BUNDLE_BASH "/nix/runtime/bin/bash"
#define OPEN_TIMEOUT_DEFAULT_USEC (10ULL * 1000 * 1000)
#define KILL_GRACE_USEC (200ULL * 1000)
#define NONCE_LEN 16
/* \036 (record separator) agentix-NONCE-STATUS \036: never in ordinary output. */
#define MARKER_HEAD_FMT "\036agentix-%s-"
#define MARKER_TAIL '\036'
/* Where each session's command directory is made. A root session's commands must be its own:
 * the directory is made afresh by the session's user, 0700, under a parent no other account
 * may rename entries in (sticky, or writable by its owner alone). */
#define COMMAND_PARENT "/tmp"
#define COMMAND_DIR_PREFIX "agentix-shell-"
#define COMMAND_DIR_RANDOM 16
/* What one read_available() takes from the terminal, at most: a command that writes without
 * pause must not keep the reader from its deadline, its cancellation and its trim. */
#define READ_PER_CALL_MAX (64u * 1024u)

struct ShellSession {
        pid_t pid;              /* bash: session leader, process group leader */
        int master;             /* the PTY (non-blocking) */
        int pidfd;              /* polls readable once the shell exited; -EBADF where unavailable */
        char marker_head[8 + 8 + NONCE_LEN + 2];
        char dir[64];           /* where each run's command is written: ours, 0700 (check_dir()) */
        int dir_fd;             /* that directory, opened when it was made */
        dev_t dir_dev;          /* …and what it was then, to know it again by its path */
        ino_t dir_ino;
        size_t marker_head_len;
        Buffer pending;         /* output not yet handed to a run */
        atomic_bool running;    /* a run holds the session (SessionBusy for another) */
        atomic_bool sent;       /* …and its command has reached the terminal: input now goes to it */
        bool ended;
        int exit_status;        /* the shell's, once reaped */
};

static const char *default_bash(void) {
        static const char *const candidates[] = { BUNDLE_BASH, "/usr/bin/bash", "/bin/bash" };

        for (size_t i = 0; i < ELEMENTSOF(candidates); i++)
                if (access(candidates[i], X_OK) == 0)
                        return candidates[i];
        return NULL;
}

pid_t shell_session_pid(const ShellSession *s) {
        return s->pid;
}

bool shell_session_running(const ShellSession *s) {
        return atomic_load(&s->sent);
}

bool shell_session_busy(const ShellSession *s) {
        return atomic_load(&s->running);
}

bool shell_session_ended(const ShellSession *s) {
        return s->ended;
}

/* Has the shell exited? Reaps it then (flags: WNOHANG, or 0 to wait for it). */
static bool reap(ShellSession *s, int flags) {
        int status;

        if (s->ended)
                return true;
        if (waitpid(s->pid, &status, flags) != s->pid)
                return false;
        s->ended = true;
        s->exit_status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        return true;
}

/* Read what the PTY has now into s->pending, READ_PER_CALL_MAX at most (the caller trims
 * between calls). 0: read something or nothing was there; -EPIPE: the shell is gone. */
static int read_available(ShellSession *s) {
        for (size_t total = 0; total < READ_PER_CALL_MAX;) {
                uint8_t buf[16384];
                ssize_t n = read(s->master, buf, MIN(sizeof(buf), READ_PER_CALL_MAX - total));

                if (n > 0) {
                        if (buffer_append(&s->pending, buf, (size_t) n) < 0)
                                return -ENOMEM;
                        total += (size_t) n;
                        continue;
                }
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0 && errno == EAGAIN)
                        return 0;
                /* EIO: every slave fd is closed, the shell (and its jobs' hold on it) gone. */
                return -EPIPE;
        }
        return 0; /* more may be there: the caller polls again after its trim */
}

/* The marker in s->pending: its offset and total length, and the status it carries. */
static bool find_marker(ShellSession *s, size_t *ret_offset, size_t *ret_len, int *ret_status) {
        const uint8_t *data = buffer_data(&s->pending);
        size_t len = s->pending.len;
        const uint8_t *p = data;

        if (len == 0)
                return false;
        while ((p = memmem(p, len - (size_t) (p - data), s->marker_head, s->marker_head_len))) {
                const uint8_t *q = p + s->marker_head_len, *end = data + len;
                int status = 0;

                while (q < end && *q >= '0' && *q <= '9' && status < 1000)
                        status = status * 10 + (*q++ - '0');
                if (q < end && *q == MARKER_TAIL && q > p + s->marker_head_len) {
                        *ret_offset = (size_t) (p - data);
                        *ret_len = (size_t) (q + 1 - p);
                        *ret_status = status;
                        return true;
                }
                if (q >= end)
                        return false; /* the rest of it has not come yet */
                p++;
        }
        return false;
}

/* Write all of data to the terminal. Only short lines go this way (a run's command is in a
 * file), and the terminal's input does not wait on its output: no reading meanwhile, so that
 * input from another call never races the run's thread for the output. */
static int write_terminal(ShellSession *s, const void *data, size_t size, uint64_t deadline) {
        const uint8_t *p = data;

        while (size > 0) {
                struct pollfd pfd = { .fd = s->master, .events = POLLOUT };
                ssize_t n = write(s->master, p, size);
                uint64_t now;

                if (n > 0) {
                        p += n;
                        size -= (size_t) n;
                        continue;
                }
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0 && errno != EAGAIN)
                        return -errno;
                now = now_usec();
                if (deadline && now >= deadline)
                        return -ETIMEDOUT;
                if (poll(&pfd, 1, deadline ? (int) MIN((deadline - now) / 1000 + 1, 1000ULL) : 1000) < 0 && errno != EINTR)
                        return -errno;
        }
        return 0;
}

/* Wait until the marker comes, the shell ends, the deadline passes or wait_fd wakes. 1: the
 * marker (its offset, length and status); 0: the deadline or a wake-up; -EPIPE: the shell ended.
 * The buffer keeps the first max_keep bytes and the tail a marker may be starting in; what is
 * dropped between them is counted in *ret_dropped. */
static int wait_marker(ShellSession *s, uint64_t deadline, int wait_fd, size_t max_keep, size_t *ret_dropped,
                       size_t *ret_offset, size_t *ret_len, int *ret_status) {
        for (;;) {
                struct pollfd pfd[3] = { { .fd = s->master, .events = POLLIN }, { .fd = s->pidfd, .events = POLLIN },
                                         { .fd = wait_fd, .events = POLLIN } };
                uint64_t now, wait_usec;
                int r;

                r = read_available(s);
                if (find_marker(s, ret_offset, ret_len, ret_status))
                        return 1;
                /* Bounded: keep the first max_keep bytes and the tail a marker may be starting in. */
                if (s->pending.len > max_keep + sizeof(s->marker_head) + 8) {
                        size_t tail = sizeof(s->marker_head) + 8, drop = s->pending.len - max_keep - tail;
                        uint8_t *d = buffer_data(&s->pending);

                        memmove(d + max_keep, d + max_keep + drop, tail);
                        s->pending.len -= drop;
                        *ret_dropped += drop;
                }
                if (r < 0)
                        return r;
                /* A terminal may not say that its last user left (gVisor's does not): the shell's
                 * exit does. What it wrote before going was read above. */
                if (reap(s, WNOHANG))
                        return -EPIPE;
                now = now_usec();
                if (deadline && now >= deadline)
                        return 0;
                wait_usec = deadline ? deadline - now : UINT64_MAX;
                if (s->pidfd < 0)
                        wait_usec = MIN(wait_usec, 100ULL * 1000); /* no pidfd: look again soon */
                r = poll(pfd, wait_fd >= 0 ? 3 : 2,
                         wait_usec == UINT64_MAX ? -1 : (int) MIN(wait_usec / 1000 + 1, (uint64_t) INT32_MAX));
                if (r < 0 && errno != EINTR)
                        return -errno;
                if (wait_fd >= 0 && (pfd[2].revents & POLLIN))
                        return 0;
        }
}

/* SIGINT to the shell's process group: the foreground command and the shell itself, which drops
 * the rest of the command line and gives the prompt back. What ^C on a terminal does, but sent
 * directly: gVisor's terminals signal nobody on ^C. Background commands ignore it (job control
 * is off, as in a script). */
int shell_session_interrupt(ShellSession *s) {
        char slave[128];

        if (s->ended)
                return -EPIPE;
        /* A terminal's ^C also drops the input not yet read: a command line the shell has only
         * begun to read must not run after the interrupt. */
        if (ptsname_r(s->master, slave, sizeof(slave)) == 0) {
                _cleanup_close_ int fd = open(slave, O_RDWR | O_NOCTTY | O_CLOEXEC | O_NONBLOCK);

                if (fd >= 0)
                        (void) tcflush(fd, TCIFLUSH);
        }
        return kill(-s->pid, SIGINT) < 0 ? -errno : 0;
}

int shell_session_input(ShellSession *s, const void *data, size_t size) {
        if (s->ended)
                return -EPIPE;
        return write_terminal(s, data, size, now_usec() + 5ULL * 1000 * 1000);
}

/* SIGKILL to every process of the shell's process group but the shell: the command that would
 * not stop on SIGINT (and background commands with it: without job control they share the
 * group). From /proc, which every runtime has. */
static void kill_commands(ShellSession *s) {
        DIR *d = opendir("/proc");
        struct dirent *de;

        if (!d)
                return;
        while ((de = readdir(d))) {
                char path[64], stat[512];
                _cleanup_close_ int fd = -EBADF;
                const char *close_paren;
                long pid = strtol(de->d_name, NULL, 10), pgrp;
                ssize_t n;

                if (pid <= 0 || pid == s->pid)
                        continue;
                snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
                fd = open(path, O_RDONLY | O_CLOEXEC);
                if (fd < 0 || (n = read(fd, stat, sizeof(stat) - 1)) <= 0)
                        continue;
                stat[n] = 0;
                /* "pid (comm) state ppid pgrp …": comm may hold anything, so from the last ')'. */
                close_paren = strrchr(stat, ')');
                if (close_paren && sscanf(close_paren + 1, " %*c %*d %ld", &pgrp) == 1 && pgrp == s->pid)
                        (void) kill((pid_t) pid, SIGKILL);
        }
        closedir(d);
}

void shell_session_kill(ShellSession *s) {
        (void) kill(-s->pid, SIGKILL);
}

static void run_over(ShellSession *s) {
        atomic_store(&s->sent, false);
        atomic_store(&s->running, false);
}

/* The parent of command directories: no other account may rename or remove what we make in
 * it. -EPERM otherwise. */
static int check_parent(int fd) {
        struct stat st;

        if (fstat(fd, &st) < 0)
                return -errno;
        if (st.st_uid != 0 && st.st_uid != geteuid())
                return -EPERM;
        if ((st.st_mode & (S_IWGRP | S_IWOTH)) && !(st.st_mode & S_ISVTX))
                return -EPERM;
        return 0;
}

/* Is fd a directory of ours, 0700? */
static bool dir_is_ours(int fd, struct stat *ret) {
        struct stat st;

        if (fstat(fd, &st) < 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 07777) != 0700)
                return false;
        if (ret)
                *ret = st;
        return true;
}

/* A new command directory under a new random name, made by us with mkdir (never one that was
 * there: EEXIST picks another name), opened without following a link, and checked: ours, 0700
 * (a umask may have taken bits: set again on the fd). On failure *ret_error says why. */
static int make_dir(ShellSession *s, char **ret_error) {
        static const char alphabet[] = "abcdefghijklmnopqrstuvwxyz0123456789";
        _cleanup_close_ int parent = -EBADF, fd = -EBADF;
        char name[sizeof(COMMAND_DIR_PREFIX) + COMMAND_DIR_RANDOM];
        uint8_t random[COMMAND_DIR_RANDOM];
        struct stat st;
        int r;

        parent = open(COMMAND_PARENT, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (parent < 0)
                return message_set_first(ret_error, -errno, "cannot open %s for the session's commands: %m", COMMAND_PARENT);
        r = check_parent(parent);
        if (r < 0)
                return message_set_first(ret_error, r, "%s is writable by other accounts and not sticky: they could swap "
                                         "the session's commands", COMMAND_PARENT);
        for (unsigned attempt = 0;; attempt++) {
                if (getrandom(random, sizeof(random), 0) != sizeof(random))
                        return -errno;
                memcpy(name, COMMAND_DIR_PREFIX, strlen(COMMAND_DIR_PREFIX));
                for (size_t i = 0; i < COMMAND_DIR_RANDOM; i++)
                        name[strlen(COMMAND_DIR_PREFIX) + i] = alphabet[random[i] % (sizeof(alphabet) - 1)];
                name[sizeof(name) - 1] = 0;
                if (mkdirat(parent, name, 0700) == 0)
                        break;
                if (errno != EEXIST || attempt >= 16)
                        return message_set_first(ret_error, -errno, "cannot make %s/%s for the session's commands: %m",
                                                 COMMAND_PARENT, name);
        }
        fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return message_set_first(ret_error, -errno, "cannot open %s/%s: %m", COMMAND_PARENT, name);
        if (fstat(fd, &st) < 0)
                return -errno;
        if (st.st_uid != geteuid() || !S_ISDIR(st.st_mode))
                return message_set_first(ret_error, -EPERM, "%s/%s is not the directory the session made", COMMAND_PARENT,
                                         name);
        if ((st.st_mode & 07777) != 0700 && fchmod(fd, 0700) < 0)
                return message_set_first(ret_error, -errno, "cannot make %s/%s private: %m", COMMAND_PARENT, name);
        if (!dir_is_ours(fd, &st))
                return message_set_first(ret_error, -EPERM, "%s/%s is not private to the session", COMMAND_PARENT, name);

        safe_close(s->dir_fd);
        s->dir_fd = TAKE_FD(fd);
        s->dir_dev = st.st_dev;
        s->dir_ino = st.st_ino;
        snprintf(s->dir, sizeof(s->dir), "%s/%s", COMMAND_PARENT, name);
        return 0;
}

/* Does s->dir, as bash will open it, lead to the directory we made, still ours and 0700? */
static bool dir_still_ours(ShellSession *s) {
        _cleanup_close_ int fd = open(s->dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        struct stat st;

        return fd >= 0 && dir_is_ours(fd, &st) && st.st_dev == s->dir_dev && st.st_ino == s->dir_ino;
}

/* The command to its file, made anew in our directory. The directory is looked up by its path
 * first, as bash will: a command of the session may have removed it (and another account made
 * one of that name), or opened it to others (chmod): then a new one, under a new name. A new
 * file each run, the old one unlinked first: neither a rename over a file nor a truncation to
 * zero, which ext4 answers by writing the data out at once (auto_da_alloc: a disk flush a run);
 * a small file that is unlinked soon never reaches the disk. */
static int write_command(ShellSession *s, const char *command) {
        _cleanup_close_ int fd = -EBADF;
        _cleanup_free_ char *error = NULL; /* the errno says it to the caller */
        int r;

        if (!dir_still_ours(s)) {
                struct stat st;

                /* The old one goes if it is still there under its name (opened up, say). */
                (void) unlinkat(s->dir_fd, "command", 0);
                if (lstat(s->dir, &st) == 0 && st.st_dev == s->dir_dev && st.st_ino == s->dir_ino)
                        (void) rmdir(s->dir);
                r = make_dir(s, &error);
                if (r < 0)
                        return r;
        }
        if (unlinkat(s->dir_fd, "command", 0) < 0 && errno != ENOENT)
                return -errno;
        fd = openat(s->dir_fd, "command", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd < 0)
                return -errno;
        return loop_write(fd, command, strlen(command));
}

int shell_session_run(ShellSession *s, const char *command, uint64_t timeout_usec, size_t max_output, int wait_fd,
                      bool (*cancelled)(void *userdata), void *userdata, ShellRunResult *ret) {
        _cleanup_buffer_ Buffer line = BUFFER_NULL;
        uint64_t deadline, grace = 0;
        size_t dropped = 0, offset = 0, mlen = 0;
        bool timed_out = false, was_cancelled = false, killed = false;
        int status = -1, r;
        bool expected = false;

        if (!atomic_compare_exchange_strong(&s->running, &expected, true))
                return -EBUSY;
        if (s->ended) {
                run_over(s);
                return -EPIPE;
        }
        deadline = timeout_usec ? now_usec() + timeout_usec : 0;

        /* The command goes to a file, and the terminal gets one short line that reads it and
         * eval's it in the shell itself: one prompt (one marker) however many lines it has; no
         * terminal line limit; a syntax error or an unclosed quote is eval's error (status 2),
         * never a shell waiting for more; and an interrupt finds nothing half-read to run later.
         * What came between runs (a background job's output) belongs to this run's output. */
        r = write_command(s, command);
        if (r < 0) {
                run_over(s);
                return r;
        }
        r = buffer_printf(&line, "IFS= read -r -d '' __agentix_command < %s/command; eval \"$__agentix_command\"\n",
                          s->dir);
        if (r >= 0)
                r = write_terminal(s, buffer_data(&line), line.len, deadline);
        if (r >= 0)
                atomic_store(&s->sent, true);
        for (;;) {
                if (r == -ETIMEDOUT)
                        r = 0; /* the deadline passed while writing: interrupt below */
                else if (r < 0)
                        break;
                /* Once interrupted, only the command's end is waited for, not the caller. */
                r = wait_marker(s, grace ?: deadline, grace ? -1 : wait_fd, max_output, &dropped, &offset, &mlen,
                                &status);
                if (r != 0)
                        break;
                if (!grace && cancelled && cancelled(userdata))
                        was_cancelled = true;
                else if (!grace && !(deadline && now_usec() >= deadline))
                        continue; /* a spurious wake-up */
                else if (grace && now_usec() < grace)
                        continue;
                if (!grace) {
                        /* Time is up (or the caller gave up): ^C, as a person at the terminal would. */
                        timed_out = !was_cancelled;
                        (void) shell_session_interrupt(s);
                        grace = now_usec() + SHELL_INTERRUPT_GRACE_USEC;
                        continue;
                }
                if (!killed) {
                        /* It ignored SIGINT: the commands go, the shell stays. */
                        kill_commands(s);
                        killed = true;
                        grace = now_usec() + SHELL_INTERRUPT_GRACE_USEC;
                        continue;
                }
                /* The shell itself does not come back: the session cannot go on. */
                shell_session_kill(s);
                grace = now_usec() + SHELL_INTERRUPT_GRACE_USEC;
        }

        if (r == -EPIPE) {
                (void) reap(s, 0);
                offset = s->pending.len;
                mlen = 0;
                status = -1;
        } else if (r < 0) {
                run_over(s);
                return r;
        }
        if (was_cancelled) {
                buffer_consume(&s->pending, MIN(offset + mlen, s->pending.len));
                run_over(s);
                return -ECANCELED;
        }

        *ret = (ShellRunResult) {
                .exit_code = s->ended ? -1 : status,
                .timed_out = timed_out,
                .truncated = dropped > 0 || offset > max_output,
                .ended = s->ended,
        };
        ret->output_size = MIN(offset, max_output);
        ret->output = malloc(ret->output_size + 1);
        if (!ret->output) {
                run_over(s);
                return -ENOMEM;
        }
        if (ret->output_size > 0)
                memcpy(ret->output, buffer_data(&s->pending), ret->output_size);
        ret->output[ret->output_size] = 0;
        buffer_consume(&s->pending, MIN(offset + mlen, s->pending.len));
        if (s->ended)
                ret->exit_code = s->exit_status;
        run_over(s);
        return 0;
}

void shell_run_result_done(ShellRunResult *r) {
        free(r->output);
        *r = (ShellRunResult) {};
}

int shell_session_open(const ShellOpenOptions *o, ShellSession **ret, char **ret_error) {
        static const char hex[] = "0123456789abcdef";
        _cleanup_free_ char *init = NULL;
        uint8_t random[NONCE_LEN / 2];
        char nonce[NONCE_LEN + 1];
        const char *bash = o->shell ?: default_bash();
        ExecOptions eo = EXEC_OPTIONS_DEFAULT;
        ExecChild child = EXEC_CHILD_NULL;
        ExecStage stage;
        ShellSession *s;
        size_t offset, mlen, dropped = 0;
        int status, r;

        if (!bash)
                return message_set_first(ret_error, -ENOENT, "no bash to run the session in (not at %s nor on PATH): "
                                         "name one with shell=, or add bash to the bundle", BUNDLE_BASH);
        if (getrandom(random, sizeof(random), 0) != sizeof(random))
                return -errno;
        for (size_t i = 0; i < sizeof(random); i++) {
                nonce[2 * i] = hex[random[i] >> 4];
                nonce[2 * i + 1] = hex[random[i] & 15];
        }
        nonce[NONCE_LEN] = 0;

        s = calloc(1, sizeof(*s));
        if (!s)
                return -ENOMEM;
        s->master = -EBADF;
        s->pidfd = -EBADF;
        s->dir_fd = -EBADF;
        s->marker_head_len = (size_t) snprintf(s->marker_head, sizeof(s->marker_head), MARKER_HEAD_FMT, nonce);

        /* Under /tmp: writable even in a sandbox with a read-only root. A name of its own, not
         * the nonce: other accounts may list /tmp. */
        r = make_dir(s, ret_error);
        if (r < 0) {
                safe_close(s->dir_fd);
                free(s);
                return r;
        }

        /* $0 is the bash asked for: no other shell in between. */
        eo.shell = bash;
        eo.command = "exec \"$0\" --noediting --noprofile --norc -i";
        eo.cwd = o->cwd;
        eo.env = o->env;
        eo.pty = true;
        eo.pty_plain = true;
        eo.stdin_mode = EXEC_STDIN_INTERACTIVE;
        r = exec_spawn(&eo, &child, &stage);
        if (r < 0) {
                (void) unlinkat(AT_FDCWD, s->dir, AT_REMOVEDIR);
                safe_close(s->dir_fd);
                free(s);
                return message_set_first(ret_error, r, "cannot start %s%s%s: %s", bash, o->cwd ? " in " : "",
                                         o->cwd ?: "", strerror(-r));
        }
        s->pid = child.pid;
        s->master = TAKE_FD(child.pty_fd);
        s->pidfd = TAKE_FD(child.pidfd);
        exec_child_close(&child);

        /* No job control (an interactive bash turns it on): every command stays in the shell's
         * process group, so one signal reaches the running command on any runtime, and `cmd &`
         * ignores SIGINT. Quiet prompts, and the marker before each one. */
        if (asprintf(&init, " set +m; PS1=; PS2=; PS0=; unset HISTFILE; "
                     "PROMPT_COMMAND='printf \"\\036agentix-%s-%%d\\036\" $?'\n", nonce) < 0) {
                shell_session_kill(s);
                shell_session_free(s);
                return -ENOMEM;
        }
        uint64_t deadline = now_usec() + (o->timeout_usec ?: OPEN_TIMEOUT_DEFAULT_USEC);
        r = write_terminal(s, init, strlen(init), deadline);
        if (r >= 0)
                r = wait_marker(s, deadline, -1, SHELL_PENDING_MAX, &dropped, &offset, &mlen, &status);
        if (r <= 0) {
                _cleanup_free_ char *said = strndup((const char *) buffer_data(&s->pending) ?: "",
                                                    MIN(s->pending.len, (size_t) 200));
                shell_session_kill(s);
                shell_session_free(s);
                return message_set_first(ret_error, r < 0 && r != -EPIPE ? r : -EPROTO,
                                         "%s did not come up as a session shell%s%s", bash, said && *said ? ": " : "",
                                         said ?: "");
        }
        /* What the shell said at start (job control notes, the first prompt) is nobody's output. */
        buffer_consume(&s->pending, offset + mlen);
        *ret = s;
        return 0;
}

void shell_session_free(ShellSession *s) {
        if (!s)
                return;
        /* As a terminal closing: the shell and what it started hang up (after an `exit` too:
         * background commands stay in its process group). */
        (void) kill(-s->pid, SIGHUP);
        (void) kill(-s->pid, SIGCONT);
        for (uint64_t until = now_usec() + KILL_GRACE_USEC; !reap(s, WNOHANG) && now_usec() < until;)
                usleep(5000);
        if (!reap(s, WNOHANG)) {
                shell_session_kill(s);
                (void) reap(s, 0);
        }
        if (s->master >= 0)
                close(s->master);
        if (s->pidfd >= 0)
                close(s->pidfd);
        if (s->dir_fd >= 0) {
                (void) unlinkat(s->dir_fd, "command", 0);
                /* Only ours: the name may be another's by now. */
                if (dir_still_ours(s))
                        (void) rmdir(s->dir);
                safe_close(s->dir_fd);
        }
        buffer_done(&s->pending);
        free(s);
}

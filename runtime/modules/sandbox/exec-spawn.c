/* SPDX-License-Identifier: MIT */
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <termios.h>
#include <sys/pidfd.h>

#include "exec-as.h"
#include "exec-env.h"
#include "exec-plain.h"
#include "exec-spawn.h"
#include "log.h"
#include "pty.h"

extern char **environ;

const char *exec_default_shell(void) {
        return access(EXEC_DEFAULT_SHELL, X_OK) >= 0 ? EXEC_DEFAULT_SHELL : EXEC_FALLBACK_SHELL;
}

void exec_child_close(ExecChild *c) {
        c->pidfd = safe_close(c->pidfd);
        c->stdin_fd = safe_close(c->stdin_fd);
        c->stdout_fd = safe_close(c->stdout_fd);
        c->stderr_fd = safe_close(c->stderr_fd);
        c->pty_fd = safe_close(c->pty_fd);
}

/* If the worker ever runs with fd 0, 1 or 2 closed, a new pipe could land there, and the
 * child's dup2() onto 0/1/2 would clobber it. Keep our fds above stdio. */
static int fd_move_above_stdio(int fd) {
        int copy;

        if (fd < 0 || fd > 2)
                return fd;
        copy = fcntl(fd, F_DUPFD_CLOEXEC, 3);
        if (copy < 0)
                return negative_errno();
        (void) close(fd);
        return copy;
}

static int fd_set_nonblock(int fd) {
        int flags = fcntl(fd, F_GETFL);

        if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0)
                return negative_errno();
        return 0;
}

/* A pipe with both ends O_CLOEXEC and above stdio; our end non-blocking (the child's end stays
 * blocking: programs do not expect EAGAIN on their stdout). */
static int make_pipe(int fds[2], bool parent_reads) {
        int r;

        if (pipe2(fds, O_CLOEXEC) < 0)
                return negative_errno();
        for (int i = 0; i < 2; i++) {
                r = fd_move_above_stdio(fds[i]);
                if (r < 0)
                        goto fail;
                fds[i] = r;
        }
        r = fd_set_nonblock(fds[parent_reads ? 0 : 1]);
        if (r < 0)
                goto fail;
        return 0;
fail:
        fds[0] = safe_close(fds[0]);
        fds[1] = safe_close(fds[1]);
        return r;
}

static void close_pair(int fds[2]) {
        fds[0] = safe_close(fds[0]);
        fds[1] = safe_close(fds[1]);
}

int exec_spawn(const ExecOptions *o, ExecChild *ret, ExecStage *ret_stage) {
        int in[2] = { -EBADF, -EBADF }, out[2] = { -EBADF, -EBADF }, err[2] = { -EBADF, -EBADF };
        _cleanup_strv_free_ char **env_with_term = NULL;
        _cleanup_free_ char *slave = NULL;
        _cleanup_(exec_plain_done) ExecPlain plain = EXEC_PLAIN_NULL;
        _cleanup_close_ int master = -EBADF;
        posix_spawn_file_actions_t fa;
        posix_spawnattr_t attr;
        char *const *envp = o->env ?: environ;
        const ExecAccount *as = o->account && !exec_account_is_own(o->account) ? o->account : NULL;
        const char *shell;
        ExecStage stage = EXEC_STAGE_SETUP;
        sigset_t all, none;
        pid_t pid;
        int r;

        if (!o->command)
                return -EINVAL;

        r = posix_spawn_file_actions_init(&fa);
        if (r != 0)
                return -r;
        r = posix_spawnattr_init(&attr);
        if (r != 0) {
                posix_spawn_file_actions_destroy(&fa);
                return -r;
        }

        /* Every signal back to SIG_DFL. sigfillset() leaves out glibc's internal signals (32,
         * 33), and glibc's child then sets those to SIG_IGN, which exec keeps: set all bits by
         * hand so that they are reset too (nothing signals the child on them: glibc sends them
         * to its own threads only). */
        memset(&all, 0xff, sizeof(all));
        sigemptyset(&none);
        r = posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);
        r = r ?: posix_spawnattr_setsigdefault(&attr, &all);
        r = r ?: posix_spawnattr_setsigmask(&attr, &none);
        if (r != 0) {
                r = -r;
                goto finish;
        }

        if (o->pty) {
                stage = EXEC_STAGE_PTY;
                r = pty_open(o->rows, o->cols, &master, &slave);
                if (r < 0)
                        goto finish;
                r = fd_move_above_stdio(master);
                if (r < 0)
                        goto finish;
                master = r;
                stage = EXEC_STAGE_SETUP;
                if (o->pty_plain) {
                        struct termios t;

                        /* Set before the child runs: the terminal's settings are the pair's. */
                        if (tcgetattr(master, &t) < 0) {
                                r = -errno;
                                goto finish;
                        }
                        t.c_lflag &= ~(tcflag_t) (ECHO | ECHONL);
                        t.c_oflag &= ~(tcflag_t) OPOST;
                        if (tcsetattr(master, TCSANOW, &t) < 0) {
                                r = -errno;
                                goto finish;
                        }
                }

                /* Opened after setsid() and without O_NOCTTY: becomes the controlling tty. */
                r = posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, slave, O_RDWR, 0);
                r = r ?: posix_spawn_file_actions_adddup2(&fa, STDIN_FILENO, STDOUT_FILENO);
                r = r ?: posix_spawn_file_actions_adddup2(&fa, STDIN_FILENO, STDERR_FILENO);
                if (r != 0) {
                        r = -r;
                        goto finish;
                }

                if (!env_get(envp, "TERM")) {
                        static const EnvOverride term = {
                                .key = "TERM", .key_len = 4,
                                .value = "xterm-256color", .value_len = STRLEN("xterm-256color"),
                        };

                        r = env_merge(envp, &term, 1, &env_with_term);
                        if (r < 0)
                                goto finish;
                        envp = env_with_term;
                }
        } else {
                if (o->stdin_mode == EXEC_STDIN_NULL)
                        r = posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
                else {
                        r = make_pipe(in, /* parent_reads= */ false);
                        if (r < 0)
                                goto finish;
                        r = posix_spawn_file_actions_adddup2(&fa, in[0], STDIN_FILENO);
                }
                if (r != 0) {
                        r = r < 0 ? r : -r;
                        goto finish;
                }

                r = make_pipe(out, /* parent_reads= */ true);
                if (r < 0)
                        goto finish;
                if (!o->merge_stderr) {
                        r = make_pipe(err, /* parent_reads= */ true);
                        if (r < 0)
                                goto finish;
                }
                r = posix_spawn_file_actions_adddup2(&fa, out[1], STDOUT_FILENO);
                r = r ?: posix_spawn_file_actions_adddup2(&fa, o->merge_stderr ? out[1] : err[1], STDERR_FILENO);
                if (r != 0) {
                        r = -r;
                        goto finish;
                }
        }

        if (o->cwd) {
                r = posix_spawn_file_actions_addchdir_np(&fa, o->cwd);
                if (r != 0) {
                        r = -r;
                        goto finish;
                }
        }
        /* Whatever other threads opened without O_CLOEXEC stays out of the child. */
        r = posix_spawn_file_actions_addclosefrom_np(&fa, 3);
        if (r != 0) {
                r = -r;
                goto finish;
        }

        stage = EXEC_STAGE_SPAWN;
        /* A plain command with the default shell, when that is dash or bash, runs without it
         * (exec-plain.h); if its program cannot be executed after all, the shell runs it and
         * reports why. */
        shell = o->shell ?: exec_default_shell();
        if (as) {
                /* The helper takes the account, then executes the shell in its place. A plain
                 * command still goes through the shell: whether its program can be executed is
                 * for the account to find out, not for us (exec-plain.h falls back on errors
                 * the helper could not report). */
                const char *helper = exec_as_helper();
                char *argv[] = { (char *) shell, (char *) "-c", (char *) o->command, NULL };
                char numbers[EXEC_AS_ARGS_SIZE];
                _cleanup_free_ char **wrapped = NULL;

                if (!helper) {
                        r = -ENOEXEC;
                        goto finish;
                }
                wrapped = exec_as_argv(helper, as, shell, argv, numbers);
                if (!wrapped) {
                        r = -ENOMEM;
                        goto finish;
                }
                r = posix_spawn(&pid, helper, &fa, &attr, wrapped, envp);
                if (r != 0) {
                        r = -r;
                        goto finish;
                }
                goto spawned;
        }
        if (!o->shell && exec_plain_shell_is_faithful(shell)) {
                r = exec_plain_prepare(o->command, o->cwd, envp, &plain);
                if (r < 0)
                        goto finish;
                if (r > 0) {
                        r = posix_spawn(&pid, plain.path, &fa, &attr, plain.argv, plain.envp);
                        if (r == 0)
                                goto spawned;
                        if (!exec_plain_should_fall_back(r)) {
                                r = -r;
                                goto finish;
                        }
                }
        }

        char *argv[] = { (char *) shell, (char *) "-c", (char *) o->command, NULL };
        if (strchr(shell, '/'))
                r = posix_spawn(&pid, shell, &fa, &attr, argv, envp);
        else
                r = posix_spawnp(&pid, shell, &fa, &attr, argv, envp);
        if (r != 0) {
                r = -r;
                goto finish;
        }

spawned:
        /* Our copies of the child's ends must go, or we would never see EOF. */
        in[0] = safe_close(in[0]);
        out[1] = safe_close(out[1]);
        err[1] = safe_close(err[1]);

        *ret = EXEC_CHILD_NULL;
        ret->pid = pid;
        ret->pidfd = pidfd_open(pid, 0); /* failure (old kernel, seccomp) is handled by polling */
        if (ret->pidfd < 0) {
                log_debug_errno(errno, "pidfd_open() failed, falling back to polling: %m");
                ret->pidfd = -EBADF;
        }
        ret->stdin_fd = TAKE_FD(in[1]);
        ret->stdout_fd = TAKE_FD(out[0]);
        ret->stderr_fd = TAKE_FD(err[0]);
        ret->pty_fd = TAKE_FD(master);
        r = 0;

finish:
        close_pair(in);
        close_pair(out);
        close_pair(err);
        posix_spawnattr_destroy(&attr);
        posix_spawn_file_actions_destroy(&fa);
        if (r < 0 && ret_stage)
                *ret_stage = stage;
        return r;
}

/* SPDX-License-Identifier: MIT */
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>

#include "buffer.h"
#include "host-command.h"

extern char **environ;

static int run(char *const argv[], bool want_stderr, char **ret_output, size_t *ret_size) {
        _cleanup_close_ int rd = -EBADF, wr = -EBADF;
        _cleanup_buffer_ Buffer out = BUFFER_NULL;
        posix_spawn_file_actions_t fa;
        int pipefd[2], status, r;
        pid_t pid;

        if (pipe2(pipefd, O_CLOEXEC) < 0)
                return negative_errno();
        rd = pipefd[0];
        wr = pipefd[1];

        r = posix_spawn_file_actions_init(&fa);
        if (r != 0)
                return -r;
        (void) posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
        if (ret_output) {
                (void) posix_spawn_file_actions_adddup2(&fa, wr, STDOUT_FILENO);
                if (want_stderr)
                        (void) posix_spawn_file_actions_adddup2(&fa, wr, STDERR_FILENO);
        } else
                (void) posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
        r = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
        posix_spawn_file_actions_destroy(&fa);
        if (r != 0)
                return -r;
        wr = safe_close(wr);

        for (;;) {
                ssize_t n;

                if (buffer_reserve(&out, 65536) < 0) {
                        (void) waitpid(pid, NULL, 0);
                        return -ENOMEM;
                }
                n = read(rd, buffer_data(&out) + out.len, 65536);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        break;
                out.len += n;
        }
        while (waitpid(pid, &status, 0) < 0)
                if (errno != EINTR)
                        return negative_errno();

        if (ret_output) {
                size_t n;
                uint8_t *data = buffer_steal(&out, &n);

                if (!data)
                        return -ENOMEM;
                if (ret_size)
                        *ret_size = n;
                *ret_output = (char *) data;
        }
        if (WIFEXITED(status))
                return WEXITSTATUS(status);
        return 128 + WTERMSIG(status);
}

int spawn_capture(char *const argv[], char **ret_output, size_t *ret_size) {
        return run(argv, true, ret_output, ret_size);
}

int spawn_stdout(char *const argv[], char **ret_output, size_t *ret_size) {
        return run(argv, false, ret_output, ret_size);
}

/* SPDX-License-Identifier: MIT */
/* The session core against the host's bash: state that persists, a command that hangs, input
 * to a running command, output without a newline, long commands, `exit`, cancellation; and
 * from another account's side (as root): its directory in place of the session's own.
 * shell-session.c is included, so that its internals (the command directory, the per-call
 * read) can be looked at. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "macro.h"
#include "shell-session.c"

#define SECOND (1000ULL * 1000)

static ShellSession *open_session(const char *cwd) {
        _cleanup_free_ char *error = NULL;
        ShellSession *s = NULL;

        assert_int_equal(shell_session_open(&(ShellOpenOptions) { .cwd = cwd }, &s, &error), 0);
        assert_null(error);
        return s;
}

/* Run and expect it to finish: the output, with exit_code checked. */
static char *run_ok(ShellSession *s, const char *command, int exit_code) {
        ShellRunResult r = {};
        char *out;

        assert_int_equal(shell_session_run(s, command, 10 * SECOND, SHELL_OUTPUT_MAX_DEFAULT, -1, NULL, NULL, &r), 0);
        assert_false(r.timed_out);
        assert_false(r.ended);
        assert_int_equal(r.exit_code, exit_code);
        out = TAKE_PTR(r.output);
        shell_run_result_done(&r);
        return out;
}

static void test_state_persists(void **state) {
        ShellSession *s = open_session("/");
        _cleanup_free_ char *a = run_ok(s, "cd /tmp; export AGX_A=1; f() { echo \"f:$1\"; }; alias hi='echo hi'", 0);
        _cleanup_free_ char *b = run_ok(s, "pwd; echo $AGX_A; f x", 0);
        _cleanup_free_ char *c = run_ok(s, "false", 1);
        _cleanup_free_ char *d = run_ok(s, "(exit 7)", 7);

        assert_string_equal(a, "");
        assert_string_equal(b, "/tmp\n1\nf:x\n");
        assert_string_equal(c, "");
        assert_string_equal(d, "");
        shell_session_free(s);
}

static void test_output_as_it_is(void **state) {
        ShellSession *s = open_session(NULL);
        _cleanup_free_ char *a = run_ok(s, "printf 'no newline'", 0);
        _cleanup_free_ char *b = run_ok(s, "echo out; echo err >&2", 0);
        _cleanup_free_ char *c = run_ok(s, "for i in 1 2 3; do\n  echo \"line $i\"\ndone", 0);
        _cleanup_free_ char *long_cmd = malloc(20000), *d = NULL;

        assert_string_equal(a, "no newline");
        assert_string_equal(b, "out\nerr\n"); /* one terminal: as they came */
        assert_string_equal(c, "line 1\nline 2\nline 3\n");
        /* Several lines are one run: one status, the last command's. */
        {
                _cleanup_free_ char *lines = run_ok(s, "echo one\necho two\nfalse", 1);
                _cleanup_free_ char *after = NULL;
                ShellRunResult r = {};

                assert_string_equal(lines, "one\ntwo\n");
                /* An unclosed quote is a syntax error, not a shell waiting for more. */
                assert_int_equal(shell_session_run(s, "echo \"unclosed", 10 * SECOND, SHELL_OUTPUT_MAX_DEFAULT, -1, NULL,
                                                   NULL, &r), 0);
                assert_int_equal(r.exit_code, 2);
                assert_false(r.timed_out);
                shell_run_result_done(&r);
                after = run_ok(s, "echo fine", 0);
                assert_string_equal(after, "fine\n");
        }
        /* A command longer than a terminal's line (4095 bytes in canonical mode). */
        assert_non_null(long_cmd);
        strcpy(long_cmd, "echo ");
        memset(long_cmd + 5, 'x', 19000);
        strcpy(long_cmd + 19005, " | wc -c");
        d = run_ok(s, long_cmd, 0);
        assert_int_equal(atoi(d), 19001);
        shell_session_free(s);
}

static void test_timeout_interrupts_and_the_session_goes_on(void **state) {
        ShellSession *s = open_session(NULL);
        ShellRunResult r = {};
        _cleanup_free_ char *after = NULL;

        assert_int_equal(shell_session_run(s, "echo started; sleep 60", SECOND / 2, SHELL_OUTPUT_MAX_DEFAULT, -1, NULL, NULL,
                                           &r), 0);
        assert_true(r.timed_out);
        assert_false(r.ended);
        assert_int_equal(r.exit_code, 130); /* SIGINT */
        /* What came before the ^C (bash then starts a new line, as on a terminal). */
        assert_memory_equal(r.output, "started\n", 8);
        shell_run_result_done(&r);

        /* One that ignores ^C: its process group is killed. */
        assert_int_equal(shell_session_run(s, "bash -c 'trap \"\" INT; sleep 60'", SECOND / 2, SHELL_OUTPUT_MAX_DEFAULT,
                                           -1, NULL, NULL, &r), 0);
        assert_true(r.timed_out);
        assert_false(r.ended);
        shell_run_result_done(&r);

        after = run_ok(s, "echo still here", 0);
        assert_string_equal(after, "still here\n");
        shell_session_free(s);
}

static void test_input_to_a_running_command(void **state) {
        ShellSession *s = open_session(NULL);
        ShellRunResult r = {};
        pid_t child;

        /* Answer the prompt from another process, as a second call would from another thread. */
        child = fork();
        assert_true(child >= 0);
        if (child == 0) {
                usleep(300 * 1000);
                _exit(shell_session_input(s, "forty-two\n", 10) == 0 ? 0 : 1);
        }
        assert_int_equal(shell_session_run(s, "read -r x; echo \"got $x\"", 10 * SECOND, SHELL_OUTPUT_MAX_DEFAULT, -1,
                                           NULL, NULL, &r), 0);
        assert_string_equal(r.output, "got forty-two\n");
        assert_int_equal(r.exit_code, 0);
        shell_run_result_done(&r);
        assert_int_equal(waitpid(child, NULL, 0), child);
        shell_session_free(s);
}

static void test_bounded_output(void **state) {
        ShellSession *s = open_session(NULL);
        ShellRunResult r = {};

        assert_int_equal(shell_session_run(s, "head -c 300000 /dev/zero | tr '\\0' y; echo; echo tail", 10 * SECOND, 1000,
                                           -1, NULL, NULL, &r), 0);
        assert_true(r.truncated);
        assert_int_equal(r.output_size, 1000);
        assert_int_equal(r.exit_code, 0);
        shell_run_result_done(&r);
        shell_session_free(s);
}

static void test_exit_ends_the_session(void **state) {
        ShellSession *s = open_session(NULL);
        ShellRunResult r = {};

        assert_int_equal(shell_session_run(s, "exit 3", 10 * SECOND, SHELL_OUTPUT_MAX_DEFAULT, -1, NULL, NULL, &r), 0);
        assert_true(r.ended);
        assert_int_equal(r.exit_code, 3);
        shell_run_result_done(&r);
        assert_true(shell_session_ended(s));
        assert_int_equal(shell_session_run(s, "true", SECOND, 100, -1, NULL, NULL, &r), -EPIPE);
        shell_session_free(s);
}

static bool always(void *userdata) {
        return true;
}

static void test_cancel_interrupts(void **state) {
        ShellSession *s = open_session(NULL);
        ShellRunResult r = {};
        int pipefd[2];
        _cleanup_free_ char *after = NULL;

        assert_int_equal(pipe(pipefd), 0);
        assert_int_equal(write(pipefd[1], "x", 1), 1); /* readable: cancelled at once */
        assert_int_equal(shell_session_run(s, "sleep 60", 0, 100, pipefd[0], always, NULL, &r), -ECANCELED);
        after = run_ok(s, "echo ok", 0);
        assert_string_equal(after, "ok\n");
        close(pipefd[0]);
        close(pipefd[1]);
        shell_session_free(s);
}

static void test_close_hangs_up_jobs(void **state) {
        ShellSession *s = open_session(NULL);
        /* An interactive shell reports the job ("[1] PID") too. */
        _cleanup_free_ char *pid_text = run_ok(s, "sleep 300 & echo pid=$!", 0);
        pid_t job = strstr(pid_text, "pid=") ? atoi(strstr(pid_text, "pid=") + 4) : 0;

        assert_true(job > 0);
        assert_int_equal(kill(job, 0), 0);
        shell_session_free(s);
        /* Hung up with the shell (and reaped by whoever its parent is now: wait a moment). */
        for (int i = 0; i < 100 && kill(job, 0) == 0; i++) {
                (void) waitpid(job, NULL, WNOHANG);
                usleep(20 * 1000);
        }
        assert_int_not_equal(kill(job, 0), 0);
}

static void test_no_such_shell(void **state) {
        _cleanup_free_ char *error = NULL;
        ShellSession *s = NULL;

        assert_true(shell_session_open(&(ShellOpenOptions) { .shell = "/nonexistent/bash" }, &s, &error) < 0);
        assert_non_null(error);
        assert_non_null(strstr(error, "/nonexistent/bash"));
        assert_null(s);
}

/* A command that writes without pause: one read_available() takes a bounded amount, so that
 * the run trims and looks at its deadline between reads (it used to read until the terminal
 * had nothing more, which a fast writer never allows). */
static void test_one_read_is_bounded(void **state) {
        static char block[65536];
        ShellSession s = { .pidfd = -EBADF };
        size_t written = 0;
        int p[2];

        assert_int_equal(pipe2(p, O_NONBLOCK | O_CLOEXEC), 0);
        assert_true(fcntl(p[1], F_SETPIPE_SZ, 1024 * 1024) >= 1024 * 1024);
        memset(block, 'y', sizeof(block));
        for (ssize_t n; (n = write(p[1], block, sizeof(block))) > 0;)
                written += (size_t) n;
        assert_true(written >= 512 * 1024);
        s.master = p[0];
        assert_int_equal(read_available(&s), 0);
        assert_true(s.pending.len > 0);
        assert_true(s.pending.len <= 64 * 1024);
        buffer_done(&s.pending);
        close(p[0]);
        close(p[1]);
}

/* Another account (nobody) takes the name of a root session's command directory once a command
 * of the session removed it, and keeps putting its own `command` file there. The session's
 * commands stay its own: it makes a new directory rather than use one that is not its own. */
static void test_another_accounts_directory_is_not_used(void **state) {
        _cleanup_free_ char *old = NULL, *rm = NULL, *marker = NULL, *taken = NULL;
        ShellSession *s;
        struct stat st;
        pid_t attacker;

        if (geteuid() != 0)
                skip();
        s = open_session(NULL);
        old = strdup(s->dir);
        assert_non_null(old);
        assert_int_equal(lstat(old, &st), 0);
        assert_true(S_ISDIR(st.st_mode) && st.st_uid == 0 && (st.st_mode & 07777) == 0700);
        assert_true(asprintf(&marker, "%s-taken", old) > 0);
        assert_true(asprintf(&rm, "rm -rf %s", old) > 0);
        taken = strdup(rm); /* to remove the other account's directory at the end */
        assert_non_null(taken);
        free(run_ok(s, rm, 0));

        attacker = fork();
        assert_true(attacker >= 0);
        if (attacker == 0) {
                char path[256], tmp[256], evil[512];

                if (setgid(65534) < 0 || setuid(65534) < 0)
                        _exit(1);
                /* Gone with the test, whatever happens to it (a change of uid clears this). */
                if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() == 1)
                        _exit(1);
                snprintf(path, sizeof(path), "%s/command", old);
                snprintf(tmp, sizeof(tmp), "%s/evil", old);
                snprintf(evil, sizeof(evil), "echo taken > %s", marker);
                (void) mkdir(old, 0777);
                (void) chmod(old, 0777);
                for (;;) {
                        int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);

                        if (fd >= 0) {
                                (void) loop_write(fd, evil, strlen(evil));
                                close(fd);
                                (void) rename(tmp, path);
                        }
                }
        }
        for (int i = 0; i < 500 && (lstat(old, &st) < 0 || st.st_uid != 65534); i++)
                usleep(10 * 1000);
        assert_int_equal(st.st_uid, 65534);

        for (int i = 0; i < 20; i++) {
                _cleanup_free_ char *out = run_ok(s, "echo mine", 0);

                assert_string_equal(out, "mine\n");
        }
        assert_int_equal(access(marker, F_OK), -1);
        assert_string_not_equal(s->dir, old);
        assert_int_equal(lstat(s->dir, &st), 0);
        assert_true(st.st_uid == 0 && (st.st_mode & 07777) == 0700);

        /* Opened up by a command of its own (chmod): a new one too. */
        free(rm);
        free(old);
        old = strdup(s->dir);
        assert_true(asprintf(&rm, "chmod 0777 %s", old) > 0);
        free(run_ok(s, rm, 0));
        free(run_ok(s, "true", 0));
        assert_string_not_equal(s->dir, old);

        kill(attacker, SIGKILL);
        assert_int_equal(waitpid(attacker, NULL, 0), attacker);
        shell_session_free(s);
        (void) unlink(marker);
        assert_int_equal(system(taken), 0);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_state_persists),
                cmocka_unit_test(test_output_as_it_is),
                cmocka_unit_test(test_timeout_interrupts_and_the_session_goes_on),
                cmocka_unit_test(test_input_to_a_running_command),
                cmocka_unit_test(test_bounded_output),
                cmocka_unit_test(test_exit_ends_the_session),
                cmocka_unit_test(test_cancel_interrupts),
                cmocka_unit_test(test_close_hangs_up_jobs),
                cmocka_unit_test(test_no_such_shell),
                cmocka_unit_test(test_one_read_is_bounded),
                cmocka_unit_test(test_another_accounts_directory_is_not_used),
        };

        /* Jobs whose shell is gone come to this process to be reaped. */
        signal(SIGPIPE, SIG_IGN);
        return cmocka_run_group_tests(tests, NULL, NULL);
}

/* SPDX-License-Identifier: MIT */
/* Which commands run without the shell, and how their program is found (exec-plain.h).
 * What such a run does is tested end to end in test-exec.c (plain_*). */
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <sys/stat.h>

#include "exec-plain.h"
#include "macro.h"
#include "strv.h"

static void test_plain_words(void **state) {
        static const struct { const char *command; const char *joined; } cases[] = {
                { "ls", "ls" },
                { "ls -l /tmp", "ls|-l|/tmp" },
                { "  ls\t-a   b  ", "ls|-a|b" },
                { "python3 -m http.server 8080", "python3|-m|http.server|8080" },
                { "dd if=/dev/zero of=/tmp/x bs=1M count=1", "dd|if=/dev/zero|of=/tmp/x|bs=1M|count=1" },
                { "git log --format=%H -n 1", "git|log|--format=%H|-n|1" },
                { "./run.sh a,b c:d e+f u@h", "./run.sh|a,b|c:d|e+f|u@h" },
                { "/usr/bin/env", "/usr/bin/env" },
        };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                _cleanup_strv_free_ char **words = NULL;
                _cleanup_free_ char *joined = NULL;

                assert_true(exec_plain_split(cases[i].command, &words));
                joined = strv_join(words, "|");
                assert_non_null(joined);
                assert_string_equal(joined, cases[i].joined);
        }
}

static void test_needs_the_shell(void **state) {
        static const char *const cases[] = {
                "", "   ", "\t",
                /* quoting, expansion, globs, tilde, comments */
                "ls 'a b'", "ls \"a\"", "ls a\\ b", "echo $HOME", "ls `pwd`", "ls $(pwd)",
                "ls *", "ls a?", "ls [ab]", "ls {a,b}", "ls ~", "ls # comment",
                /* operators, redirections, several commands */
                "ls; ls", "ls && ls", "ls || ls", "ls | wc", "ls &", "ls > x", "ls < x",
                "ls\nls", "(ls)", "! ls",
                /* an assignment in front */
                "A=1 ls", "PATH=/x ls",
                /* builtins and keywords */
                "true", "false", "echo hi", "printf x", "cd /", "exit 3", "pwd", "kill 1",
                "exec ls", ". ./x", ": x", "test -e x", "read x", "wait", "ulimit -n", "umask",
                "source x", "time ls", "if", "while", "export A",
                /* anything not ASCII */
                "ls caf\xc3\xa9",
        };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                char **words = (char **) 0x1; /* must not be touched */

                if (exec_plain_split(cases[i], &words))
                        fail_msg("'%s' was taken as plain", cases[i]);
                assert_ptr_equal(words, (char **) 0x1);
        }
}

/* A directory with an executable "prog", a non-executable "data" and a subdirectory "dir". */
static char tmp[] = "/tmp/test-exec-plain.XXXXXX";

static void make_file(const char *name, mode_t mode) {
        char path[256];
        int fd;

        snprintf(path, sizeof(path), "%s/%s", tmp, name);
        fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
        assert_true(fd >= 0);
        assert_int_equal(write(fd, "#!/bin/sh\n", 10), 10);
        close(fd);
        assert_int_equal(chmod(path, mode), 0);
}

static int setup(void **state) {
        char path[256];

        if (!mkdtemp(tmp))
                return -1;
        make_file("prog", 0755);
        make_file("data", 0644);
        snprintf(path, sizeof(path), "%s/dir", tmp);
        return mkdir(path, 0755);
}

static int teardown(void **state) {
        char cmd[300];

        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmp);
        return system(cmd) == 0 ? 0 : -1;
}

static char **env_of(const char *path_var, const char *extra) {
        char **env = NULL;

        if (path_var)
                assert_int_equal(strv_extend(&env, path_var), 0);
        if (extra)
                assert_int_equal(strv_extend(&env, extra), 0);
        assert_int_equal(strv_extend(&env, "A=1"), 0);
        return env;
}

static void test_found_in_path(void **state) {
        _cleanup_free_ char *path_var = NULL, *want = NULL, *want_pwd = NULL;
        _cleanup_strv_free_ char **env = NULL;
        _cleanup_free_ char *joined = NULL;
        ExecPlain p = EXEC_PLAIN_NULL;

        /* An entry without the program first, then a directory entry named like it. */
        assert_true(asprintf(&path_var, "PATH=/nonexistent:%s/dir:%s", tmp, tmp) > 0);
        env = env_of(path_var, NULL);
        assert_int_equal(exec_plain_prepare("prog a  b", "/usr", env, &p), 1);
        assert_true(asprintf(&want, "%s/prog", tmp) > 0);
        assert_string_equal(p.path, want);
        joined = strv_join(p.argv, "|");
        assert_string_equal(joined, "prog|a|b"); /* argv[0] as written, as the shell passes it */
        assert_string_equal(p.envp[0], path_var);
        assert_string_equal(p.envp[1], "A=1");
        assert_string_equal(p.envp[2], "PWD=/usr"); /* as the shell sets it */
        assert_null(p.envp[3]);
        exec_plain_done(&p);
        assert_null(p.path);

        /* Without a cwd: the current directory. */
        assert_int_equal(exec_plain_prepare("prog", NULL, env, &p), 1);
        want_pwd = getcwd(NULL, 0);
        assert_non_null(want_pwd);
        assert_string_equal(p.envp[2] + 4, want_pwd);
        exec_plain_done(&p);
}

static void test_left_to_the_shell(void **state) {
        _cleanup_free_ char *path_var = NULL, *relative = NULL, *empty = NULL;
        _cleanup_strv_free_ char **env = NULL, **env_rel = NULL, **env_empty = NULL,
                                 **env_bash = NULL, **env_env = NULL;
        ExecPlain p = EXEC_PLAIN_NULL;

        assert_true(asprintf(&path_var, "PATH=%s", tmp) > 0);
        env = env_of(path_var, NULL);
        assert_int_equal(exec_plain_prepare("data", NULL, env, &p), 0);     /* not executable */
        assert_int_equal(exec_plain_prepare("dir", NULL, env, &p), 0);      /* a directory */
        assert_int_equal(exec_plain_prepare("missing", NULL, env, &p), 0);  /* not found */
        assert_int_equal(exec_plain_prepare("echo x", NULL, env, &p), 0);   /* builtin */

        /* A relative or empty PATH entry before the program: depends on the cwd. */
        assert_true(asprintf(&relative, "PATH=bin:%s", tmp) > 0);
        env_rel = env_of(relative, NULL);
        assert_int_equal(exec_plain_prepare("prog", NULL, env_rel, &p), 0);
        assert_true(asprintf(&empty, "PATH=:%s", tmp) > 0);
        env_empty = env_of(empty, NULL);
        assert_int_equal(exec_plain_prepare("prog", NULL, env_empty, &p), 0);

        /* Files a shell would read first. */
        env_bash = env_of(path_var, "BASH_ENV=/etc/x");
        assert_int_equal(exec_plain_prepare("prog", NULL, env_bash, &p), 0);
        env_env = env_of(path_var, "ENV=/etc/x");
        assert_int_equal(exec_plain_prepare("prog", NULL, env_env, &p), 0);
        assert_null(p.path);
}

static void test_path_with_slash_and_default(void **state) {
        _cleanup_strv_free_ char **no_path = env_of(NULL, NULL);
        ExecPlain p = EXEC_PLAIN_NULL;

        /* Taken as written, even if missing: the exec decides (and the shell then reports). */
        assert_int_equal(exec_plain_prepare("./missing x", "/", no_path, &p), 1);
        assert_string_equal(p.path, "./missing");
        exec_plain_done(&p);

        /* No PATH: the shell's default one, which has ls. */
        assert_int_equal(exec_plain_prepare("ls", "/", no_path, &p), 1);
        assert_true(streq(p.path, "/usr/bin/ls") || streq(p.path, "/bin/ls"));
        exec_plain_done(&p);
}

static void test_faithful_shells(void **state) {
        char busybox[300], sh[300], dash_link[300];

        assert_true(exec_plain_shell_is_faithful("/bin/sh") == (access("/usr/bin/dash", X_OK) == 0 ||
                                                                access("/usr/bin/bash", X_OK) == 0));
        if (access("/bin/bash", X_OK) == 0)
                assert_true(exec_plain_shell_is_faithful("/bin/bash"));
        assert_false(exec_plain_shell_is_faithful("/nonexistent/sh"));
        assert_false(exec_plain_shell_is_faithful(NULL));

        /* An sh that is busybox (it may prefer its applets to PATH) is not; one that is dash is. */
        snprintf(busybox, sizeof(busybox), "%s/busybox", tmp);
        snprintf(sh, sizeof(sh), "%s/dir/sh", tmp);
        make_file("busybox", 0755);
        assert_int_equal(symlink(busybox, sh), 0);
        assert_false(exec_plain_shell_is_faithful(sh));
        if (access("/usr/bin/dash", X_OK) == 0) {
                snprintf(dash_link, sizeof(dash_link), "%s/dir/sh-dash", tmp);
                assert_int_equal(symlink("/usr/bin/dash", dash_link), 0);
                assert_true(exec_plain_shell_is_faithful(dash_link));
        }
}

static void test_fall_back_errors(void **state) {
        assert_true(exec_plain_should_fall_back(ENOENT));
        assert_true(exec_plain_should_fall_back(ENOEXEC));
        assert_true(exec_plain_should_fall_back(EACCES));
        assert_false(exec_plain_should_fall_back(ENOMEM));
        assert_false(exec_plain_should_fall_back(EMFILE));
        assert_false(exec_plain_should_fall_back(EAGAIN));
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_plain_words),
                cmocka_unit_test(test_needs_the_shell),
                cmocka_unit_test(test_found_in_path),
                cmocka_unit_test(test_left_to_the_shell),
                cmocka_unit_test(test_path_with_slash_and_default),
                cmocka_unit_test(test_faithful_shells),
                cmocka_unit_test(test_fall_back_errors),
        };

        return cmocka_run_group_tests(tests, setup, teardown);
}

/* SPDX-License-Identifier: MIT */
/* Commands as another account: the account lookup, the helper's argv, and real runs as nobody
 * (the test runs as root, as the runtime does in a sandbox; as anyone else it is skipped). */
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/stat.h>
#include <cmocka.h>

#include "exec-as.h"
#include "exec.h"
#include "macro.h"
#include "test-exec-util.h"

static void test_lookup(void **state) {
        ExecAccount a;

        assert_int_equal(exec_account_lookup("root", &a), 0);
        assert_int_equal(a.uid, 0);
        assert_int_equal(a.gid, 0);
        assert_string_equal(a.name, "root");
        assert_string_equal(a.home, "/root");
        assert_int_equal(exec_account_lookup("0", &a), 0);
        assert_string_equal(a.name, "root");
        assert_int_equal(exec_account_lookup("nobody", &a), 0);
        assert_int_equal(a.uid, 65534);
        /* A uid no entry names: taken as it is, with its own group. */
        assert_int_equal(exec_account_lookup("4242", &a), 0);
        assert_int_equal(a.uid, 4242);
        assert_int_equal(a.gid, 4242);
        assert_int_equal(a.n_groups, 1);
        assert_string_equal(a.home, "/");
        assert_int_equal(exec_account_lookup("no-such-account-agentix", &a), -ENOENT);
        assert_int_equal(exec_account_lookup("", &a), -EINVAL);
        assert_int_equal(exec_account_lookup("99999999999", &a), -EINVAL);
}

static void test_argv(void **state) {
        ExecAccount a = { .uid = 1000, .gid = 100, .groups = { 100, 27 }, .n_groups = 2 };
        char *argv[] = { (char *) "sh", (char *) "-c", (char *) "id", NULL };
        char buf[EXEC_AS_ARGS_SIZE];
        _cleanup_free_ char **v = exec_as_argv("/h", &a, "/bin/sh", argv, buf);

        assert_non_null(v);
        assert_string_equal(v[0], "/h");
        assert_string_equal(v[1], "1000");
        assert_string_equal(v[2], "100");
        assert_string_equal(v[3], "100,27");
        assert_string_equal(v[4], "/bin/sh");
        assert_string_equal(v[5], "sh");
        assert_string_equal(v[7], "id");
        assert_null(v[8]);

        a.n_groups = 0;
        free(v);
        v = exec_as_argv("/h", &a, "/bin/sh", argv, buf);
        assert_non_null(v);
        assert_string_equal(v[3], "-");
}

static void run_as(const char *user, const char *command, const char *want_output, int want_code) {
        ExecOptions o = EXEC_OPTIONS_DEFAULT;
        ExecAccount a;
        TestRun t;

        assert_int_equal(exec_account_lookup(user, &a), 0);
        o.command = command;
        o.merge_stderr = true;
        o.timeout_usec = 30 * 1000 * 1000;
        o.account = &a;
        o.cwd = "/";
        test_run_init(&t);
        assert_int_equal(test_run(&t, &o), 0);
        assert_string_equal(test_output(&t), want_output);
        assert_int_equal(t.result.exit_code, want_code);
        assert_true(test_group_gone(t.pid));
        test_run_done(&t);
}

static void test_runs_as_account(void **state) {
        if (geteuid() != 0)
                skip();
        assert_non_null(exec_as_helper());
        run_as("nobody", "id -u; id -g", "65534\n65534\n", 0);
        run_as("4242", "id -u; id -G", "4242\n4242\n", 0);
        /* What root may and the account may not: the helper really dropped root. */
        run_as("nobody", "touch /root/agentix-exec-as-test 2>/dev/null || echo denied", "denied\n", 0);
        /* Exit codes come through unchanged; so does a missing command (the shell says 127). */
        run_as("nobody", "exit 7", "", 7);
        run_as("nobody", "no-such-command-agentix 2>/dev/null", "", 127);
        /* Asking for one's own account changes nothing and needs no helper. */
        run_as("root", "id -u", "0\n", 0);
}

static void test_helper_refuses(void **state) {
        const char *helper = exec_as_helper();
        char command[PATH_MAX + 128];
        ExecOptions o = EXEC_OPTIONS_DEFAULT;
        TestRun t;

        assert_non_null(helper);
        /* Bad arguments never exec anything; (uid_t) -1 is not an account. */
        snprintf(command, sizeof(command), "%s 4294967295 0 - /bin/true true; echo $?; %s 1 x - /bin/true true; echo $?",
                 helper, helper);
        o.command = command;
        o.merge_stderr = true;
        o.timeout_usec = 30 * 1000 * 1000;
        test_run_init(&t);
        assert_int_equal(test_run(&t, &o), 0);
        assert_non_null(strstr(test_output(&t), "126\n"));
        assert_null(strstr(test_output(&t), "0\n"));
        test_run_done(&t);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_lookup),
                cmocka_unit_test(test_argv),
                cmocka_unit_test(test_runs_as_account),
                cmocka_unit_test(test_helper_refuses),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}

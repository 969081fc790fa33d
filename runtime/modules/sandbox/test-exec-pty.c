/* SPDX-License-Identifier: MIT */
/* Commands on a pseudo-terminal: controlling tty, size and resize, ^C, EOF, TERM. */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "exec.h"
#include "macro.h"
#include "test-exec-util.h"

static ExecOptions pty_opts(const char *command) {
        ExecOptions o = EXEC_OPTIONS_DEFAULT;

        o.command = command;
        o.pty = true;
        o.timeout_usec = 30 * 1000 * 1000;
        return o;
}

static int run_items(TestRun *t, const ExecOptions *o, const TestItem *items, size_t n) {
        test_run_init(t);
        t->items = items;
        t->n_items = n;
        return test_run(t, o);
}

static void test_tty(void **state) {
        ExecOptions o = pty_opts("tty; test -t 0 && test -t 1 && test -t 2 && echo all-tty");
        TestRun t;

        test_run_init(&t);
        assert_int_equal(test_run(&t, &o), 0);
        /* A PTY turns \n into \r\n. */
        assert_true(strncmp(test_output(&t), "/dev/pts/", 9) == 0);
        assert_non_null(strstr(test_output(&t), "\r\nall-tty\r\n"));
        assert_int_equal(t.result.exit_code, 0);
        for (size_t i = 0; i < test_n_chunks(&t); i++)
                assert_int_equal(test_chunk(&t, i)->stream, EXEC_STREAM_PTY);
        test_run_done(&t);
}

static void test_controlling_terminal(void **state) {
        /* /dev/tty opens only if the PTY is the controlling terminal. */
        ExecOptions o = pty_opts("echo ok > /dev/tty");
        TestRun t;

        test_run_init(&t);
        assert_int_equal(test_run(&t, &o), 0);
        assert_string_equal(test_output(&t), "ok\r\n");
        test_run_done(&t);
}

static void test_initial_size(void **state) {
        ExecOptions o = pty_opts("stty size");
        TestRun t;

        o.rows = 40;
        o.cols = 100;
        test_run_init(&t);
        assert_int_equal(test_run(&t, &o), 0);
        assert_string_equal(test_output(&t), "40 100\r\n");
        test_run_done(&t);
}

static void test_resize(void **state) {
        /* The resize is applied before "go" reaches the read, so stty sees the new size. */
        const TestItem items[] = {
                { TEST_ITEM_RESIZE, .gate = "ready", .rows = 50, .cols = 132 },
                { TEST_ITEM_STDIN, .data = "go\n", .size = 3 },
        };
        ExecOptions o = pty_opts("stty size; echo ready; read x; stty size");
        TestRun t;

        o.stdin_mode = EXEC_STDIN_INTERACTIVE;
        assert_int_equal(run_items(&t, &o, items, ELEMENTSOF(items)), 0);
        assert_string_equal(test_output(&t), "24 80\r\nready\r\ngo\r\n50 132\r\n");
        test_run_done(&t);
}

static void test_winch(void **state) {
        /* The foreground process group gets SIGWINCH on resize. */
        const TestItem items[] = {
                { TEST_ITEM_RESIZE, .gate = "ready", .rows = 30, .cols = 90 },
        };
        ExecOptions o = pty_opts("trap 'stty size; exit 0' WINCH; echo ready; while :; do sleep 0.02; done");
        TestRun t;

        o.stdin_mode = EXEC_STDIN_INTERACTIVE;
        assert_int_equal(run_items(&t, &o, items, ELEMENTSOF(items)), 0);
        assert_non_null(strstr(test_output(&t), "30 90\r\n"));
        assert_int_equal(t.result.exit_code, 0);
        test_run_done(&t);
}

static void test_ctrl_c(void **state) {
        /* ^C goes to the terminal's foreground process group; wait until sleep runs (see
         * test_inbox_signal in test-exec.c for why). */
        const TestItem items[] = {
                { TEST_ITEM_STDIN, .gate = "ready", .gate_comm = "sleep", .data = "\x03", .size = 1 },
        };
        ExecOptions o = pty_opts("echo ready; exec sleep 100");
        uint64_t t0 = now_usec();
        TestRun t;

        o.stdin_mode = EXEC_STDIN_INTERACTIVE;
        assert_int_equal(run_items(&t, &o, items, ELEMENTSOF(items)), 0);
        assert_int_equal(t.result.exit_code, 128 + SIGINT);
        assert_true(now_usec() - t0 < 5 * 1000 * 1000);
        test_run_done(&t);
}

static void test_eof(void **state) {
        /* EOF on a PTY is ^D; mid-line it takes two. */
        const TestItem items[] = {
                { TEST_ITEM_STDIN, .data = "one\ntwo", .size = 7 },
                { TEST_ITEM_EOF },
        };
        ExecOptions o = pty_opts("stty -echo; echo ready; wc -l; echo done");
        TestRun t;

        o.stdin_mode = EXEC_STDIN_INTERACTIVE;
        assert_int_equal(run_items(&t, &o, items, ELEMENTSOF(items)), 0);
        assert_non_null(strstr(test_output(&t), "1\r\ndone\r\n"));
        test_run_done(&t);
}

static void test_unary_pty_stdin_eof(void **state) {
        /* Non-interactive: stdin data then EOF, so `cat` ends. */
        ExecOptions o = pty_opts("stty -echo; cat");
        TestRun t;

        o.stdin_mode = EXEC_STDIN_DATA;
        o.stdin_data = "abc\n";
        o.stdin_size = 4;
        test_run_init(&t);
        assert_int_equal(test_run(&t, &o), 0);
        assert_int_equal(t.result.exit_code, 0);
        assert_false(t.result.timed_out);
        test_run_done(&t);

        o.stdin_mode = EXEC_STDIN_NULL;
        o.timeout_usec = 5 * 1000 * 1000;
        test_run_init(&t);
        assert_int_equal(test_run(&t, &o), 0);
        assert_false(t.result.timed_out); /* EOF right away, like /dev/null */
        test_run_done(&t);
}

static void test_term_default(void **state) {
        char *env[] = { (char *) "PATH=/usr/bin:/bin", NULL };
        char *env_term[] = { (char *) "PATH=/usr/bin:/bin", (char *) "TERM=vt100", NULL };
        ExecOptions o = pty_opts("echo $TERM");
        TestRun t;

        o.env = env;
        test_run_init(&t);
        assert_int_equal(test_run(&t, &o), 0);
        assert_string_equal(test_output(&t), "xterm-256color\r\n");
        test_run_done(&t);

        o.env = env_term;
        test_run_init(&t);
        assert_int_equal(test_run(&t, &o), 0);
        assert_string_equal(test_output(&t), "vt100\r\n");
        test_run_done(&t);
}

static void test_no_fd_leak_pty(void **state) {
        ExecOptions o = pty_opts("ls /proc/self/fd");
        TestRun t;

        test_run_init(&t);
        assert_int_equal(test_run(&t, &o), 0);
        assert_non_null(strstr(test_output(&t), "0  1  2  3\r\n") ?: strstr(test_output(&t), "0\r\n1\r\n2\r\n3\r\n"));
        test_run_done(&t);
}

int main(void) {
        test_become_subreaper();

        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_tty),
                cmocka_unit_test(test_controlling_terminal),
                cmocka_unit_test(test_initial_size),
                cmocka_unit_test(test_resize),
                cmocka_unit_test(test_winch),
                cmocka_unit_test(test_ctrl_c),
                cmocka_unit_test(test_eof),
                cmocka_unit_test(test_unary_pty_stdin_eof),
                cmocka_unit_test(test_term_default),
                cmocka_unit_test(test_no_fd_leak_pty),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}

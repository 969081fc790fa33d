/* SPDX-License-Identifier: MIT */
/* The exec core without a worker: spawn, output, exit codes, timeouts, cancellation, stdin,
 * the inbox, and what the child inherits. */
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <sys/stat.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "exec.h"
#include "exec-env.h"
#include "macro.h"
#include "test-exec-util.h"

static ExecOptions opts(const char *command) {
        ExecOptions o = EXEC_OPTIONS_DEFAULT;

        o.command = command;
        o.merge_stderr = true; /* the unary shape */
        o.timeout_usec = 30 * 1000 * 1000;
        return o;
}

/* Run a unary-style command and return its output; asserts the run itself worked. */
static void run_ok(TestRun *t, const ExecOptions *o) {
        test_run_init(t);
        assert_int_equal(test_run(t, o), 0);
}

static void test_echo(void **state) {
        ExecOptions o = opts("echo hello");
        TestRun t;

        run_ok(&t, &o);
        assert_string_equal(test_output(&t), "hello\n");
        assert_int_equal(t.result.exit_code, 0);
        assert_false(t.result.timed_out);
        assert_false(t.result.truncated);
        assert_int_equal(t.result.output_size, 6);
        assert_true(test_group_gone(t.pid));
        test_run_done(&t);
}

static void test_exit_codes(void **state) {
        static const struct { const char *cmd; int code; } cases[] = {
                { "true", 0 }, { "false", 1 }, { "exit 42", 42 }, { "exit 255", 255 },
                { "no-such-command-agentix", 127 },
        };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                ExecOptions o = opts(cases[i].cmd);
                TestRun t;

                run_ok(&t, &o);
                assert_int_equal(t.result.exit_code, cases[i].code);
                assert_int_equal(t.result.signal, 0);
                test_run_done(&t);
        }
}

static void test_killed_by_signal(void **state) {
        ExecOptions o = opts("kill -9 $$");
        TestRun t;

        run_ok(&t, &o);
        assert_int_equal(t.result.exit_code, 137);
        assert_int_equal(t.result.signal, SIGKILL);
        assert_false(t.result.timed_out);
        test_run_done(&t);
}

static void test_stderr_merged_in_order(void **state) {
        /* With one shared pipe the order is exact, even for back-to-back writes. */
        ExecOptions o = opts("i=0; while [ $i -lt 200 ]; do echo o$i; echo e$i >&2; i=$((i+1)); done");
        _cleanup_buffer_ Buffer want = {};
        TestRun t;

        for (int i = 0; i < 200; i++)
                assert_int_equal(buffer_printf(&want, "o%d\ne%d\n", i, i), 0);
        assert_int_equal(buffer_reserve(&want, 1), 0);
        buffer_data(&want)[want.len] = 0;

        run_ok(&t, &o);
        assert_string_equal(test_output(&t), (const char *) buffer_data(&want));
        test_run_done(&t);
}

static void test_streams_separate(void **state) {
        ExecOptions o = opts("echo a; sleep 0.05; echo b >&2; sleep 0.05; echo c; printf d >&2");
        TestRun t;
        static const struct { ExecStream s; const char *data; } want[] = {
                { EXEC_STREAM_STDOUT, "a\n" }, { EXEC_STREAM_STDERR, "b\n" },
                { EXEC_STREAM_STDOUT, "c\n" }, { EXEC_STREAM_STDERR, "d" },
        };

        o.merge_stderr = false;
        o.coalesce_usec = 2000;
        run_ok(&t, &o);
        assert_int_equal(test_n_chunks(&t), ELEMENTSOF(want));
        for (size_t i = 0; i < ELEMENTSOF(want); i++) {
                const TestChunk *c = test_chunk(&t, i);

                assert_int_equal(c->stream, want[i].s);
                assert_int_equal(c->size, strlen(want[i].data));
                assert_memory_equal(buffer_data(&t.out) + c->offset, want[i].data, c->size);
        }
        test_run_done(&t);
}

static void test_coalescing(void **state) {
        /* 300 small writes in a burst become a few chunks; and coalescing never holds output
         * until exit: the first chunk arrives long before the sleep ends. */
        ExecOptions o = opts("i=0; while [ $i -lt 300 ]; do echo $i; i=$((i+1)); done; sleep 1");
        TestRun t;

        o.merge_stderr = false;
        o.coalesce_usec = 3000;
        run_ok(&t, &o);
        assert_true(test_n_chunks(&t) >= 1);
        assert_true(test_n_chunks(&t) < 100);
        assert_true(test_chunk(&t, 0)->at_usec - t.start_usec < 500 * 1000);
        assert_int_equal(strlen(test_output(&t)), t.result.output_size);
        test_run_done(&t);
}

static void test_truncation_does_not_hang(void **state) {
        /* 100 MB through a 1 MiB cap: the rest is read and dropped, so the producer finishes. */
        ExecOptions o = opts("head -c 100000000 /dev/zero; echo done >&2; exit 3");
        TestRun t;

        o.max_output = 1024 * 1024;
        run_ok(&t, &o);
        assert_int_equal(t.out.len, 1024 * 1024);
        assert_true(t.result.truncated);
        assert_int_equal(t.result.output_size, 100000000 + 5);
        assert_int_equal(t.result.exit_code, 3);
        assert_false(t.result.timed_out);
        test_run_done(&t);
}

static void test_max_output_zero_and_exact(void **state) {
        ExecOptions o = opts("printf 12345");
        TestRun t;

        o.max_output = 5;
        run_ok(&t, &o);
        assert_string_equal(test_output(&t), "12345");
        assert_false(t.result.truncated);
        test_run_done(&t);

        o.max_output = 0;
        run_ok(&t, &o);
        assert_int_equal(t.out.len, 0);
        assert_true(t.result.truncated);
        test_run_done(&t);
}

static void test_timeout_kills_group(void **state) {
        ExecOptions o = opts("sleep 100 & sleep 100");
        uint64_t t0 = now_usec();
        TestRun t;

        o.timeout_usec = 300 * 1000;
        run_ok(&t, &o);
        assert_int_equal(t.result.exit_code, 124);
        assert_true(t.result.timed_out);
        assert_true(now_usec() - t0 < 2 * 1000 * 1000);
        assert_true(test_group_gone(t.pid)); /* the background sleep went too */
        test_run_done(&t);
}

static void test_timeout_keeps_output(void **state) {
        ExecOptions o = opts("echo before; sleep 100");
        TestRun t;

        o.timeout_usec = 200 * 1000;
        run_ok(&t, &o);
        assert_string_equal(test_output(&t), "before\n");
        assert_true(t.result.timed_out);
        test_run_done(&t);
}

static void test_cancel_is_prompt(void **state) {
        ExecOptions o = opts("sleep 100 & sleep 100");
        TestCanceller c;
        TestRun t;
        uint64_t took;

        test_run_init(&t);
        test_cancel_after(&c, &t, 200 * 1000);
        assert_int_equal(test_run(&t, &o), -ECANCELED);
        took = now_usec() - t.cancelled_at;
        assert_int_equal(pthread_join(c.thread, NULL), 0);
        print_message("cancel → return: %llu µs\n", (unsigned long long) took);
        assert_true(took < 100 * 1000);
        assert_true(test_group_gone(t.pid));
        test_run_done(&t);
}

static void test_background_job_does_not_block(void **state) {
        /* `cmd &` holding our pipe: we return after the grace and leave the job running. */
        ExecOptions o = opts("sleep 30 & echo started");
        uint64_t t0 = now_usec();
        TestRun t;

        run_ok(&t, &o);
        assert_true(now_usec() - t0 < 1000 * 1000);
        assert_string_equal(test_output(&t), "started\n");
        assert_int_equal(t.result.exit_code, 0);
        assert_true(test_group_alive(t.pid));
        assert_int_equal(kill(-t.pid, SIGKILL), 0);
        assert_true(test_group_gone(t.pid));
        test_run_done(&t);
}

static void test_cwd(void **state) {
        ExecOptions o = opts("pwd");
        TestRun t;

        o.cwd = "/usr/bin";
        run_ok(&t, &o);
        assert_string_equal(test_output(&t), "/usr/bin\n");
        test_run_done(&t);
}

static void test_env(void **state) {
        const EnvOverride ov[] = {
                { .key = "AGENTIX_T", .key_len = 9, .value = "v a l", .value_len = 5 },
                { .key = "HOME", .key_len = 4, .value = NULL },
        };
        _cleanup_strv_free_ char **env = NULL;
        extern char **environ;
        ExecOptions o = opts("echo \"$AGENTIX_T|${HOME-unset}|${PATH:+path}\"");
        TestRun t;

        setenv("HOME", "/root", 1);
        assert_int_equal(env_merge(environ, ov, ELEMENTSOF(ov), &env), 0);
        o.env = env;
        run_ok(&t, &o);
        assert_string_equal(test_output(&t), "v a l|unset|path\n");
        test_run_done(&t);
}

static void test_stdin_bytes(void **state) {
        static const char data[] = "line1\n\0bin\xff\n";
        ExecOptions o = opts("od -An -c");
        TestRun t;

        o.stdin_mode = EXEC_STDIN_DATA;
        o.stdin_data = data;
        o.stdin_size = sizeof(data) - 1;
        run_ok(&t, &o);
        assert_non_null(strstr(test_output(&t), "l   i   n   e   1  \\n  \\0   b   i   n 377  \\n"));
        test_run_done(&t);
}

static void test_stdin_large_no_deadlock(void **state) {
        /* 4 MiB through cat: stdin writes and output reads must interleave. */
        const size_t size = 4 * 1024 * 1024;
        _cleanup_free_ char *data = malloc(size);
        ExecOptions o = opts("cat");
        TestRun t;

        assert_non_null(data);
        for (size_t i = 0; i < size; i++)
                data[i] = (char) ('a' + i % 26);
        o.stdin_mode = EXEC_STDIN_DATA;
        o.stdin_data = data;
        o.stdin_size = size;
        run_ok(&t, &o);
        assert_int_equal(t.out.len, size);
        assert_memory_equal(buffer_data(&t.out), data, size);
        test_run_done(&t);
}

static void test_stdin_ignored_by_child(void **state) {
        /* The child never reads stdin and exits: EPIPE must neither kill us nor hang us. */
        const size_t size = 1024 * 1024;
        _cleanup_free_ char *data = calloc(1, size);
        ExecOptions o = opts("exec 0<&-; echo closed");
        TestRun t;

        o.stdin_mode = EXEC_STDIN_DATA;
        o.stdin_data = data;
        o.stdin_size = size;
        run_ok(&t, &o);
        assert_string_equal(test_output(&t), "closed\n");
        assert_int_equal(t.result.exit_code, 0);
        test_run_done(&t);
}

static void test_stdin_default_is_dev_null(void **state) {
        ExecOptions o = opts("cat; echo rc=$?");
        TestRun t;

        run_ok(&t, &o);
        assert_string_equal(test_output(&t), "rc=0\n");
        test_run_done(&t);
}

static void test_invalid_utf8_passes_raw(void **state) {
        /* The core hands bytes over untouched; sandbox.c sanitizes for the str result. */
        ExecOptions o = opts("printf 'a\\377b'");
        TestRun t;

        run_ok(&t, &o);
        assert_int_equal(t.out.len, 3);
        assert_memory_equal(buffer_data(&t.out), "a\xff" "b", 3);
        test_run_done(&t);
}

static void test_no_fd_leak(void **state) {
        /* A non-CLOEXEC fd of ours must not reach the child: only 0, 1, 2 and ls's own. */
        int leak = open("/dev/null", O_RDONLY);
        ExecOptions o = opts("ls /proc/self/fd");
        TestRun t;

        assert_true(leak >= 3);
        run_ok(&t, &o);
        assert_string_equal(test_output(&t), "0\n1\n2\n3\n");
        close(leak);
        test_run_done(&t);
}

/* Run with SIGINT ignored and SIGTERM blocked here, so that the child's reset shows. */
static void run_ok_with_our_signals_changed(TestRun *t, const ExecOptions *o) {
        struct sigaction old, ign = { .sa_handler = SIG_IGN };
        sigset_t term, saved;

        sigemptyset(&term);
        sigaddset(&term, SIGTERM);
        assert_int_equal(sigaction(SIGINT, &ign, &old), 0);
        assert_int_equal(pthread_sigmask(SIG_BLOCK, &term, &saved), 0);
        run_ok(t, o);
        assert_int_equal(pthread_sigmask(SIG_SETMASK, &saved, NULL), 0);
        assert_int_equal(sigaction(SIGINT, &old, NULL), 0);
}

static void test_child_signal_state(void **state) {
        /* Dispositions and mask are reset even if ours are not: look at the child's /proc
         * status. */
        ExecOptions o = opts("grep -E '^(SigBlk|SigIgn)' /proc/self/status");
        TestRun t;

        run_ok_with_our_signals_changed(&t, &o);
        assert_string_equal(test_output(&t), "SigBlk:\t0000000000000000\nSigIgn:\t0000000000000000\n");
        test_run_done(&t);
}

static void test_own_session(void **state) {
        /* ps is not everywhere; /proc/self/stat fields 5 and 6 are pgrp and session. */
        ExecOptions o = opts("read -r a b c d pgrp sid rest < /proc/self/stat; echo $pgrp $sid $$");
        TestRun t;
        char want[64];

        run_ok(&t, &o);
        /* `read` runs in the shell itself, so its pid ($$) leads both. */
        snprintf(want, sizeof(want), "%d %d %d\n", t.pid, t.pid, t.pid);
        assert_string_equal(test_output(&t), want);
        test_run_done(&t);
}

static void test_missing_shell(void **state) {
        ExecOptions o = opts("true");
        ExecRun *run = NULL;
        ExecStage stage = EXEC_STAGE_SETUP;

        o.shell = "/nonexistent/sh";
        assert_int_equal(exec_start(&o, &run, &stage), -ENOENT);
        assert_null(run);
        assert_int_equal(stage, EXEC_STAGE_SPAWN);
}

static void test_other_shell(void **state) {
        ExecOptions o = opts("echo $0");
        TestRun t;

        o.shell = "/bin/bash";
        if (access(o.shell, X_OK) < 0)
                skip();
        run_ok(&t, &o);
        assert_string_equal(test_output(&t), "/bin/bash\n");
        test_run_done(&t);
}

/* ---- plain commands, run without the shell (exec-plain.h) ---- */

static void test_plain_has_no_shell_in_between(void **state) {
        /* Field 4 of /proc/self/stat is the parent: us, not a shell. */
        ExecOptions o = opts("cat /proc/self/stat");
        TestRun t;
        int pid = 0, ppid = 0;

        run_ok(&t, &o);
        assert_int_equal(sscanf(test_output(&t), "%d (cat) %*c %d", &pid, &ppid), 2);
        assert_int_equal(pid, t.pid);
        assert_int_equal(ppid, getpid());
        assert_int_equal(t.result.exit_code, 0);
        test_run_done(&t);
}

static void test_plain_child_state(void **state) {
        /* What the shell path guarantees holds without it: signals reset, own session, PWD. */
        ExecOptions o = opts("cat /proc/self/status /proc/self/stat");
        TestRun t;
        char want[64];
        const char *stat;
        int pgrp = 0, sid = 0;

        run_ok_with_our_signals_changed(&t, &o);
        assert_non_null(strstr(test_output(&t), "\nSigBlk:\t0000000000000000\n"));
        assert_non_null(strstr(test_output(&t), "\nSigIgn:\t0000000000000000\n"));
        stat = strstr(test_output(&t), "(cat) ");
        assert_non_null(stat);
        assert_int_equal(sscanf(stat, "(cat) %*c %*d %d %d", &pgrp, &sid), 2);
        assert_int_equal(pgrp, t.pid);
        assert_int_equal(sid, t.pid);
        test_run_done(&t);

        o = opts("printenv PWD");
        o.cwd = "/usr/bin";
        run_ok(&t, &o);
        snprintf(want, sizeof(want), "%s\n", o.cwd);
        assert_string_equal(test_output(&t), want);
        test_run_done(&t);
}

static void test_plain_exit_codes_and_errors(void **state) {
        ExecOptions o = opts("ls /nonexistent-agentix");
        TestRun t;

        run_ok(&t, &o);
        assert_int_equal(t.result.exit_code, 2); /* ls's own status, not the shell's */
        assert_non_null(strstr(test_output(&t), "nonexistent-agentix"));
        test_run_done(&t);

        /* Not found: the shell reports it as always. */
        o = opts("no-such-command-agentix --flag");
        run_ok(&t, &o);
        assert_int_equal(t.result.exit_code, 127);
        assert_non_null(strstr(test_output(&t), "not found"));
        test_run_done(&t);

        /* A path that is a directory: exec fails, the shell says so (126). */
        o = opts("/usr");
        run_ok(&t, &o);
        assert_int_equal(t.result.exit_code, 126);
        test_run_done(&t);
}

static void test_plain_script_without_interpreter_line(void **state) {
        /* exec() refuses it (ENOEXEC); the shell then runs it as a script, as it always did. */
        char path[] = "/tmp/test-exec-script.XXXXXX", want[128];
        ExecOptions o = opts(path);
        TestRun t;
        int fd = mkstemp(path);

        assert_true(fd >= 0);
        assert_int_equal(write(fd, "echo from-script $0\n", 21), 21);
        assert_int_equal(fchmod(fd, 0755), 0);
        close(fd);
        run_ok(&t, &o);
        snprintf(want, sizeof(want), "from-script %s\n", path);
        assert_string_equal(test_output(&t), want);
        assert_int_equal(t.result.exit_code, 0);
        test_run_done(&t);
        unlink(path);
}

/* ---- the inbox (bidi, no PTY) ---- */

static void test_inbox_cat(void **state) {
        const TestItem items[] = {
                { TEST_ITEM_STDIN, .data = "hello ", .size = 6 },
                { TEST_ITEM_STDIN, .data = "world\n", .size = 6 },
                { TEST_ITEM_EOF },
                { TEST_ITEM_STDIN, .data = "ignored", .size = 7 }, /* after EOF */
        };
        ExecOptions o = opts("cat; echo eof");
        TestRun t;

        o.merge_stderr = false;
        o.stdin_mode = EXEC_STDIN_INTERACTIVE;
        o.stdin_data = "first ";
        o.stdin_size = 6;
        test_run_init(&t);
        t.items = items;
        t.n_items = ELEMENTSOF(items);
        assert_int_equal(test_run(&t, &o), 0);
        assert_string_equal(test_output(&t), "first hello world\neof\n");
        assert_int_equal(t.result.exit_code, 0);
        test_run_done(&t);
}

static void test_inbox_closed_is_eof(void **state) {
        const TestItem items[] = {
                { TEST_ITEM_STDIN, .data = "abc", .size = 3 },
        };
        ExecOptions o = opts("wc -c");
        TestRun t;

        o.stdin_mode = EXEC_STDIN_INTERACTIVE;
        test_run_init(&t);
        t.items = items;
        t.n_items = ELEMENTSOF(items);
        t.close_inbox = true;
        assert_int_equal(test_run(&t, &o), 0);
        assert_string_equal(test_output(&t), "3\n");
        test_run_done(&t);
}

static void test_inbox_signal(void **state) {
        /* Gate on sleep having been exec'd: a signal that reaches dash -c while it is busy
         * is only acted on after the foreground command ends. */
        const TestItem items[] = {
                { TEST_ITEM_SIGNAL, .gate_comm = "sleep", .sig = SIGINT },
        };
        ExecOptions o = opts("exec sleep 100");
        TestRun t;

        o.stdin_mode = EXEC_STDIN_INTERACTIVE;
        test_run_init(&t);
        t.items = items;
        t.n_items = ELEMENTSOF(items);
        assert_int_equal(test_run(&t, &o), 0);
        assert_int_equal(t.result.exit_code, 128 + SIGINT);
        assert_int_equal(t.result.signal, SIGINT);
        test_run_done(&t);
}

static void test_inbox_backpressure(void **state) {
        /* The child reads nothing for 0.5 s: we may fill the pipe and our buffer, but must not
         * drain the whole inbox into memory in the meantime. */
        enum { ITEM = 16 * 1024, N = 128 };
        static char block[ITEM];
        TestItem items[N + 1];
        ExecOptions o = opts("sleep 0.5; wc -c");
        TestRun t;

        for (size_t i = 0; i < N; i++)
                items[i] = (TestItem) { TEST_ITEM_STDIN, .data = block, .size = ITEM };
        items[N] = (TestItem) { TEST_ITEM_EOF };
        o.stdin_mode = EXEC_STDIN_INTERACTIVE;
        test_run_init(&t);
        t.items = items;
        t.n_items = N + 1;
        t.window_usec = 400 * 1000;
        assert_int_equal(test_run(&t, &o), 0);
        assert_string_equal(test_output(&t), "2097152\n");
        /* pipe (64 KiB) + our buffer (64 KiB) + one item over the bound */
        print_message("items taken before the child read: %zu of %d\n", t.items_in_window, N);
        assert_true(t.items_in_window <= (64 * 1024 + EXEC_STDIN_BUFFER_MAX) / ITEM + 1);
        test_run_done(&t);
}

static void test_cancel_while_backpressured(void **state) {
        /* The wait_fd is not watched while the stdin buffer is full; cancel must still work. */
        enum { ITEM = 64 * 1024, N = 64 };
        static char block[ITEM];
        TestItem items[N];
        ExecOptions o = opts("sleep 100");
        TestCanceller c;
        TestRun t;

        for (size_t i = 0; i < N; i++)
                items[i] = (TestItem) { TEST_ITEM_STDIN, .data = block, .size = ITEM };
        o.stdin_mode = EXEC_STDIN_INTERACTIVE;
        test_run_init(&t);
        t.items = items;
        t.n_items = N;
        test_cancel_after(&c, &t, 200 * 1000);
        assert_int_equal(test_run(&t, &o), -ECANCELED);
        assert_int_equal(pthread_join(c.thread, NULL), 0);
        assert_true(now_usec() - t.cancelled_at < 100 * 1000);
        assert_true(test_group_gone(t.pid));
        test_run_done(&t);
}

static void test_resize_without_pty(void **state) {
        ExecOptions o = opts("true");
        _cleanup_exec_run_ ExecRun *run = NULL;

        o.stdin_mode = EXEC_STDIN_INTERACTIVE;
        assert_int_equal(exec_start(&o, &run, NULL), 0);
        assert_int_equal(exec_run_resize(run, 10, 10), -ENOTTY);
}

int main(void) {
        test_become_subreaper();

        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_echo),
                cmocka_unit_test(test_exit_codes),
                cmocka_unit_test(test_killed_by_signal),
                cmocka_unit_test(test_stderr_merged_in_order),
                cmocka_unit_test(test_streams_separate),
                cmocka_unit_test(test_coalescing),
                cmocka_unit_test(test_truncation_does_not_hang),
                cmocka_unit_test(test_max_output_zero_and_exact),
                cmocka_unit_test(test_timeout_kills_group),
                cmocka_unit_test(test_timeout_keeps_output),
                cmocka_unit_test(test_cancel_is_prompt),
                cmocka_unit_test(test_background_job_does_not_block),
                cmocka_unit_test(test_cwd),
                cmocka_unit_test(test_env),
                cmocka_unit_test(test_stdin_bytes),
                cmocka_unit_test(test_stdin_large_no_deadlock),
                cmocka_unit_test(test_stdin_ignored_by_child),
                cmocka_unit_test(test_stdin_default_is_dev_null),
                cmocka_unit_test(test_invalid_utf8_passes_raw),
                cmocka_unit_test(test_no_fd_leak),
                cmocka_unit_test(test_plain_has_no_shell_in_between),
                cmocka_unit_test(test_plain_child_state),
                cmocka_unit_test(test_plain_exit_codes_and_errors),
                cmocka_unit_test(test_plain_script_without_interpreter_line),
                cmocka_unit_test(test_child_signal_state),
                cmocka_unit_test(test_own_session),
                cmocka_unit_test(test_missing_shell),
                cmocka_unit_test(test_other_shell),
                cmocka_unit_test(test_inbox_cat),
                cmocka_unit_test(test_inbox_closed_is_eof),
                cmocka_unit_test(test_inbox_signal),
                cmocka_unit_test(test_inbox_backpressure),
                cmocka_unit_test(test_cancel_while_backpressured),
                cmocka_unit_test(test_resize_without_pty),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}

/* SPDX-License-Identifier: MIT */
/* End-to-end tests of the worker: a real worker process (forked by the harness) running
 * tests/modules/testmod.so, spoken to in frames. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>

#include "envelope.h"
#include "frame.h"
#include "macro.h"
#include "worker-harness.h"

#define TIMEOUT_MS 10000

static WorkerHarness *start(const WorkerOptions *o) {
        WorkerOptions opts = o ? *o : (WorkerOptions) { .no_seccomp = true };
        WorkerHarness *h = NULL;

        if (!opts.module_dir)
                opts.module_dir = TESTMOD_DIR;
        assert_int_equal(worker_harness_start(&opts, &h), 0);
        assert_int_equal(worker_harness_wait_ready(h, TIMEOUT_MS), 0);
        return h;
}

/* Shut the worker down and check it exits cleanly (under LeakSanitizer when the test runs
 * without seccomp: a leak makes the exit status non-zero). */
static void stop(WorkerHarness *h) {
        int status;

        assert_int_equal(worker_harness_shutdown(h, TIMEOUT_MS, &status), 0);
        assert_true(WIFEXITED(status));
        assert_int_equal(WEXITSTATUS(status), 0);
        worker_harness_free(h);
}

/* Call, expect RESULT, compare its value's JSON. */
static void expect_unary(WorkerHarness *h, const char *id, const char *callable, const char *args,
                         const char *kwargs, const char *expected_json) {
        WorkerFrame f = {};

        assert_int_equal(worker_harness_call(h, id, callable, "unary", args, kwargs, -1), 0);
        assert_int_equal(worker_harness_read_for(h, id, TIMEOUT_MS, &f), 0);
        if (f.kind != FRAME_RESULT)
                fail_msg("%s: expected RESULT, got '%c' %s: %s", id, f.kind, strna(f.error_type), strna(f.error_message));
        assert_string_equal(f.value_json, expected_json);
        worker_frame_done(&f);
}

static void expect_error(WorkerHarness *h, const char *id, const char *type, const char *message_part,
                         bool cancelled) {
        WorkerFrame f = {};

        assert_int_equal(worker_harness_read_for(h, id, TIMEOUT_MS, &f), 0);
        if (f.kind != FRAME_ERROR)
                fail_msg("%s: expected ERROR %s, got '%c' %s", id, type, f.kind, strna(f.value_json));
        assert_string_equal(f.error_type, type);
        if (message_part && !strstr(f.error_message, message_part))
                fail_msg("%s: message \"%s\" lacks \"%s\"", id, f.error_message, message_part);
        assert_int_equal(f.cancelled, cancelled);
        worker_frame_done(&f);
}

static void test_ready_and_echo(void **state) {
        WorkerHarness *h = start(NULL);

        expect_unary(h, "e1", "testmod::echo", "[42]", NULL, "42");
        expect_unary(h, "e2", "testmod::echo", NULL, "{\"value\": \"hi\"}", "\"hi\"");
        stop(h);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_ready_and_echo),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}

/* SPDX-License-Identifier: MIT */
/* shell:: end to end: a real worker (forked by the worker harness) running the built-in module,
 * spoken to in frames. State kept between runs, a hung command timed out while another call
 * answers its prompt, input and interrupt from concurrent calls, sessions by id, 20 at once,
 * errors by type. Complements test-shell-session.c, which tests the core without msgpack. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "macro.h"
#include "envelope.h"
#include "mp-check.h"
#include "worker-harness.h"

#define TIMEOUT_MS 20000

static WorkerHarness *worker;
static unsigned counter;

static int setup(void **state) {
        WorkerOptions o = { .module_dir = "/nonexistent", .no_seccomp = true };

        assert_int_equal(worker_harness_start(&o, &worker), 0);
        assert_int_equal(worker_harness_wait_ready(worker, TIMEOUT_MS), 0);
        return 0;
}

/* cmocka reports a failed group teardown but does not count it: main() does. */
static bool teardown_failed;

static int teardown(void **state) {
        int status;

        teardown_failed = true;
        assert_int_equal(worker_harness_shutdown(worker, TIMEOUT_MS, &status), 0);
        worker = worker_harness_free(worker);
        /* LeakSanitizer runs in the worker at exit: a leak makes the status non-zero. */
        assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        teardown_failed = false;
        return 0;
}

/* Start shell::FUNCTION with kwargs (json_pack'ed, taken); returns the call id. */
static const char *start(const char *function, json_t *kwargs) {
        static char ids[64][16];
        char *id = ids[counter % 64], callable[64];
        _cleanup_free_ char *text = NULL;

        assert_non_null(kwargs);
        snprintf(id, 16, "s%u", ++counter);
        snprintf(callable, sizeof(callable), "shell::%s", function);
        text = json_dumps(kwargs, JSON_COMPACT);
        json_decref(kwargs);
        assert_int_equal(worker_harness_call(worker, id, callable, "unary", NULL, text, -1), 0);
        return id;
}

/* The RESULT of call id, as JSON text (malloc'ed). */
static char *result(const char *id) {
        WorkerFrame f = {};
        char *json;

        assert_int_equal(worker_harness_read_for(worker, id, TIMEOUT_MS, &f), 0);
        if (f.kind != FRAME_RESULT)
                fail_msg("%s: expected RESULT, got '%c' %s: %s", id, f.kind, strna(f.error_type), strna(f.error_message));
        json = strdup(f.value_json ?: "null");
        worker_frame_done(&f);
        return json;
}

static void expect_error(const char *id, const char *type, const char *message_part) {
        WorkerFrame f = {};

        assert_int_equal(worker_harness_read_for(worker, id, TIMEOUT_MS, &f), 0);
        if (f.kind != FRAME_ERROR)
                fail_msg("%s: expected ERROR %s, got '%c' %s", id, type, f.kind, strna(f.value_json));
        if (!streq(f.error_type, type))
                fail_msg("%s: expected %s, got %s: %s", id, type, f.error_type, strna(f.error_message));
        if (message_part && !strstr(f.error_message, message_part))
                fail_msg("%s: message \"%s\" lacks \"%s\"", id, f.error_message, message_part);
        worker_frame_done(&f);
}

static char *open_session(void) {
        _cleanup_free_ char *json = result(start("open", json_object()));
        json_t *j = json_loads(json, JSON_DECODE_ANY, NULL);
        char *id;

        assert_true(json_is_string(j));
        id = strdup(json_string_value(j));
        json_decref(j);
        return id;
}

/* shell::run, its result parsed. */
static json_t *run(const char *session, const char *command, double timeout) {
        json_t *kw = json_pack("{s:s, s:s}", "id", session, "command", command), *j;
        _cleanup_free_ char *json = NULL;

        if (timeout > 0)
                json_object_set_new(kw, "timeout", json_real(timeout));
        json = result(start("run", kw));
        j = json_loads(json, 0, NULL);
        assert_non_null(j);
        return j;
}

static void expect_run(const char *session, const char *command, const char *output, int exit_code) {
        json_t *j = run(session, command, 10);

        if (!streq(json_string_value(json_object_get(j, "output")), output))
                fail_msg("%s: output '%s', expected '%s'", command, json_string_value(json_object_get(j, "output")), output);
        assert_int_equal(json_integer_value(json_object_get(j, "exit_code")), exit_code);
        assert_true(json_is_false(json_object_get(j, "timed_out")));
        assert_true(json_is_false(json_object_get(j, "ended")));
        json_decref(j);
}

/* Until shell::list says the session is running a command (calls run concurrently). */
static void wait_running(const char *session) {
        for (int i = 0; i < 200; i++) {
                _cleanup_free_ char *listed = result(start("list", json_object()));
                json_t *list = json_loads(listed, 0, NULL);
                size_t k;
                json_t *e;
                bool running = false;

                json_array_foreach(list, k, e)
                        if (streq(json_string_value(json_object_get(e, "id")) ?: "", session))
                                running = json_is_true(json_object_get(e, "running"));
                json_decref(list);
                if (running)
                        return;
                usleep(10 * 1000);
        }
        fail_msg("session %s never ran the command", session);
}

static void test_state_persists(void **state) {
        _cleanup_free_ char *s = open_session();

        expect_run(s, "cd /tmp && export AGX=1 && greet() { echo \"hi $1\"; }", "", 0);
        expect_run(s, "pwd; echo $AGX; greet you", "/tmp\n1\nhi you\n", 0);
        expect_run(s, "false", "", 1);
        free(result(start("close", json_pack("{s:s}", "id", s))));
        expect_error(start("run", json_pack("{s:s, s:s}", "id", s, "command", "true")), "SessionNotFound", s);
}

static void test_a_hung_command_times_out_and_the_next_works(void **state) {
        _cleanup_free_ char *s = open_session();
        json_t *j = run(s, "sleep 60", 0.5);

        assert_true(json_is_true(json_object_get(j, "timed_out")));
        json_decref(j);
        expect_run(s, "echo next", "next\n", 0);
        free(result(start("close", json_pack("{s:s}", "id", s))));
}

static void test_input_and_interrupt_from_other_calls(void **state) {
        _cleanup_free_ char *s = open_session();
        const char *r, *busy;
        _cleanup_free_ char *out = NULL;
        json_t *j;

        /* A prompt, answered by shell::input while the run waits. */
        r = start("run", json_pack("{s:s, s:s}", "id", s, "command", "read -r x; echo \"got $x\""));
        wait_running(s);
        busy = start("run", json_pack("{s:s, s:s}", "id", s, "command", "true"));
        expect_error(busy, "SessionBusy", s);
        free(result(start("input", json_pack("{s:s, s:s}", "id", s, "data", "yes\n"))));
        out = result(r);
        j = json_loads(out, 0, NULL);
        assert_string_equal(json_string_value(json_object_get(j, "output")), "got yes\n");
        json_decref(j);

        /* A command that never ends, stopped by shell::interrupt from another call. */
        r = start("run", json_pack("{s:s, s:s}", "id", s, "command", "sleep 60; echo not here"));
        wait_running(s);
        usleep(100 * 1000); /* the shell has begun the command */
        free(result(start("interrupt", json_pack("{s:s}", "id", s))));
        free(out);
        out = result(r);
        j = json_loads(out, 0, NULL);
        assert_int_equal(json_integer_value(json_object_get(j, "exit_code")), 130);
        assert_null(strstr(json_string_value(json_object_get(j, "output")), "not here"));
        json_decref(j);
        expect_run(s, "echo after", "after\n", 0);
        free(result(start("close", json_pack("{s:s}", "id", s))));
}

static void test_twenty_sessions_and_list(void **state) {
        char *ids[20];
        _cleanup_free_ char *listed = NULL;
        json_t *list;

        for (size_t i = 0; i < ELEMENTSOF(ids); i++) {
                char cmd[32];

                ids[i] = open_session();
                snprintf(cmd, sizeof(cmd), "N=%zu", i);
                expect_run(ids[i], cmd, "", 0);
        }
        for (size_t i = 0; i < ELEMENTSOF(ids); i++) {
                char want[16];

                snprintf(want, sizeof(want), "%zu\n", i);
                expect_run(ids[i], "echo $N", want, 0);
        }
        listed = result(start("list", json_object()));
        list = json_loads(listed, 0, NULL);
        assert_int_equal(json_array_size(list), 20);
        assert_non_null(json_object_get(json_array_get(list, 0), "cwd"));
        json_decref(list);
        for (size_t i = 0; i < ELEMENTSOF(ids); i++) {
                free(result(start("close", json_pack("{s:s}", "id", ids[i]))));
                free(ids[i]);
        }
        free(listed);
        listed = result(start("list", json_object()));
        assert_string_equal(listed, "[]");
}

static void test_exit_ends_the_session(void **state) {
        _cleanup_free_ char *s = open_session();
        json_t *j = run(s, "exit 4", 10);

        assert_true(json_is_true(json_object_get(j, "ended")));
        assert_int_equal(json_integer_value(json_object_get(j, "exit_code")), 4);
        json_decref(j);
        expect_error(start("run", json_pack("{s:s, s:s}", "id", s, "command", "true")), "SessionNotFound", NULL);
}

static void test_a_named_session(void **state) {
        _cleanup_free_ char *id = result(start("open", json_pack("{s:s}", "name", "work-1")));

        assert_string_equal(id, "\"work-1\"");
        expect_run("work-1", "X=named", "", 0);
        expect_run("work-1", "echo $X", "named\n", 0);
        expect_error(start("open", json_pack("{s:s}", "name", "work-1")), "SessionExists", "work-1");
        expect_error(start("open", json_pack("{s:s}", "name", "no spaces")), "ValueError", "name");
        free(result(start("close", json_pack("{s:s}", "id", "work-1"))));
        /* Closed, the name is free again. */
        free(result(start("open", json_pack("{s:s}", "name", "work-1"))));
        expect_run("work-1", "echo \"[$X]\"", "[]\n", 0);
        free(result(start("close", json_pack("{s:s}", "id", "work-1"))));
}

static void test_bad_input(void **state) {
        expect_error(start("run", json_pack("{s:s, s:s}", "id", "nope", "command", "true")), "SessionNotFound", "nope");
        expect_error(start("interrupt", json_pack("{s:s}", "id", "nope")), "SessionNotFound", NULL);
        expect_error(start("open", json_pack("{s:s}", "cwd", "relative")), "ValueError", "absolute");
        expect_error(start("open", json_pack("{s:s}", "cwd", "/nonexistent")), "FileNotFoundError", NULL);
        expect_error(start("open", json_pack("{s:s}", "shell", "/nonexistent/bash")), "FileNotFoundError",
                     "/nonexistent/bash");
        expect_error(start("run", json_pack("{s:i, s:s}", "id", 3, "command", "true")), "ArgumentError", NULL);
}

/* shell::run with max_output an int packed as msgpack packs it (JSON cannot say 2^64-1). */
static const char *start_run_max_output(const char *session, const char *command, bool negative, uint64_t value) {
        static char ids[16][16];
        char *id = ids[counter % 16];
        msgpack_sbuffer sb;
        msgpack_packer pk;

        snprintf(id, 16, "s%u", ++counter);
        msgpack_sbuffer_init(&sb);
        msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
        msgpack_pack_map(&pk, 3);
        mp_pack_cstr(&pk, "id");
        mp_pack_cstr(&pk, session);
        mp_pack_cstr(&pk, "command");
        mp_pack_cstr(&pk, command);
        mp_pack_cstr(&pk, "max_output");
        if (negative)
                msgpack_pack_int64(&pk, (int64_t) value);
        else
                msgpack_pack_uint64(&pk, value);
        assert_int_equal(worker_harness_call_mp(worker, id, "shell::run", "unary", NULL, 0, sb.data, sb.size, -1), 0);
        msgpack_sbuffer_destroy(&sb);
        return id;
}

/* max_output beyond int64 used to be read as a negative int64 that passed the upper bound:
 * 2^64-1 became SIZE_MAX and the output buffer was trimmed one byte before its start (ASan),
 * 2^63 lifted the cap. Each is refused, naming the argument, and the session goes on. */
static void test_max_output_out_of_range(void **state) {
        static const struct {
                bool negative;
                uint64_t value;
        } bad[] = {
                { false, UINT64_MAX },
                { false, 1ULL << 63 },
                { false, (1ULL << 63) + 100 },
                { false, 64u * 1024 * 1024 + 1 },
                { true, (uint64_t) -1 },
                { true, (uint64_t) INT64_MIN },
        };
        _cleanup_free_ char *s = open_session();
        _cleanup_free_ char *out = NULL;
        json_t *j;

        for (size_t i = 0; i < ELEMENTSOF(bad); i++)
                /* Output longer than the few bytes the trim keeps past max_output, read before the
                 * command ends (the trim runs only while the end has not come). */
                expect_error(start_run_max_output(s, "printf '%0300d' 0; sleep 0.3", bad[i].negative, bad[i].value), "ArgumentError",
                             "max_output");
        out = result(start_run_max_output(s, "printf '%0300d' 0", false, 10));
        j = json_loads(out, 0, NULL);
        assert_string_equal(json_string_value(json_object_get(j, "output")), "0000000000");
        assert_true(json_is_true(json_object_get(j, "truncated")));
        json_decref(j);
        free(result(start("close", json_pack("{s:s}", "id", s))));
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_state_persists),
                cmocka_unit_test(test_a_hung_command_times_out_and_the_next_works),
                cmocka_unit_test(test_input_and_interrupt_from_other_calls),
                cmocka_unit_test(test_twenty_sessions_and_list),
                cmocka_unit_test(test_exit_ends_the_session),
                cmocka_unit_test(test_a_named_session),
                cmocka_unit_test(test_bad_input),
                cmocka_unit_test(test_max_output_out_of_range),
        };

        return cmocka_run_group_tests(tests, setup, teardown) || teardown_failed;
}

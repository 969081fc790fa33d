/* SPDX-License-Identifier: MIT */
/* code:: end to end: a real worker (forked by the worker harness) running the built-in module
 * against the build host's ipykernel (Debian's python3-ipykernel, python3-matplotlib,
 * python3-pandas; skipped, exit 77, without a python3 kernelspec). State between runs, rich
 * results (a PNG that decodes with the right size, a DataFrame's HTML), interrupt, timeout,
 * a dying kernel, separate contexts, the queue's bound, the output cap and bad input.
 * Complements test-jupyter-kernel.c, which tests the client without msgpack. */
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

#include "envelope.h"
#include "kernelspec.h"
#include "macro.h"
#include "worker-harness.h"

#define TIMEOUT_MS 60000

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

/* Start code::FUNCTION with kwargs (json_pack'ed, taken); returns the call id. */
static const char *start(const char *function, const char *shape, json_t *kwargs) {
        static char ids[128][16];
        char *id = ids[counter % 128], callable[64];
        _cleanup_free_ char *text = NULL;

        assert_non_null(kwargs);
        snprintf(id, 16, "c%u", ++counter);
        snprintf(callable, sizeof(callable), "code::%s", function);
        text = json_dumps(kwargs, JSON_COMPACT);
        json_decref(kwargs);
        assert_int_equal(worker_harness_call(worker, id, callable, shape, NULL, text, -1), 0);
        return id;
}

static json_t *unary(const char *function, json_t *kwargs) {
        const char *id = start(function, "unary", kwargs);
        WorkerFrame f = {};
        json_t *j;

        assert_int_equal(worker_harness_read_for(worker, id, TIMEOUT_MS, &f), 0);
        if (f.kind != FRAME_RESULT)
                fail_msg("%s: expected RESULT, got '%c' %s: %s", function, f.kind, strna(f.error_type),
                         strna(f.error_message));
        j = json_loads(f.value_json, JSON_DECODE_ANY, NULL);
        worker_frame_done(&f);
        return j;
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

/* PNG's size from its IHDR chunk; 0×0 when it is no PNG. */
static void png_size(const msgpack_object *png, unsigned *w, unsigned *h) {
        const unsigned char *p = (const unsigned char *) png->via.bin.ptr;

        *w = *h = 0;
        if (png->type != MSGPACK_OBJECT_BIN || png->via.bin.size < 24 || memcmp(p, "\x89PNG\r\n\x1a\n", 8) != 0 ||
            memcmp(p + 12, "IHDR", 4) != 0)
                return;
        *w = (unsigned) p[16] << 24 | (unsigned) p[17] << 16 | (unsigned) p[18] << 8 | p[19];
        *h = (unsigned) p[20] << 24 | (unsigned) p[21] << 16 | (unsigned) p[22] << 8 | p[23];
}

/* The items of a finished run as a JSON array; a PNG in a result gets "png": [width, height]
 * beside its data. The terminal frame must be END. */
static json_t *collect(const char *id) {
        json_t *items = json_array();

        for (;;) {
                WorkerFrame f = {};
                json_t *item;

                assert_int_equal(worker_harness_read_for(worker, id, TIMEOUT_MS, &f), 0);
                if (f.kind != FRAME_ITEM) {
                        if (f.kind != FRAME_END)
                                fail_msg("%s: expected END, got '%c' %s: %s", id, f.kind, strna(f.error_type),
                                         strna(f.error_message));
                        worker_frame_done(&f);
                        return items;
                }
                item = json_loads(f.value_json, 0, NULL);
                assert_non_null(item);
                const msgpack_object *png = mp_map_get(mp_map_get(f.value, "data"), "image/png");
                if (png) {
                        unsigned w, h;

                        png_size(png, &w, &h);
                        json_object_set_new(item, "png", json_pack("[i,i]", w, h));
                }
                json_array_append_new(items, item);
                worker_frame_done(&f);
        }
}

static json_t *run_in(const char *context, const char *code, double timeout) {
        json_t *kw = json_pack("{s:s}", "code", code);

        if (context)
                json_object_set_new(kw, "context", json_string(context));
        if (timeout > 0)
                json_object_set_new(kw, "timeout", json_real(timeout));
        return collect(start("run", "stream", kw));
}

/* The first item of `type` (borrowed from items), or NULL. */
static json_t *first(json_t *items, const char *type) {
        size_t i;
        json_t *it;

        json_array_foreach(items, i, it)
                if (streq(json_string_value(json_object_get(it, "type")) ?: "", type))
                        return it;
        return NULL;
}

static const char *main_text(json_t *items) {
        size_t i;
        json_t *it;

        json_array_foreach(items, i, it)
                if (json_is_true(json_object_get(it, "is_main_result")))
                        return json_string_value(json_object_get(json_object_get(it, "data"), "text/plain"));
        fail_msg("no main result among %s", json_dumps(items, JSON_COMPACT));
        return NULL;
}

static char *all_text(json_t *items, const char *type) {
        char *out = NULL;
        size_t size = 0, i;
        FILE *f = open_memstream(&out, &size);
        json_t *it;

        json_array_foreach(items, i, it)
                if (streq(json_string_value(json_object_get(it, "type")) ?: "", type))
                        fputs(json_string_value(json_object_get(it, "text")) ?: "", f);
        fclose(f);
        return out;
}

static char *new_context(void) {
        json_t *j = unary("create_context", json_pack("{s:s, s:s}", "language", "python", "cwd", "/tmp"));
        char *id;

        assert_true(json_is_string(j));
        id = strdup(json_string_value(j));
        json_decref(j);
        return id;
}

static void test_state_and_streams(void **state) {
        json_t *items;
        _cleanup_free_ char *out = NULL, *err = NULL;

        /* No context: the default python context, made on first use. */
        items = run_in(NULL, "x = 1", 0);
        assert_non_null(first(items, "execution_count"));
        assert_null(first(items, "result"));
        json_decref(items);
        items = run_in(NULL, "x + 1", 0);
        assert_string_equal(main_text(items), "2");
        json_decref(items);
        items = run_in("default-python3", "import sys\nprint('to out')\nprint('to err', file=sys.stderr)", 0);
        out = all_text(items, "stdout");
        err = all_text(items, "stderr");
        assert_string_equal(out, "to out\n");
        assert_string_equal(err, "to err\n");
        json_decref(items);

        /* An exception is an error item with its name, value and traceback. */
        items = run_in(NULL, "{}['missing']", 0);
        json_t *e = first(items, "error");
        assert_non_null(e);
        assert_string_equal(json_string_value(json_object_get(e, "name")), "KeyError");
        assert_string_equal(json_string_value(json_object_get(e, "value")), "'missing'");
        assert_non_null(strstr(json_string_value(json_object_get(e, "traceback")), "KeyError"));
        json_decref(items);
}

static void test_rich_results(void **state) {
        json_t *items, *r;
        size_t i;

        /* The inline backend, at the figure's own size (no tight bounding box): 4×3 in at 100 dpi. */
        items = run_in(NULL,
                       "%config InlineBackend.print_figure_kwargs = {'bbox_inches': None}\n"
                       "import matplotlib.pyplot as plt\n"
                       "fig = plt.figure(figsize=(4, 3), dpi=100)\n"
                       "plt.plot([1, 2, 3], [1, 4, 9])\n"
                       "plt.show()",
                       0);
        r = first(items, "result");
        if (!r)
                fail_msg("no result: %s", json_dumps(items, 0));
        assert_true(json_is_false(json_object_get(r, "is_main_result")));
        assert_int_equal(json_integer_value(json_array_get(json_object_get(r, "png"), 0)), 400);
        assert_int_equal(json_integer_value(json_array_get(json_object_get(r, "png"), 1)), 300);
        assert_non_null(json_object_get(json_object_get(r, "data"), "text/plain"));
        json_decref(items);

        items = run_in(NULL, "import pandas as pd\npd.DataFrame({'a': [1, 2], 'b': ['x', 'y']})", 0);
        r = NULL;
        json_array_foreach(items, i, r)
                if (json_is_true(json_object_get(r, "is_main_result")))
                        break;
        assert_non_null(strstr(json_string_value(json_object_get(json_object_get(r, "data"), "text/html")), "<table"));
        json_decref(items);

        /* application/json is the value itself, not text. */
        items = run_in(NULL, "from IPython.display import JSON\nJSON({'k': [1, 2]})", 0);
        r = json_object_get(json_object_get(first(items, "result"), "data"), "application/json");
        assert_true(json_is_object(r));
        assert_int_equal(json_integer_value(json_array_get(json_object_get(r, "k"), 1)), 2);
        json_decref(items);
}

static void test_interrupt_timeout_and_death(void **state) {
        _cleanup_free_ char *ctx = new_context();
        const char *id;
        json_t *items, *e;

        items = run_in(ctx, "y = 7", 0);
        json_decref(items);

        /* code::interrupt from another call stops `while True: pass`. */
        id = start("run", "stream", json_pack("{s:s, s:s}", "code", "while True: pass", "context", ctx));
        usleep(500 * 1000);
        json_decref(unary("interrupt", json_pack("{s:s}", "context", ctx)));
        items = collect(id);
        e = first(items, "error");
        assert_non_null(e);
        assert_string_equal(json_string_value(json_object_get(e, "name")), "KeyboardInterrupt");
        json_decref(items);
        items = run_in(ctx, "y", 0);
        assert_string_equal(main_text(items), "7");
        json_decref(items);

        /* A timeout interrupts, says so, and keeps the state. */
        items = run_in(ctx, "import time\ntime.sleep(60)", 0.5);
        e = json_array_get(items, json_array_size(items) - 1);
        assert_string_equal(json_string_value(json_object_get(e, "name")), "TimeoutError");
        json_decref(items);
        items = run_in(ctx, "y + 1", 0);
        assert_string_equal(main_text(items), "8");
        json_decref(items);

        /* A kernel that dies: an error, then a new kernel (state gone) on the next run. */
        items = run_in(ctx, "import os; os._exit(1)", 0);
        e = first(items, "error");
        assert_non_null(e);
        assert_string_equal(json_string_value(json_object_get(e, "name")), "DeadKernelError");
        json_decref(items);
        items = run_in(ctx, "'y' in globals()", 0);
        assert_string_equal(main_text(items), "False");
        json_decref(items);

        /* restart: a fresh kernel. */
        json_decref(run_in(ctx, "z = 1", 0));
        json_decref(unary("restart", json_pack("{s:s}", "context", ctx)));
        items = run_in(ctx, "'z' in globals()", 0);
        assert_string_equal(main_text(items), "False");
        json_decref(items);
        json_decref(unary("delete_context", json_pack("{s:s}", "id", ctx)));
}

static void test_contexts_are_separate(void **state) {
        _cleanup_free_ char *a = new_context(), *b = new_context();
        json_t *items, *list, *c;
        size_t i;
        bool seen_a = false;

        assert_string_not_equal(a, b);
        json_decref(run_in(a, "v = 'a'", 0));
        json_decref(run_in(b, "v = 'b'", 0));
        items = run_in(a, "v", 0);
        assert_string_equal(main_text(items), "'a'");
        json_decref(items);
        items = run_in(b, "import os; v, os.getcwd()", 0);
        assert_string_equal(main_text(items), "('b', '/tmp')");
        json_decref(items);

        list = unary("contexts", json_object());
        json_array_foreach(list, i, c)
                if (streq(json_string_value(json_object_get(c, "id")), a)) {
                        seen_a = true;
                        assert_string_equal(json_string_value(json_object_get(c, "language")), "python");
                        assert_string_equal(json_string_value(json_object_get(c, "kernel")), "python3");
                        assert_true(json_integer_value(json_object_get(c, "pid")) > 0);
                }
        assert_true(seen_a);
        json_decref(list);
        json_decref(unary("delete_context", json_pack("{s:s}", "id", a)));
        json_decref(unary("delete_context", json_pack("{s:s}", "id", b)));
        expect_error(start("run", "stream", json_pack("{s:s, s:s}", "code", "1", "context", a)), "ContextNotFound", a);
}

static void test_env_for_one_run(void **state) {
        json_t *items;

        /* (str(): a bare None has no result) */
        items = run_in(NULL, "import os; str(os.environ.get('AGENTIX_TEST_VAR'))", 0);
        assert_string_equal(main_text(items), "'None'");
        json_decref(items);
        items = collect(start("run", "stream",
                              json_pack("{s:s, s:{s:s}}", "code", "os.environ['AGENTIX_TEST_VAR']", "env",
                                        "AGENTIX_TEST_VAR", "it's \"set\" \xc3\xa9")));
        assert_string_equal(main_text(items), "'it\\'s \"set\" \xc3\xa9'");
        json_decref(items);
        items = run_in(NULL, "str(os.environ.get('AGENTIX_TEST_VAR'))", 0);
        assert_string_equal(main_text(items), "'None'");
        json_decref(items);
}

static void test_queue_is_bounded_and_serial(void **state) {
        _cleanup_free_ char *ctx = new_context();
        const char *ids[40];
        unsigned ok = 0, busy = 0;
        bool seen[41] = {};

        json_decref(run_in(ctx, "import time\nn = 0", 0));
        /* One run holds the kernel for a while; 39 more arrive behind it: 32 wait, the rest are
         * turned away. Those that run see n grow by one each time: one at a time. */
        ids[0] = start("run", "stream", json_pack("{s:s, s:s}", "code", "time.sleep(2)\nn += 1\nn", "context", ctx));
        usleep(300 * 1000);
        for (size_t i = 1; i < 40; i++)
                ids[i] = start("run", "stream", json_pack("{s:s, s:s}", "code", "n += 1\nn", "context", ctx));
        for (size_t i = 0; i < 40; i++) {
                WorkerFrame f = {};
                json_t *items = json_array();

                for (;;) {
                        assert_int_equal(worker_harness_read_for(worker, ids[i], TIMEOUT_MS, &f), 0);
                        if (f.kind != FRAME_ITEM)
                                break;
                        json_array_append_new(items, json_loads(f.value_json, 0, NULL));
                        worker_frame_done(&f);
                }
                if (f.kind == FRAME_ERROR) {
                        assert_string_equal(f.error_type, "ContextBusy");
                        busy++;
                } else {
                        long n = strtol(main_text(items), NULL, 10);

                        assert_int_equal(f.kind, FRAME_END);
                        assert_true(n >= 1 && n <= 40);
                        assert_false(seen[n]);
                        seen[n] = true;
                        ok++;
                }
                worker_frame_done(&f);
                json_decref(items);
        }
        assert_int_equal(ok, 33);
        assert_int_equal(busy, 7);
        for (unsigned n = 1; n <= 33; n++)
                assert_true(seen[n]);
        json_decref(unary("delete_context", json_pack("{s:s}", "id", ctx)));
}

static void test_output_is_capped(void **state) {
        json_t *items, *last;
        _cleanup_free_ char *out = NULL;

        items = collect(start("run", "stream", json_pack("{s:s, s:i}", "code", "print('x' * 20_000_000)", "max_output",
                                                         1024 * 1024)));
        out = all_text(items, "stdout");
        assert_int_equal(strlen(out), 1024 * 1024);
        last = json_array_get(items, json_array_size(items) - 1);
        assert_true(json_is_true(json_object_get(last, "truncated")));
        json_decref(items);
        /* The context is fine afterwards. */
        items = run_in(NULL, "21 * 2", 0);
        assert_string_equal(main_text(items), "42");
        json_decref(items);
}

/* code::run with max_output an int packed as msgpack packs it (JSON cannot say 2^64-1). */
static const char *start_run_max_output(const char *code, bool negative, uint64_t value) {
        static char ids[16][16];
        char *id = ids[counter % 16];
        msgpack_sbuffer sb;
        msgpack_packer pk;

        snprintf(id, 16, "c%u", ++counter);
        msgpack_sbuffer_init(&sb);
        msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
        msgpack_pack_map(&pk, 2);
        mp_pack_cstr(&pk, "code");
        mp_pack_cstr(&pk, code);
        mp_pack_cstr(&pk, "max_output");
        if (negative)
                msgpack_pack_int64(&pk, (int64_t) value);
        else
                msgpack_pack_uint64(&pk, value);
        assert_int_equal(worker_harness_call_mp(worker, id, "code::run", "stream", NULL, 0, sb.data, sb.size, -1), 0);
        msgpack_sbuffer_destroy(&sb);
        return id;
}

/* max_output beyond int64 used to be read as a negative int64 that passed the upper bound and
 * became a cap of 2^63 or SIZE_MAX: no cap. Each is refused, naming the argument. */
static void test_max_output_out_of_range(void **state) {
        static const struct {
                bool negative;
                uint64_t value;
        } bad[] = {
                { false, UINT64_MAX },
                { false, 1ULL << 63 },
                { false, 256u * 1024 * 1024 + 1 },
                { true, (uint64_t) -1 },
                { true, (uint64_t) INT64_MIN },
        };
        _cleanup_free_ char *out = NULL;
        json_t *items;

        for (size_t i = 0; i < ELEMENTSOF(bad); i++)
                expect_error(start_run_max_output("print('x' * 300)", bad[i].negative, bad[i].value), "ArgumentError",
                             "max_output");
        items = collect(start_run_max_output("print('x' * 300)", false, 10));
        out = all_text(items, "stdout");
        assert_string_equal(out, "xxxxxxxxxx");
        json_decref(items);
}

/* Errors are what the kernel (user code) says they are: a 5 MB exception message, and errors
 * published without end, used to go out whole and uncounted past max_output. */
static void test_errors_are_bounded(void **state) {
        json_t *items, *it;
        size_t i, errors = 0;

        items = collect(start("run", "stream", json_pack("{s:s, s:i}", "code", "raise ValueError('v' * 5_000_000)",
                                                         "max_output", 1000)));
        json_array_foreach(items, i, it)
                if (streq(json_string_value(json_object_get(it, "type")) ?: "", "error")) {
                        errors++;
                        assert_string_equal(json_string_value(json_object_get(it, "name")), "ValueError");
                        assert_true(json_string_length(json_object_get(it, "value")) > 1000);
                        assert_true(json_string_length(json_object_get(it, "value")) <= 64 * 1024);
                        assert_true(json_string_length(json_object_get(it, "traceback")) <= 64 * 1024);
                }
        assert_int_equal(errors, 1);
        json_decref(items);

        items = collect(start("run", "stream", json_pack("{s:s, s:i}", "code",
                                                         "try:\n    1 / 0\nexcept ZeroDivisionError:\n"
                                                         "    for _ in range(200): get_ipython().showtraceback()",
                                                         "max_output", 1000)));
        errors = 0;
        json_array_foreach(items, i, it)
                errors += streq(json_string_value(json_object_get(it, "type")) ?: "", "error");
        assert_true(errors >= 1);
        assert_true(errors <= 8);
        assert_true(json_is_true(json_object_get(json_array_get(items, json_array_size(items) - 1), "truncated")));
        json_decref(items);
}

static void test_bad_input(void **state) {
        expect_error(start("run", "stream", json_pack("{s:s, s:s}", "code", "1", "context", "nope")), "ContextNotFound",
                     "nope");
        expect_error(start("interrupt", "unary", json_pack("{s:s}", "context", "nope")), "ContextNotFound", NULL);
        expect_error(start("restart", "unary", json_pack("{s:s}", "context", "nope")), "ContextNotFound", NULL);
        expect_error(start("delete_context", "unary", json_pack("{s:s}", "id", "nope")), "ContextNotFound", NULL);
        expect_error(start("run", "stream", json_pack("{s:i}", "code", 5)), "ArgumentError", "code");
        expect_error(start("create_context", "unary", json_pack("{s:s}", "language", "cobol")), "KernelNotFound",
                     "python3 (python)");
        expect_error(start("run", "stream", json_pack("{s:s, s:s}", "code", "1", "language", "cobol")), "KernelNotFound",
                     "cobol");
        expect_error(start("run", "stream", json_pack("{s:s, s:s, s:s}", "code", "1", "language", "python", "context",
                                                      "default-python3")),
                     "ValueError", "not both");
        expect_error(start("create_context", "unary", json_pack("{s:s}", "cwd", "/nonexistent")), "FileNotFoundError",
                     NULL);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_state_and_streams),
                cmocka_unit_test(test_rich_results),
                cmocka_unit_test(test_interrupt_timeout_and_death),
                cmocka_unit_test(test_contexts_are_separate),
                cmocka_unit_test(test_env_for_one_run),
                cmocka_unit_test(test_queue_is_bounded_and_serial),
                cmocka_unit_test(test_output_is_capped),
                cmocka_unit_test(test_bad_input),
                cmocka_unit_test(test_max_output_out_of_range),
                cmocka_unit_test(test_errors_are_bounded),
        };
        KernelSpecs specs = {};
        bool have;

        if (kernelspecs_find(NULL, &specs) < 0)
                return 1;
        have = kernelspecs_pick(&specs, "python3") != NULL;
        kernelspecs_done(&specs);
        if (!have) {
                fprintf(stderr, "no python3 kernelspec (apt-get install python3-ipykernel): skipped\n");
                return 77;
        }
        return cmocka_run_group_tests(tests, setup, teardown) || teardown_failed;
}

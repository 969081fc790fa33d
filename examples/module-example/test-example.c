/* SPDX-License-Identifier: MIT */
/* example.so in a real worker (forked by the worker harness, spoken to in frames): each
 * function of the example through resolve, binding, the real call API and the terminal frame,
 * once without and once with the default seccomp profile; and the built-in modules' tables
 * passing the loader's checks. Argument: the path of example.so. */

#include <errno.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "macro.h"
#include "worker-harness.h"

#define TIMEOUT_MS 10000

#define check(expr)                                                                     \
        do {                                                                            \
                if (!(expr)) {                                                          \
                        fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #expr); \
                        abort();                                                        \
                }                                                                       \
        } while (0)

static unsigned next_id;

static char *new_id(char buf[static 16]) {
        snprintf(buf, 16, "c%u", ++next_id);
        return buf;
}

static void unary(WorkerHarness *h, const char *callable, const char *args, const char *kwargs, const char *expected) {
        _cleanup_(worker_frame_done) WorkerFrame f = {};
        char id[16];

        check(worker_harness_call(h, new_id(id), callable, "unary", args, kwargs, -1) == 0);
        check(worker_harness_read_for(h, id, TIMEOUT_MS, &f) == 0);
        if (f.kind != FRAME_RESULT || !streq(f.value_json, expected)) {
                fprintf(stderr, "%s %s: got '%c' %s %s: %s, expected %s\n", callable, strna(args), f.kind,
                        strna(f.value_json), strna(f.error_type), strna(f.error_message), expected);
                abort();
        }
}

/* Collect a stream or bidi call's items and its terminal frame. */
static void collect(WorkerHarness *h, const char *id, const char *callable, const char *expected_items,
                    const char *expected_error_type, const char *expected_message) {
        _cleanup_(worker_frame_done) WorkerFrame f = {};
        _cleanup_free_ char *items = NULL;

        check(worker_harness_collect(h, id, TIMEOUT_MS, &items, &f) == 0);
        if (!streq(strna(items), expected_items) ||
            (expected_error_type ? f.kind != FRAME_ERROR || !streq(f.error_type, expected_error_type) ||
                                           !strstr(f.error_message, expected_message)
                                 : f.kind != FRAME_END)) {
                fprintf(stderr, "%s: items %s, terminal '%c' %s: %s\n", callable, strna(items), f.kind,
                        strna(f.error_type), strna(f.error_message));
                abort();
        }
}

static void fails(WorkerHarness *h, const char *callable, const char *shape, const char *args, const char *type,
                  const char *message) {
        char id[16];

        check(worker_harness_call(h, new_id(id), callable, shape, args, NULL, -1) == 0);
        collect(h, id, callable, "[]", type, message);
}

static void run_example(const char *module_dir, bool seccomp) {
        _cleanup_(worker_harness_freep) WorkerHarness *h = NULL;
        char id[16];
        int status;

        check(worker_harness_start(&(WorkerOptions) { .module_dir = module_dir, .no_seccomp = !seccomp }, &h) == 0);
        check(worker_harness_wait_ready(h, TIMEOUT_MS) == 0);

        /* unary */
        unary(h, "example::add", "[2]", NULL, "3");
        unary(h, "example::add", "[2]", "{\"b\": 40}", "42");
        unary(h, "example::add", NULL, "{\"b\": -7, \"a\": 2}", "-5");
        fails(h, "example::add", "unary", "[9223372036854775807]", "OverflowError", "does not fit");
        fails(h, "example::add", "unary", "[\"2\"]", "ArgumentError", "add() argument 'a': expected int, got str");
        fails(h, "example::add", "unary", "[1, 2, 3]", "ArgumentError", "add() takes 2 positional arguments but 3 were given");
        unary(h, "example::greet", "[\"Ada\"]", NULL, "\"Hello, Ada!\"");
        {
                /* A str with a NUL inside, which JSON text cannot carry: packed by hand. */
                msgpack_sbuffer sb;
                msgpack_packer pk;

                msgpack_sbuffer_init(&sb);
                msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
                check(msgpack_pack_array(&pk, 1) == 0);
                check(msgpack_pack_str_with_body(&pk, "a\0b", 3) == 0);
                check(worker_harness_call_mp(h, new_id(id), "example::greet", "unary", sb.data, sb.size, NULL, 0, -1) == 0);
                msgpack_sbuffer_destroy(&sb);
                collect(h, id, "example::greet", "[]", "ValueError", "name must not contain NUL bytes");
        }

        /* stream */
        check(worker_harness_call(h, new_id(id), "example::count", "stream", "[3]", "{\"start\": 5}", -1) == 0);
        collect(h, id, "example::count", "[5,6,7]", NULL, NULL);
        check(worker_harness_call(h, new_id(id), "example::count", "stream", "[0]", NULL, -1) == 0);
        collect(h, id, "example::count", "[]", NULL, NULL);
        fails(h, "example::count", "stream", "[-1]", "ValueError", "n must be >= 0, got -1");

        /* Cancelling a long stream: the function sees -ECANCELED from item_end() and stops. */
        check(worker_harness_call(h, new_id(id), "example::count", "stream", "[1000000000000]", NULL, -1) == 0);
        {
                _cleanup_(worker_frame_done) WorkerFrame f = {};
                check(worker_harness_read_for(h, id, TIMEOUT_MS, &f) == 0);
                check(f.kind == FRAME_ITEM && streq(f.value_json, "0"));
        }
        check(worker_harness_cancel(h, id, NULL) == 0);
        for (;;) {
                _cleanup_(worker_frame_done) WorkerFrame f = {};
                check(worker_harness_read_for(h, id, TIMEOUT_MS, &f) == 0);
                if (f.kind == FRAME_ITEM)
                        continue;
                check(f.kind == FRAME_ERROR && streq(f.error_type, "Cancelled") && f.cancelled);
                break;
        }

        /* bidi */
        check(worker_harness_call(h, new_id(id), "example::upper", "bidi", NULL, NULL, -1) == 0);
        check(worker_harness_send_in(h, id, "\"abc\"") == 0);
        check(worker_harness_send_in(h, id, "\"Hi there!\"") == 0);
        check(worker_harness_send_in(h, id, "\"\"") == 0);
        check(worker_harness_end_in(h, id) == 0);
        collect(h, id, "example::upper", "[\"ABC\",\"HI THERE!\",\"\"]", NULL, NULL);

        check(worker_harness_call(h, new_id(id), "example::upper", "bidi", NULL, NULL, -1) == 0);
        check(worker_harness_send_in(h, id, "\"ok\"") == 0);
        check(worker_harness_send_in(h, id, "1") == 0);
        collect(h, id, "example::upper", "[\"OK\"]", "TypeError", "upper() takes str items");

        /* An item longer than the function's 256-byte chunk. */
        char in[1100] = "\"", expected[1100] = "[\"";
        for (size_t i = 0; i < 1000; i++) {
                in[1 + i] = (char) ('a' + i % 26);
                expected[2 + i] = (char) ('A' + i % 26);
        }
        strcpy(in + 1001, "\"");
        strcpy(expected + 1002, "\"]");
        check(worker_harness_call(h, new_id(id), "example::upper", "bidi", NULL, NULL, -1) == 0);
        check(worker_harness_send_in(h, id, in) == 0);
        check(worker_harness_end_in(h, id) == 0);
        collect(h, id, "example::upper", expected, NULL, NULL);

        /* The registry's answers, as a caller sees them. */
        fails(h, "example::add", "stream", NULL, "BadRequest", "example::add cannot be called as stream (it is unary)");
        fails(h, "example::nope", "unary", NULL, "NoSuchCallable", "module 'example' has no function 'nope'");
        fails(h, "../example::add", "unary", NULL, "BadRequest", "malformed callable");

        /* The worker's real built-in tables load too (every signature parses): a missing
         * function is reported as missing, not as "module 'fs' failed to load". */
        fails(h, "fs::no_such_function", "unary", NULL, "NoSuchCallable", "module 'fs' has no function 'no_such_function'");
        fails(h, "sandbox::no_such_function", "unary", NULL, "NoSuchCallable",
              "module 'sandbox' has no function 'no_such_function'");

        check(worker_harness_shutdown(h, TIMEOUT_MS, &status) == 0);
        check(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

int main(int argc, char *argv[]) {
        _cleanup_free_ char *copy = NULL;
        const char *dir;

        check(argc == 2);
        copy = strdup(argv[1]);
        check(copy);
        dir = dirname(copy);

        run_example(dir, false);
        run_example(dir, true);
        printf("test-example-module: all passed\n");
        return 0;
}

/* SPDX-License-Identifier: MIT */
/* End-to-end tests of the worker: a real worker process (forked by the harness) running
 * tests/modules/testmod.so, spoken to in frames. Most tests run the worker without seccomp so
 * that LeakSanitizer can check it at exit (stop() asserts a clean exit); the confinement tests
 * run it with the built-in profile. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include "envelope.h"
#include "frame.h"
#include "macro.h"
#include "worker-harness.h"

#define TIMEOUT_MS 10000

/* Workers of the running test, freed by teardown() even when an assertion fails (cmocka
 * longjmp()s past the test's own cleanup, and the next worker would inherit the leak). */
static WorkerHarness *live[8];

static void release(WorkerHarness *h) {
        for (size_t i = 0; i < ELEMENTSOF(live); i++)
                if (live[i] == h)
                        live[i] = NULL;
        worker_harness_free(h);
}

static int teardown(void **state) {
        for (size_t i = 0; i < ELEMENTSOF(live); i++)
                live[i] = worker_harness_free(live[i]);
        return 0;
}

static WorkerHarness *start_full(const WorkerOptions *o, void (*setup)(void *), void *userdata) {
        WorkerOptions opts = o ? *o : (WorkerOptions) { .no_seccomp = true };
        WorkerHarness *h = NULL;
        size_t i;

        if (!opts.module_dir)
                opts.module_dir = TESTMOD_DIR;
        for (i = 0; i < ELEMENTSOF(live) && live[i]; i++)
                ;
        assert_true(i < ELEMENTSOF(live));
        assert_int_equal(worker_harness_start_full(&opts, setup, userdata, &h), 0);
        live[i] = h;
        assert_int_equal(worker_harness_wait_ready(h, TIMEOUT_MS), 0);
        return h;
}

static WorkerHarness *start(const WorkerOptions *o) {
        return start_full(o, NULL, NULL);
}

/* Shut the worker down and check it exits cleanly (without seccomp LeakSanitizer runs at
 * exit, and a leak makes the exit status non-zero). */
static void stop(WorkerHarness *h) {
        int status;

        assert_int_equal(worker_harness_shutdown(h, TIMEOUT_MS, &status), 0);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
                fail_msg("worker exit status 0x%x", status);
        release(h);
}

static void read_terminal(WorkerHarness *h, const char *id, WorkerFrame *f) {
        assert_int_equal(worker_harness_read_for(h, id, TIMEOUT_MS, f), 0);
}

/* Call, expect RESULT, compare its value's JSON. */
static void expect_unary(WorkerHarness *h, const char *id, const char *callable, const char *args,
                         const char *kwargs, const char *expected_json) {
        WorkerFrame f = {};

        assert_int_equal(worker_harness_call(h, id, callable, "unary", args, kwargs, -1), 0);
        read_terminal(h, id, &f);
        if (f.kind != FRAME_RESULT)
                fail_msg("%s: expected RESULT, got '%c' %s: %s", id, f.kind, strna(f.error_type), strna(f.error_message));
        if (expected_json)
                assert_string_equal(f.value_json, expected_json);
        worker_frame_done(&f);
}

/* The RESULT of a call already made. */
static void expect_unary_result_of(WorkerHarness *h, const char *id, const char *expected_json) {
        WorkerFrame f = {};

        read_terminal(h, id, &f);
        if (f.kind != FRAME_RESULT)
                fail_msg("%s: expected RESULT, got '%c' %s: %s", id, f.kind, strna(f.error_type), strna(f.error_message));
        assert_string_equal(f.value_json, expected_json);
        worker_frame_done(&f);
}

static void expect_error(WorkerHarness *h, const char *id, const char *type, const char *message_part,
                         bool cancelled) {
        WorkerFrame f = {};

        read_terminal(h, id, &f);
        if (f.kind != FRAME_ERROR)
                fail_msg("%s: expected ERROR %s, got '%c' %s", id, type, f.kind, strna(f.value_json));
        if (!streq(f.error_type, type))
                fail_msg("%s: expected %s, got %s: %s", id, type, f.error_type, strna(f.error_message));
        if (message_part && !strstr(f.error_message, message_part))
                fail_msg("%s: message \"%s\" lacks \"%s\"", id, f.error_message, message_part);
        assert_int_equal(f.cancelled, cancelled);
        /* The error map has exactly the documented fields. */
        assert_non_null(mp_map_get(f.error, "traceback"));
        assert_int_equal(f.root.via.map.size, 2);
        worker_frame_done(&f);
}

static void call_error(WorkerHarness *h, const char *id, const char *callable, const char *shape,
                       const char *args, const char *kwargs, const char *type, const char *message_part) {
        assert_int_equal(worker_harness_call(h, id, callable, shape, args, kwargs, -1), 0);
        expect_error(h, id, type, message_part, false);
}

/* No frame arrives within `ms`. */
static void expect_silence(WorkerHarness *h, int ms) {
        WorkerFrame f = {};
        int r = worker_harness_read(h, ms, &f);

        if (r != -ETIMEDOUT)
                fail_msg("unexpected frame '%c' for %s", f.kind, strna(f.call_id));
}

/* ---- values --------------------------------------------------------------------------------- */

static void test_echo_json(void **state) {
        WorkerHarness *h = start(NULL);

        expect_unary(h, "e1", "testmod::echo", "[42]", NULL, "42");
        expect_unary(h, "e2", "testmod::echo", NULL, "{\"value\": \"hi\"}", "\"hi\"");
        expect_unary(h, "e3", "testmod::echo", "[{\"a\": [1, 2.5, null, true, false, \"\"]}]", NULL,
                     "{\"a\":[1,2.5,null,true,false,\"\"]}");
        expect_unary(h, "e4", "testmod::echo", "[{\"$bin\": \"raw\"}]", NULL, "{\"$bin\":\"raw\"}");
        stop(h);
}

/* Every msgpack type, packed raw, must come back identical — and the RESULT payload must be
 * exactly {call_id, value}, which the server forwards verbatim. */
/* AGENTIX_FUNCTION_INLINE runs a unary function on the reader thread, others on call threads. */
static void test_inline_functions(void **state) {
        WorkerHarness *h = start(&(WorkerOptions) { .no_seccomp = true });

        expect_unary(h, "inline", "testmod::inline_thread", "[]", NULL, "true");
        expect_unary(h, "pool", "testmod::pool_thread", "[]", NULL, "false");
        expect_unary(h, "echo", "sandbox::echo", "[\"x\"]", NULL, "\"x\"");
        expect_unary(h, "echo-default", "sandbox::echo", "[]", NULL, "null");
        stop(h);
}

/* AGENTIX_FUNCTION_ORDERED: calls sent back to back take their places in the order sent,
 * though each runs on a thread of its own (threads are made on demand here: 4 idle, 64 calls)
 * and they still run at once. */
static void test_ordered_functions(void **state) {
        WorkerHarness *h = start(&(WorkerOptions) { .no_seccomp = true });
        enum { N = 64 };
        char id[16], expected[16];

        for (int i = 0; i < N; i++) {
                snprintf(id, sizeof(id), "a%d", i);
                assert_int_equal(worker_harness_call(h, id, "testmod::arrive", "unary", "[20]", NULL, -1), 0);
        }
        for (int i = 0; i < N; i++) {
                snprintf(id, sizeof(id), "a%d", i);
                snprintf(expected, sizeof(expected), "%d", i);
                expect_unary_result_of(h, id, expected);
        }
        {
                WorkerFrame f = {};

                assert_int_equal(worker_harness_call(h, "peak", "testmod::arrival_peak", "unary", "[]", NULL, -1), 0);
                read_terminal(h, "peak", &f);
                assert_int_equal(f.kind, FRAME_RESULT);
                if (atoi(f.value_json) < 2)
                        fail_msg("ordered calls never ran at once (peak %s)", f.value_json);
                worker_frame_done(&f);
        }
        stop(h);
}

static void test_echo_every_type(void **state) {
        WorkerHarness *h = start(NULL);
        _cleanup_buffer_ Buffer args = {};
        msgpack_packer pk;
        msgpack_zone zone;
        msgpack_object sent;
        WorkerFrame f = {};
        size_t off = 0;
        static const char bin_small[] = { 0, 1, 2, (char) 0xff };
        char *big;

        mp_packer_init_buffer(&pk, &args);
        msgpack_pack_array(&pk, 1);   /* args */
        msgpack_pack_array(&pk, 20);  /* the value */
        msgpack_pack_nil(&pk);
        msgpack_pack_true(&pk);
        msgpack_pack_false(&pk);
        msgpack_pack_uint64(&pk, 0);
        msgpack_pack_uint64(&pk, UINT64_MAX);
        msgpack_pack_int64(&pk, -1);
        msgpack_pack_int64(&pk, INT64_MIN);
        msgpack_pack_float(&pk, 1.5f);
        msgpack_pack_double(&pk, -0.1);
        mp_pack_cstr(&pk, "");
        mp_pack_cstr(&pk, "grüße, 世界");
        msgpack_pack_bin(&pk, sizeof(bin_small));
        msgpack_pack_bin_body(&pk, bin_small, sizeof(bin_small));
        msgpack_pack_bin(&pk, 0);
        msgpack_pack_array(&pk, 0);
        msgpack_pack_map(&pk, 0);
        msgpack_pack_map(&pk, 2);     /* non-string keys */
        msgpack_pack_int(&pk, 1);
        msgpack_pack_array(&pk, 1);
        msgpack_pack_map(&pk, 1);
        mp_pack_cstr(&pk, "deep");
        msgpack_pack_nil(&pk);
        msgpack_pack_nil(&pk);
        mp_pack_cstr(&pk, "x");
        msgpack_pack_ext(&pk, 4, 7);
        msgpack_pack_ext_body(&pk, "abcd", 4);
        /* 1 MiB bin */
        big = malloc(1024 * 1024);
        assert_non_null(big);
        for (size_t i = 0; i < 1024 * 1024; i++)
                big[i] = (char) (i * 7);
        msgpack_pack_bin(&pk, 1024 * 1024);
        msgpack_pack_bin_body(&pk, big, 1024 * 1024);
        free(big);
        /* str of 70000 bytes (str32) */
        msgpack_pack_str(&pk, 70000);
        assert_int_equal(buffer_reserve(&args, 70000), 0);
        memset(buffer_data(&args) + args.len, 'a', 70000);
        args.len += 70000;
        msgpack_pack_array(&pk, 1);
        msgpack_pack_array(&pk, 1);
        msgpack_pack_array(&pk, 0);

        msgpack_zone_init(&zone, 1024);
        assert_int_equal(msgpack_unpack((const char *) buffer_data(&args), args.len, &off, &zone, &sent),
                         MSGPACK_UNPACK_SUCCESS);

        assert_int_equal(worker_harness_call_mp(h, "every", "testmod::echo", "unary", buffer_data(&args), args.len,
                                                NULL, 0, -1), 0);
        read_terminal(h, "every", &f);
        assert_int_equal(f.kind, FRAME_RESULT);
        assert_true(msgpack_object_equal(*f.value, sent.via.array.ptr[0]));
        assert_int_equal(f.root.via.map.size, 2);
        assert_true(mp_str_eq(&f.root.via.map.ptr[0].key, "call_id"));
        assert_true(mp_str_eq(&f.root.via.map.ptr[0].val, "every"));
        assert_true(mp_str_eq(&f.root.via.map.ptr[1].key, "value"));
        worker_frame_done(&f);
        msgpack_zone_destroy(&zone);
        stop(h);
}

static void test_bin_from_fd(void **state) {
        WorkerHarness *h = start(NULL);
        char path[] = "/tmp/test-worker-bin-XXXXXX", args[256];
        WorkerFrame f = {};
        size_t size = 3 * 1024 * 1024 + 17;
        uint8_t *data = malloc(size);
        int fd;

        assert_non_null(data);
        for (size_t i = 0; i < size; i++)
                data[i] = (uint8_t) (i * 13 + 5);
        fd = mkstemp(path);
        assert_true(fd >= 0);
        assert_int_equal(loop_write(fd, data, size), 0);
        close(fd);

        snprintf(args, sizeof(args), "[\"%s\", %zu]", path, size);
        assert_int_equal(worker_harness_call(h, "bin", "testmod::bin_from_file", "unary", args, NULL, -1), 0);
        read_terminal(h, "bin", &f);
        assert_int_equal(f.kind, FRAME_RESULT);
        assert_int_equal(f.value->type, MSGPACK_OBJECT_BIN);
        assert_int_equal(f.value->via.bin.size, size);
        assert_memory_equal(f.value->via.bin.ptr, data, size);
        worker_frame_done(&f);

        /* The file is shorter than asked: EIO, not a truncated frame. */
        snprintf(args, sizeof(args), "[\"%s\", %zu]", path, size + 1);
        call_error(h, "short", "testmod::bin_from_file", "unary", args, NULL, "OSError", "Input/output error");
        expect_unary(h, "after", "testmod::echo", "[1]", NULL, "1");

        /* A function that keeps going after -EIO still sends a well-formed bin: the bytes the
         * file had, then zeros up to the announced size (what fs::download relies on). */
        snprintf(args, sizeof(args), "[\"%s\", %zu, true]", path, size + 4096);
        assert_int_equal(worker_harness_call(h, "padded", "testmod::bin_from_file", "unary", args, NULL, -1), 0);
        read_terminal(h, "padded", &f);
        assert_int_equal(f.kind, FRAME_RESULT);
        assert_int_equal(f.value->type, MSGPACK_OBJECT_BIN);
        assert_int_equal(f.value->via.bin.size, size + 4096);
        assert_memory_equal(f.value->via.bin.ptr, data, size);
        for (size_t i = size; i < size + 4096; i++)
                assert_int_equal((uint8_t) f.value->via.bin.ptr[i], 0);
        worker_frame_done(&f);

        unlink(path);
        free(data);
        stop(h);
}

static void test_result_too_large(void **state) {
        WorkerHarness *h = start(&(WorkerOptions) { .no_seccomp = true, .max_frame = 64 * 1024 });
        char path[] = "/tmp/test-worker-big-XXXXXX", args[256];
        static char block[100 * 1024];
        int fd;

        fd = mkstemp(path);
        assert_true(fd >= 0);
        assert_int_equal(loop_write(fd, block, sizeof(block)), 0);
        close(fd);

        snprintf(args, sizeof(args), "[\"%s\", %zu]", path, sizeof(block));
        call_error(h, "big", "testmod::bin_from_file", "unary", args, NULL, RPC_ERR_TOO_LARGE, "frame limit");
        unlink(path);
        expect_unary(h, "small", "testmod::echo", "[\"fine\"]", NULL, "\"fine\"");
        stop(h);
}

/* ---- shapes --------------------------------------------------------------------------------- */

static void test_stream(void **state) {
        WorkerHarness *h = start(NULL);
        _cleanup_free_ char *items = NULL, *none = NULL;
        WorkerFrame f = {};

        assert_int_equal(worker_harness_call(h, "s1", "testmod::count", "stream", "[5]", NULL, -1), 0);
        assert_int_equal(worker_harness_collect(h, "s1", TIMEOUT_MS, &items, &f), 0);
        assert_string_equal(items, "[0,1,2,3,4]");
        assert_int_equal(f.kind, FRAME_END);
        assert_int_equal(f.root.via.map.size, 1); /* END is exactly {call_id} */
        worker_frame_done(&f);

        assert_int_equal(worker_harness_call(h, "s0", "testmod::count", "stream", "[0]", NULL, -1), 0);
        assert_int_equal(worker_harness_collect(h, "s0", TIMEOUT_MS, &none, &f), 0);
        assert_string_equal(none, "[]");
        assert_int_equal(f.kind, FRAME_END);
        worker_frame_done(&f);

        call_error(h, "neg", "testmod::count", "stream", "[-1]", NULL, "ValueError", "n must be >= 0, got -1");
        stop(h);
}

static void test_bidi(void **state) {
        WorkerHarness *h = start(NULL);
        _cleanup_free_ char *items = NULL;
        WorkerFrame f = {};

        assert_int_equal(worker_harness_call(h, "b1", "testmod::upper", "bidi", NULL, NULL, -1), 0);
        assert_int_equal(worker_harness_send_in(h, "b1", "\"abc\""), 0);
        assert_int_equal(worker_harness_send_in(h, "b1", "\"Hello, World\""), 0);
        /* The items come back while the inbox is still open. */
        assert_int_equal(worker_harness_read_for(h, "b1", TIMEOUT_MS, &f), 0);
        assert_int_equal(f.kind, FRAME_ITEM);
        assert_string_equal(f.value_json, "\"ABC\"");
        worker_frame_done(&f);
        assert_int_equal(worker_harness_send_in(h, "b1", "\"x\""), 0);
        assert_int_equal(worker_harness_end_in(h, "b1"), 0);
        /* After END_IN, further items are dropped. */
        assert_int_equal(worker_harness_send_in(h, "b1", "\"late\""), 0);
        assert_int_equal(worker_harness_collect(h, "b1", TIMEOUT_MS, &items, &f), 0);
        assert_string_equal(items, "[\"HELLO, WORLD\",\"X\"]");
        assert_int_equal(f.kind, FRAME_END);
        worker_frame_done(&f);

        /* A non-str item makes the function raise. */
        assert_int_equal(worker_harness_call(h, "b2", "testmod::upper", "bidi", NULL, NULL, -1), 0);
        assert_int_equal(worker_harness_send_in(h, "b2", "1"), 0);
        expect_error(h, "b2", "TypeError", "must be str", false);

        /* IN/END_IN for calls that do not exist (or are over) are ignored. */
        assert_int_equal(worker_harness_send_in(h, "nope", "\"x\""), 0);
        assert_int_equal(worker_harness_end_in(h, "nope"), 0);
        assert_int_equal(worker_harness_cancel(h, "nope", NULL), 0);
        expect_silence(h, 100);
        stop(h);
}

static void test_inbox_overflow(void **state) {
        WorkerHarness *h = start(NULL);

        assert_int_equal(worker_harness_call(h, "ov", "testmod::inbox_hold", "bidi", NULL, NULL, -1), 0);
        for (int i = 0; i < 200; i++)
                assert_int_equal(worker_harness_send_in(h, "ov", "\"item\""), 0);
        expect_error(h, "ov", "InboxOverflow", "more than 64 items", false);
        expect_unary(h, "after", "testmod::echo", "[1]", NULL, "1");
        stop(h);
}

/* Flow control: the next frame of `id` is IN_TAKEN with this count. */
static void expect_taken(WorkerHarness *h, const char *id, int64_t count) {
        WorkerFrame f = {};
        int64_t n;

        read_terminal(h, id, &f);
        if (f.kind != FRAME_IN_TAKEN)
                fail_msg("%s: expected IN_TAKEN %" PRIi64 ", got '%c' %s", id, count, f.kind, strna(f.value_json));
        assert_int_equal(mp_map_get_int(&f.root, "count", &n), 0);
        assert_int_equal(n, count);
        worker_frame_done(&f);
}

static char *tally_json(unsigned n, const char *item) {
        uint64_t fnv = 0xcbf29ce484222325ULL;
        char *s;

        for (unsigned i = 0; i < n; i++)
                for (const char *p = item; *p; p++)
                        fnv = (fnv ^ (uint8_t) *p) * 0x100000001b3ULL;
        assert_true(asprintf(&s, "[{\"items\":%u,\"bytes\":%zu,\"fnv\":\"%016" PRIx64 "\"}]", n, n * strlen(item),
                             fnv) > 0);
        return s;
}

/* With in_ack: true the worker reports the inbox items the function takes (IN_TAKEN {call_id,
 * count}): in batches of INBOX_TAKEN_REPORT_ITEMS while it works through a full inbox, the
 * rest as soon as it has caught up, never one frame per item in a burst. */
static void test_inbox_taken(void **state) {
        _cleanup_free_ char *items = NULL, *expected = NULL;
        WorkerHarness *h = start(NULL);
        WorkerFrame f = {};
        int64_t sum = 0;

        /* tally() reads nothing for 300 ms: 40 items queue up, then it takes them in one go. */
        assert_int_equal(worker_harness_call_in_ack(h, "t1", "testmod::tally", "[300]", NULL), 0);
        for (int i = 0; i < 40; i++)
                assert_int_equal(worker_harness_send_in(h, "t1", "\"ab\""), 0);
        expect_taken(h, "t1", 16);
        expect_taken(h, "t1", 16);
        expect_taken(h, "t1", 8);
        /* Caught up: an item now is reported as soon as the function waits again. */
        assert_int_equal(worker_harness_send_in(h, "t1", "\"ab\""), 0);
        expect_taken(h, "t1", 1);
        /* A closed inbox needs no credit: the end comes without another report (collect()
         * fails on any frame that is neither ITEM nor terminal). */
        assert_int_equal(worker_harness_end_in(h, "t1"), 0);
        assert_int_equal(worker_harness_collect(h, "t1", TIMEOUT_MS, &items, &f), 0);
        assert_int_equal(f.kind, FRAME_END);
        worker_frame_done(&f);
        expected = tally_json(41, "ab");
        assert_string_equal(items, expected);
        free(items);
        items = NULL;

        /* A function that polls its wait fd and finds the inbox empty (-ETIMEDOUT) reports too:
         * every item is accounted for, interleaved with the items it yields. */
        assert_int_equal(worker_harness_call_in_ack(h, "t2", "testmod::upper", NULL, NULL), 0);
        for (int i = 0; i < 5; i++)
                assert_int_equal(worker_harness_send_in(h, "t2", "\"x\""), 0);
        for (unsigned n_items = 0; sum < 5 || n_items < 5;) {
                int64_t n;

                read_terminal(h, "t2", &f);
                if (f.kind == FRAME_ITEM)
                        n_items++;
                else {
                        assert_int_equal(f.kind, FRAME_IN_TAKEN);
                        assert_int_equal(mp_map_get_int(&f.root, "count", &n), 0);
                        assert_true(n >= 1);
                        sum += n;
                }
                worker_frame_done(&f);
        }
        assert_int_equal(sum, 5);
        assert_int_equal(worker_harness_end_in(h, "t2"), 0);
        assert_int_equal(worker_harness_collect(h, "t2", TIMEOUT_MS, NULL, &f), 0);
        assert_int_equal(f.kind, FRAME_END);
        worker_frame_done(&f);

        /* Without in_ack (older clients) the worker sends no IN_TAKEN at all. */
        assert_int_equal(worker_harness_call(h, "t3", "testmod::tally", "bidi", "[100]", NULL, -1), 0);
        for (int i = 0; i < 40; i++)
                assert_int_equal(worker_harness_send_in(h, "t3", "\"ab\""), 0);
        assert_int_equal(worker_harness_end_in(h, "t3"), 0);
        assert_int_equal(worker_harness_collect(h, "t3", TIMEOUT_MS, &items, &f), 0);
        assert_int_equal(f.kind, FRAME_END);
        worker_frame_done(&f);
        free(expected);
        expected = tally_json(40, "ab");
        assert_string_equal(items, expected);

        /* in_ack must be a bool. */
        {
                _cleanup_buffer_ Buffer b = {};
                msgpack_packer pk;

                mp_packer_init_buffer(&pk, &b);
                msgpack_pack_map(&pk, 4);
                mp_pack_cstr(&pk, "call_id");
                mp_pack_cstr(&pk, "t4");
                mp_pack_cstr(&pk, "callable");
                mp_pack_cstr(&pk, "testmod::tally");
                mp_pack_cstr(&pk, "shape");
                mp_pack_cstr(&pk, "bidi");
                mp_pack_cstr(&pk, "in_ack");
                msgpack_pack_int(&pk, 1);
                assert_int_equal(worker_harness_send_raw(h, FRAME_CALL, buffer_data(&b), b.len), 0);
                expect_error(h, "t4", RPC_ERR_BAD_REQUEST, "in_ack", false);
        }
        stop(h);
}

/* ---- output flow control ------------------------------------------------------------------- */

/* Read the ITEM frames of `id` that come until none has for `quiet_ms`: their payload bytes
 * (what the worker counts against the window). */
static uint64_t drain_items(WorkerHarness *h, const char *id, int quiet_ms, unsigned *ret_n) {
        uint64_t bytes = 0;
        unsigned n = 0;

        for (;;) {
                WorkerFrame f = {};
                int r = worker_harness_read_for(h, id, quiet_ms, &f);

                if (r == -ETIMEDOUT)
                        break;
                assert_int_equal(r, 0);
                if (f.kind != FRAME_ITEM)
                        fail_msg("%s: expected ITEM, got '%c' %s: %s", id, f.kind, strna(f.error_type),
                                 strna(f.error_message));
                bytes += f.size;
                n++;
                worker_frame_done(&f);
        }
        if (ret_n)
                *ret_n = n;
        return bytes;
}

/* Items of 1 MiB: what testmod::bulk(n, 1 MiB) puts in one ITEM payload. */
#define BULK_ITEM (1024u * 1024u)

/* A stream that produces faster than its consumer is held at the window: without OUT_CREDIT
 * the worker sends a window's worth (one item may overshoot) and then nothing; each credit lets
 * that much more through; cancellation and the deadline end a call that waits for credit. */
static void check_window(WorkerHarness *h, const char *id, bool use_poll) {
        _cleanup_free_ char *args = NULL;
        uint64_t got, more, item_payload, total;
        unsigned n, m;
        WorkerFrame f = {};

        assert_true(asprintf(&args, "[64, %u, %s]", BULK_ITEM, use_poll ? "true" : "false") > 0);
        assert_int_equal(worker_harness_call(h, id, "testmod::bulk", "stream", args, NULL, -1), 0);
        got = drain_items(h, id, 500, &n);
        assert_true(n > 0);
        item_payload = got / n;
        assert_true(item_payload > BULK_ITEM && item_payload < BULK_ITEM + 64);
        /* Items go out while less than a window is in flight: the last one crosses it. */
        if (got < FRAME_OUT_WINDOW || got >= FRAME_OUT_WINDOW + item_payload)
                fail_msg("%s: %" PRIu64 " bytes arrived without credit, window %u", id, got, FRAME_OUT_WINDOW);

        /* Credit half of it: about half a window more, then it waits again. */
        assert_int_equal(worker_harness_credit(h, id, got / 2), 0);
        more = drain_items(h, id, 500, &m);
        if (got - got / 2 + more < FRAME_OUT_WINDOW || got - got / 2 + more >= FRAME_OUT_WINDOW + item_payload)
                fail_msg("%s: %" PRIu64 " bytes after a credit of %" PRIu64, id, more, got / 2);

        /* Credit everything from now on: the rest of the 64 MiB flows to the end. */
        assert_int_equal(worker_harness_credit(h, id, got - got / 2 + more), 0);
        worker_harness_set_auto_credit(h, true);
        total = n + m;
        for (;;) {
                read_terminal(h, id, &f);
                if (f.kind != FRAME_ITEM)
                        break;
                total++;
                worker_frame_done(&f);
        }
        assert_int_equal(f.kind, FRAME_END);
        worker_frame_done(&f);
        assert_int_equal(total, 64);
        worker_harness_set_auto_credit(h, false);
}

static void test_output_window(void **state) {
        WorkerHarness *h = start(NULL);
        unsigned long long t0;

        worker_harness_set_auto_credit(h, false);
        /* Blocking in agentix_call_item_end(), and pacing itself with the output fd. */
        check_window(h, "w-block", false);
        check_window(h, "w-poll", true);

        /* Cancelled while it waits for credit: the call ends at once. */
        for (int i = 0; i < 2; i++) {
                const char *id = i == 0 ? "c-block" : "c-poll";

                assert_int_equal(worker_harness_call(h, id, "testmod::bulk", "stream",
                                                     i == 0 ? "[64, 1048576]" : "[64, 1048576, true]", NULL, -1), 0);
                assert_true(drain_items(h, id, 300, NULL) >= FRAME_OUT_WINDOW);
                t0 = now_usec();
                assert_int_equal(worker_harness_cancel(h, id, NULL), 0);
                expect_error(h, id, RPC_ERR_CANCELLED, NULL, true);
                assert_true(now_usec() - t0 < 1000 * 1000);
        }

        /* Its deadline passes while it waits: DeadlineExceeded, on time. */
        t0 = now_usec();
        assert_int_equal(worker_harness_call(h, "d-block", "testmod::bulk", "stream", "[64, 1048576]", NULL, 700), 0);
        assert_true(drain_items(h, "d-block", 200, NULL) >= FRAME_OUT_WINDOW);
        expect_error(h, "d-block", RPC_ERR_DEADLINE, NULL, true);
        assert_true(now_usec() - t0 < 2000 * 1000);

        /* A unary result is not held back by any window. */
        expect_unary(h, "u", "testmod::echo", "[1]", NULL, "1");
        stop(h);
}

/* ---- cancellation and deadlines ------------------------------------------------------------- */

static void test_cancel(void **state) {
        WorkerHarness *h = start(NULL);
        unsigned long long t0;

        assert_int_equal(worker_harness_call(h, "slow", "testmod::sleep", "unary", "[60000]", NULL, -1), 0);
        (void) usleep(50 * 1000);
        t0 = now_usec();
        assert_int_equal(worker_harness_cancel(h, "slow", NULL), 0);
        expect_error(h, "slow", RPC_ERR_CANCELLED, "cancelled", true);
        assert_true(now_usec() - t0 < 2000 * 1000);
        /* Exactly one terminal frame: a second CANCEL produces nothing. */
        assert_int_equal(worker_harness_cancel(h, "slow", NULL), 0);
        expect_silence(h, 100);

        /* A stream cancelled mid-way ends with ERROR too. */
        assert_int_equal(worker_harness_call(h, "s", "testmod::count", "stream", "[100000000]", NULL, -1), 0);
        WorkerFrame f = {};
        assert_int_equal(worker_harness_read_for(h, "s", TIMEOUT_MS, &f), 0);
        assert_int_equal(f.kind, FRAME_ITEM);
        worker_frame_done(&f);
        assert_int_equal(worker_harness_cancel(h, "s", "cancelled"), 0);
        for (;;) {
                assert_int_equal(worker_harness_read_for(h, "s", TIMEOUT_MS, &f), 0);
                if (f.kind != FRAME_ITEM)
                        break;
                worker_frame_done(&f);
        }
        assert_int_equal(f.kind, FRAME_ERROR);
        assert_string_equal(f.error_type, RPC_ERR_CANCELLED);
        assert_true(f.cancelled);
        worker_frame_done(&f);

        /* A CANCEL with reason "deadline" (the server enforcing it) → DeadlineExceeded. */
        assert_int_equal(worker_harness_call(h, "d", "testmod::sleep", "unary", "[60000]", NULL, -1), 0);
        (void) usleep(20 * 1000);
        assert_int_equal(worker_harness_cancel(h, "d", "deadline"), 0);
        expect_error(h, "d", RPC_ERR_DEADLINE, NULL, true);
        stop(h);
}

/* deadline_ms: relative to the worker's receipt of the CALL. When it passes, the function
 * sees agentix_call_cancelled() (and its wait fd turns readable); the call ends with
 * ERROR DeadlineExceeded, cancelled: true — whatever the function returned. */
static void test_deadline(void **state) {
        WorkerHarness *h = start(NULL);
        unsigned long long t0 = now_usec(), dt;
        WorkerFrame f = {};

        assert_int_equal(worker_harness_call(h, "d1", "testmod::sleep", "unary", "[60000]", NULL, 200), 0);
        expect_error(h, "d1", RPC_ERR_DEADLINE, "deadline", true);
        dt = now_usec() - t0;
        assert_true(dt >= 190 * 1000);
        assert_true(dt < 3000 * 1000);

        /* deadline_ms 0 has passed on arrival: the function does not run. */
        assert_int_equal(worker_harness_call(h, "d0", "testmod::echo", "unary", "[1]", NULL, 0), 0);
        expect_error(h, "d0", RPC_ERR_DEADLINE, NULL, true);

        /* A deadline far enough away does not disturb the call, and the function sees it. */
        assert_int_equal(worker_harness_call(h, "d2", "testmod::info", "unary", NULL, NULL, 10000), 0);
        read_terminal(h, "d2", &f);
        assert_int_equal(f.kind, FRAME_RESULT);
        const msgpack_object *rem = mp_map_get(f.value, "remaining_ms");
        assert_non_null(rem);
        assert_true(rem->via.u64 > 5000 && rem->via.u64 <= 10000);
        worker_frame_done(&f);
        expect_unary(h, "d3", "testmod::info", NULL, NULL, "{\"id\":\"d3\",\"shape\":0,\"remaining_ms\":-1}");

        /* A deadline that is not a number of milliseconds is a BadRequest. */
        {
                _cleanup_buffer_ Buffer b = {};
                msgpack_packer pk;

                mp_packer_init_buffer(&pk, &b);
                msgpack_pack_map(&pk, 6);
                mp_pack_cstr(&pk, "call_id");
                mp_pack_cstr(&pk, "dbad");
                mp_pack_cstr(&pk, "callable");
                mp_pack_cstr(&pk, "testmod::echo");
                mp_pack_cstr(&pk, "shape");
                mp_pack_cstr(&pk, "unary");
                mp_pack_cstr(&pk, "args");
                msgpack_pack_array(&pk, 1);
                msgpack_pack_int(&pk, 1);
                mp_pack_cstr(&pk, "kwargs");
                msgpack_pack_map(&pk, 0);
                mp_pack_cstr(&pk, "deadline_ms");
                msgpack_pack_int(&pk, -5);
                assert_int_equal(worker_harness_send_raw(h, FRAME_CALL, buffer_data(&b), b.len), 0);
                expect_error(h, "dbad", RPC_ERR_BAD_REQUEST, "deadline_ms", false);
        }
        stop(h);
}

/* ---- errors --------------------------------------------------------------------------------- */

static void test_errors(void **state) {
        WorkerHarness *h = start(NULL);

        call_error(h, "n1", "testmod::nope", "unary", NULL, NULL, RPC_ERR_NO_SUCH_CALLABLE, "nope");
        call_error(h, "n2", "nosuchmodule::f", "unary", NULL, NULL, RPC_ERR_NO_SUCH_CALLABLE, "nosuchmodule");
        call_error(h, "b1", "echo", "unary", "[1]", NULL, RPC_ERR_BAD_REQUEST, NULL);
        call_error(h, "b2", "testmod::echo", "sideways", "[1]", NULL, RPC_ERR_BAD_REQUEST, "shape");
        call_error(h, "b3", "testmod::echo", "stream", "[1]", NULL, RPC_ERR_BAD_REQUEST, NULL);
        call_error(h, "a1", "testmod::count", "stream", "[\"x\"]", NULL, RPC_ERR_ARGUMENT, "'n'");
        call_error(h, "a2", "testmod::count", "stream", NULL, NULL, RPC_ERR_ARGUMENT, "'n'");
        call_error(h, "a3", "testmod::echo", "unary", "[1]", "{\"bogus\": 2}", RPC_ERR_ARGUMENT, "bogus");
        call_error(h, "r1", "testmod::raise_error", "unary", "[\"KeyError\", \"no such key: k\"]", NULL, "KeyError",
                   "no such key: k");
        call_error(h, "o1", "testmod::fail", "unary", "[2]", NULL, "OSError", "No such file or directory");
        /* A CALL whose args are not an array. */
        call_error(h, "m1", "testmod::echo", "unary", "{\"a\": 1}", NULL, RPC_ERR_BAD_REQUEST, "args");

        /* Garbage without a call_id is dropped; the worker keeps going. */
        static const uint8_t junk[] = { 0x93, 1, 2, 3 };
        assert_int_equal(worker_harness_send_raw(h, FRAME_CALL, junk, sizeof(junk)), 0);
        assert_int_equal(worker_harness_send_raw(h, FRAME_IN, junk, sizeof(junk)), 0);
        assert_int_equal(worker_harness_send_raw(h, FRAME_CANCEL, junk, 1), 0);
        expect_unary(h, "alive", "testmod::echo", "[\"still here\"]", NULL, "\"still here\"");
        stop(h);
}

static void test_duplicate_and_too_many(void **state) {
        WorkerHarness *h = start(&(WorkerOptions) { .no_seccomp = true, .max_calls = 2 });

        assert_int_equal(worker_harness_call(h, "s1", "testmod::sleep", "unary", "[60000]", NULL, -1), 0);
        assert_int_equal(worker_harness_call(h, "s1", "testmod::echo", "unary", "[1]", NULL, -1), 0);
        expect_error(h, "s1", RPC_ERR_BAD_REQUEST, "already running", false);

        assert_int_equal(worker_harness_call(h, "s2", "testmod::sleep", "unary", "[60000]", NULL, -1), 0);
        assert_int_equal(worker_harness_call(h, "s3", "testmod::echo", "unary", "[1]", NULL, -1), 0);
        expect_error(h, "s3", RPC_ERR_TOO_MANY_CALLS, "at most 2", false);

        /* The slot frees with the terminal frame. */
        assert_int_equal(worker_harness_cancel(h, "s1", NULL), 0);
        expect_error(h, "s1", RPC_ERR_CANCELLED, NULL, true);
        expect_unary(h, "s4", "testmod::echo", "[4]", NULL, "4");
        /* And the id can be used again once its call is over. */
        expect_unary(h, "s1", "testmod::echo", "[5]", NULL, "5");

        /* SHUTDOWN cancels the call still running; it still gets its terminal frame. */
        assert_int_equal(worker_harness_shutdown_frame(h), 0);
        expect_error(h, "s2", RPC_ERR_CANCELLED, "shutting down", true);
        stop(h);
}

/* ---- concurrency ---------------------------------------------------------------------------- */

static void test_concurrency(void **state) {
        WorkerHarness *h = start(NULL);
        unsigned long long t0;
        WorkerFrame f = {};
        char id[32];

        assert_int_equal(worker_harness_call(h, "long", "testmod::sleep", "unary", "[3000]", NULL, -1), 0);
        (void) usleep(20 * 1000);

        t0 = now_usec();
        for (int i = 0; i < 100; i++) {
                snprintf(id, sizeof(id), "q%d", i);
                assert_int_equal(worker_harness_call(h, id, "testmod::echo", "unary", "[\"quick\"]", NULL, -1), 0);
        }
        for (int i = 0; i < 100; i++) {
                snprintf(id, sizeof(id), "q%d", i);
                read_terminal(h, id, &f);
                assert_int_equal(f.kind, FRAME_RESULT);
                worker_frame_done(&f);
        }
        /* Far less than the sleep: the echos did not wait for it. */
        assert_true(now_usec() - t0 < 1500 * 1000);
        assert_int_equal(worker_harness_read(h, 0, &f), -ETIMEDOUT); /* the sleep is still running */

        expect_unary_result_of(h, "long", "3000");
        stop(h);
}

/* ---- the process ---------------------------------------------------------------------------- */

static void test_crash(void **state) {
        static const int signals[] = { SIGKILL, SIGTERM, SIGSEGV };

        for (size_t i = 0; i < ELEMENTSOF(signals); i++) {
                WorkerHarness *h = start(&(WorkerOptions) {});
                char args[32];
                int status;

                snprintf(args, sizeof(args), "[%d]", signals[i]);
                assert_int_equal(worker_harness_call(h, "boom", "testmod::crash", "unary", args, NULL, -1), 0);
                assert_int_equal(worker_harness_wait_exit(h, TIMEOUT_MS, &status), 0);
                assert_true(WIFSIGNALED(status));
                assert_int_equal(WTERMSIG(status), signals[i]);
                /* No terminal frame: the server reports WorkerDied. The socket just ends. */
                WorkerFrame f = {};
                assert_int_equal(worker_harness_read(h, TIMEOUT_MS, &f), -EPIPE);
                release(h);
        }
        /* The default signal is 9. */
        WorkerHarness *h = start(&(WorkerOptions) {});
        int status;
        assert_int_equal(worker_harness_call(h, "boom", "testmod::crash", "unary", NULL, NULL, -1), 0);
        assert_int_equal(worker_harness_wait_exit(h, TIMEOUT_MS, &status), 0);
        assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
        release(h);
}

static void test_eof_exits(void **state) {
        WorkerHarness *h = start(NULL);
        int status;

        /* The server going away (EOF) ends the worker, running calls included. */
        assert_int_equal(worker_harness_call(h, "slow", "testmod::sleep", "unary", "[60000]", NULL, -1), 0);
        (void) usleep(20 * 1000);
        assert_int_equal(shutdown(worker_harness_fd(h), SHUT_WR), 0);
        assert_int_equal(worker_harness_wait_exit(h, TIMEOUT_MS, &status), 0);
        assert_true(WIFEXITED(status));
        assert_int_equal(WEXITSTATUS(status), 0);
        expect_error(h, "slow", RPC_ERR_CANCELLED, "shutting down", true);
        release(h);
}

/* ---- confinement ---------------------------------------------------------------------------- */

static int64_t map_int(const msgpack_object *map, const char *key) {
        int64_t v;

        if (mp_map_get_int(map, key, &v) < 0)
                fail_msg("no int \"%s\" in the result", key);
        return v;
}

static const char *const denied[] = {
        "mount", "umount2", "bpf", "kexec_load", "unshare", "setns", "keyctl", "ptrace", "reboot",
        "init_module", "perf_event_open", "swapon", "clone_newns",
};
static const char *const allowed[] = { "getpid", "open", "read", "fork" };

static void run_syscalls(WorkerHarness *h, WorkerFrame *f) {
        assert_int_equal(worker_harness_call(h, "sys", "testmod::syscalls", "unary", NULL, NULL, -1), 0);
        read_terminal(h, "sys", f);
        if (f->kind != FRAME_RESULT)
                fail_msg("syscalls(): '%c' %s", f->kind, strna(f->error_message));
}

static void test_seccomp_denials(void **state) {
        WorkerHarness *h = start(&(WorkerOptions) {}); /* the built-in profile */
        WorkerFrame f = {};

        run_syscalls(h, &f);
        for (size_t i = 0; i < ELEMENTSOF(denied); i++)
                if (map_int(f.value, denied[i]) != EPERM)
                        fail_msg("%s: errno %" PRIi64 ", expected EPERM", denied[i], map_int(f.value, denied[i]));
        for (size_t i = 0; i < ELEMENTSOF(allowed); i++)
                if (map_int(f.value, allowed[i]) != 0)
                        fail_msg("%s: errno %" PRIi64 ", expected success", allowed[i], map_int(f.value, allowed[i]));
        worker_frame_done(&f);

        /* Children inherit the filter: a forked child is denied too, and an exec()ed program
         * runs in seccomp filter mode (2) with no_new_privs. */
        assert_int_equal(worker_harness_call(h, "spawn", "testmod::spawn_probe", "unary", NULL, NULL, -1), 0);
        read_terminal(h, "spawn", &f);
        assert_int_equal(f.kind, FRAME_RESULT);
        assert_int_equal(map_int(f.value, "fork_unshare_errno"), EPERM);
        assert_int_equal(map_int(f.value, "exec_seccomp"), 2);
        assert_int_equal(map_int(f.value, "exec_no_new_privs"), 1);
        worker_frame_done(&f);
        /* With the filter on, leak checking is off in the worker (it needs ptrace): exit is clean. */
        stop(h);
}

/* The probes can tell: without the filter the same syscalls get other answers. */
static void test_seccomp_baseline(void **state) {
        WorkerHarness *h = start(NULL);
        WorkerFrame f = {};

        run_syscalls(h, &f);
        if (geteuid() == 0) {
                assert_int_equal(map_int(f.value, "mount"), ENOENT);
                assert_int_equal(map_int(f.value, "umount2"), ENOENT);
                assert_int_equal(map_int(f.value, "setns"), EBADF);
        }
        assert_int_not_equal(map_int(f.value, "keyctl"), EPERM);
        assert_int_not_equal(map_int(f.value, "ptrace"), EPERM);
        for (size_t i = 0; i < ELEMENTSOF(denied); i++)
                if (map_int(f.value, denied[i]) == EPERM)
                        fprintf(stderr, "note: %s gets EPERM even without the filter here, so the denial test "
                                "cannot tell for it\n", denied[i]);
        worker_frame_done(&f);

        assert_int_equal(worker_harness_call(h, "spawn", "testmod::spawn_probe", "unary", NULL, NULL, -1), 0);
        read_terminal(h, "spawn", &f);
        assert_int_equal(f.kind, FRAME_RESULT);
        assert_int_equal(map_int(f.value, "exec_seccomp"), 0);
        if (map_int(f.value, "fork_unshare_errno") == EPERM)
                fprintf(stderr, "note: unshare() gets EPERM even without the filter here\n");
        assert_int_equal(map_int(f.value, "exec_no_new_privs"), 1); /* no_new_privs is set regardless */
        worker_frame_done(&f);
        stop(h);
}

static void test_seccomp_profile_option(void **state) {
        char path[] = "/tmp/test-worker-profile-XXXXXX";
        static const char profile[] =
                "{\"defaultAction\": \"SCMP_ACT_ALLOW\", \"syscalls\": ["
                " {\"names\": [\"setns\"], \"action\": \"SCMP_ACT_ERRNO\", \"errnoRet\": 33}]}";
        WorkerFrame f = {};
        WorkerHarness *h;
        int fd, status;

        fd = mkstemp(path);
        assert_true(fd >= 0);
        assert_int_equal(loop_write(fd, profile, strlen(profile)), 0);
        close(fd);

        h = start(&(WorkerOptions) { .seccomp_profile = path });
        run_syscalls(h, &f);
        assert_int_equal(map_int(f.value, "setns"), 33);   /* the file's rule */
        assert_int_not_equal(map_int(f.value, "bpf"), EPERM); /* the built-in one is not loaded */
        worker_frame_done(&f);
        release(h);

        /* A profile that does not parse: the worker refuses to start (no READY, exit 1). */
        fd = open(path, O_WRONLY | O_TRUNC | O_CLOEXEC);
        assert_int_equal(loop_write(fd, "{\"defaultAction\": \"NOPE\"}", 26), 0);
        close(fd);
        assert_int_equal(worker_harness_start(&(WorkerOptions) { .seccomp_profile = path, .module_dir = TESTMOD_DIR }, &h), 0);
        assert_int_equal(worker_harness_read(h, TIMEOUT_MS, &f), -EPIPE);
        assert_int_equal(worker_harness_wait_exit(h, TIMEOUT_MS, &status), 0);
        assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 1);
        release(h);
        unlink(path);
}

static void set_env(void *userdata) {
        char **kv = userdata;

        for (; *kv; kv += 2)
                assert_int_equal(setenv(kv[0], kv[1], 1), 0);
}

static void test_process_limits(void **state) {
        char *env[] = { (char *) "AGENTIX_WORKER_RLIMIT_NPROC", (char *) "4321", NULL };
        struct rlimit nofile;
        WorkerHarness *h;
        WorkerFrame f = {};
        int status;

        assert_int_equal(getrlimit(RLIMIT_NOFILE, &nofile), 0);
        h = start_full(&(WorkerOptions) {}, set_env, env);
        assert_int_equal(worker_harness_call(h, "p", "testmod::process", "unary", NULL, NULL, -1), 0);
        read_terminal(h, "p", &f);
        assert_int_equal(f.kind, FRAME_RESULT);
        assert_int_equal(map_int(f.value, "core_soft"), 0);
        assert_int_equal(map_int(f.value, "core_hard"), 0);
        /* The soft limit is raised to the hard limit, capped at 65536. */
        int64_t want = nofile.rlim_max == RLIM_INFINITY ? 65536 : (int64_t) MIN(nofile.rlim_max, (rlim_t) 65536);
        assert_int_equal(map_int(f.value, "nofile_soft"), want);
        assert_int_equal(map_int(f.value, "nproc_soft"), 4321);
        assert_int_equal(map_int(f.value, "nproc_hard"), 4321);
        /* (PR_SET_PDEATHSIG is per thread, set on the reader thread; the call threads read 0.
         * test_dies_with_parent checks the effect.) */
        assert_int_equal(map_int(f.value, "no_new_privs"), 1);
        assert_int_equal(map_int(f.value, "seccomp"), 2);
        worker_frame_done(&f);
        stop(h);

        /* A limit that is not a number: the worker refuses to start. */
        char *bad[] = { (char *) "AGENTIX_WORKER_RLIMIT_AS", (char *) "lots", NULL };
        assert_int_equal(worker_harness_start_full(&(WorkerOptions) { .module_dir = TESTMOD_DIR }, set_env, bad, &h), 0);
        assert_int_equal(worker_harness_read(h, TIMEOUT_MS, &f), -EPIPE);
        assert_int_equal(worker_harness_wait_exit(h, TIMEOUT_MS, &status), 0);
        assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 1);
        release(h);
}

static bool is_gone_or_zombie(pid_t pid) {
        char path[64], line[512] = "", *rp;
        FILE *f;

        snprintf(path, sizeof(path), "/proc/%d/stat", (int) pid);
        f = fopen(path, "re");
        if (!f)
                return true;
        (void) !fgets(line, sizeof(line), f);
        fclose(f);
        rp = strrchr(line, ')');
        return rp && rp[1] == ' ' && rp[2] == 'Z';
}

/* The worker dies with its parent (PR_SET_PDEATHSIG), even while its frame socket stays open:
 * a middle process starts the worker, hands the socket to a holder process, and exits. */
static void test_dies_with_parent(void **state) {
        int p[2], status;
        pid_t middle, pids[2] = {}; /* worker, holder */

        assert_int_equal(pipe2(p, O_CLOEXEC), 0);
        middle = fork();
        assert_true(middle >= 0);
        if (middle == 0) {
                WorkerHarness *h = NULL;

                if (worker_harness_start(&(WorkerOptions) { .module_dir = TESTMOD_DIR }, &h) < 0 ||
                    worker_harness_wait_ready(h, TIMEOUT_MS) < 0)
                        _exit(1);
                pids[0] = worker_harness_pid(h);
                pids[1] = fork(); /* the holder inherits the socket: no EOF for the worker */
                if (pids[1] == 0) {
                        for (;;)
                                pause();
                }
                (void) !write(p[1], pids, sizeof(pids));
                _exit(0); /* without reaping or killing the worker */
        }
        close(p[1]);
        assert_int_equal(read(p[0], pids, sizeof(pids)), (ssize_t) sizeof(pids));
        close(p[0]);
        assert_int_equal(waitpid(middle, &status, 0), middle);
        assert_true(pids[0] > 0 && pids[1] > 0);

        for (int i = 0; i < 500 && !is_gone_or_zombie(pids[0]); i++)
                (void) usleep(10 * 1000);
        bool gone = is_gone_or_zombie(pids[0]);
        (void) kill(pids[1], SIGKILL);
        if (!gone)
                (void) kill(pids[0], SIGKILL);
        assert_true(gone);
}

static void leak_fds(void *userdata) {
        int pair[2];

        /* Inherited, not close-on-exec: the worker must close these. */
        assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, pair), 0);
        assert_true(dup2(pair[0], 40) == 40);
}

static void test_fds(void **state) {
        WorkerHarness *h = start_full(&(WorkerOptions) {}, leak_fds, NULL);
        const msgpack_object *sockets, *o;
        _cleanup_free_ char *child = NULL;
        WorkerFrame f = {};
        int64_t frame_fd;

        assert_int_equal(worker_harness_call(h, "fds", "testmod::fds", "unary", NULL, NULL, -1), 0);
        read_terminal(h, "fds", &f);
        assert_int_equal(f.kind, FRAME_RESULT);

        o = mp_map_get(f.value, "stdin");
        assert_true(mp_str_eq(o, "/dev/null"));
        o = mp_map_get(f.value, "stdout");
        assert_true(mp_str_eq(o, "/dev/null"));

        /* The only socket left is the frame socket, moved to fd >= 10. */
        sockets = mp_map_get(f.value, "sockets");
        assert_non_null(sockets);
        assert_int_equal(sockets->type, MSGPACK_OBJECT_ARRAY);
        assert_int_equal(sockets->via.array.size, 1);
        frame_fd = sockets->via.array.ptr[0].via.i64;
        assert_true(frame_fd >= 10);

        /* An exec()ed child sees only 0, 1, 2 (and ls's own directory fd, 3). */
        o = mp_map_get(f.value, "child_fds");
        assert_non_null(o);
        assert_int_equal(o->type, MSGPACK_OBJECT_STR);
        child = strndup(o->via.str.ptr, o->via.str.size);
        assert_string_equal(child, "0\n1\n2\n3\n");
        worker_frame_done(&f);
        release(h);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_teardown(test_echo_json, teardown),
                cmocka_unit_test_teardown(test_echo_every_type, teardown),
                cmocka_unit_test_teardown(test_inline_functions, teardown),
                cmocka_unit_test_teardown(test_ordered_functions, teardown),
                cmocka_unit_test_teardown(test_bin_from_fd, teardown),
                cmocka_unit_test_teardown(test_result_too_large, teardown),
                cmocka_unit_test_teardown(test_stream, teardown),
                cmocka_unit_test_teardown(test_bidi, teardown),
                cmocka_unit_test_teardown(test_inbox_overflow, teardown),
                cmocka_unit_test_teardown(test_inbox_taken, teardown),
                cmocka_unit_test_teardown(test_output_window, teardown),
                cmocka_unit_test_teardown(test_cancel, teardown),
                cmocka_unit_test_teardown(test_deadline, teardown),
                cmocka_unit_test_teardown(test_errors, teardown),
                cmocka_unit_test_teardown(test_duplicate_and_too_many, teardown),
                cmocka_unit_test_teardown(test_concurrency, teardown),
                cmocka_unit_test_teardown(test_crash, teardown),
                cmocka_unit_test_teardown(test_eof_exits, teardown),
                cmocka_unit_test_teardown(test_seccomp_denials, teardown),
                cmocka_unit_test_teardown(test_seccomp_baseline, teardown),
                cmocka_unit_test_teardown(test_seccomp_profile_option, teardown),
                cmocka_unit_test_teardown(test_fds, teardown),
                cmocka_unit_test_teardown(test_process_limits, teardown),
                cmocka_unit_test_teardown(test_dies_with_parent, teardown),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}

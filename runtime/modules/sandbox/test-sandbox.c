/* SPDX-License-Identifier: MIT */
/* sandbox::exec end to end: a real worker (forked by the worker harness) running the built-in
 * module, spoken to in frames, in all three shapes. Complements test-exec*.c, which test the
 * core without msgpack. The test process is a child subreaper, so orphans of killed command
 * trees are reparented to it and "nothing left in the group" can be checked exactly. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <inttypes.h>
#include <jansson.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/wait.h>

#include "buffer.h"
#include "envelope.h"
#include "frame.h"
#include "macro.h"
#include "worker-harness.h"

#define TIMEOUT_MS 20000

static WorkerHarness *worker;

static int setup(void **state) {
        WorkerOptions o = { .module_dir = "/nonexistent", .no_seccomp = true };

        assert_int_equal(worker_harness_start(&o, &worker), 0);
        assert_int_equal(worker_harness_wait_ready(worker, TIMEOUT_MS), 0);
        return 0;
}

static int teardown(void **state) {
        int status;

        assert_int_equal(worker_harness_shutdown(worker, TIMEOUT_MS, &status), 0);
        worker = worker_harness_free(worker);
        /* LeakSanitizer runs in the worker at exit: a leak makes the status non-zero. */
        assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        return 0;
}

/* ---- helpers ---- */

static unsigned call_counter;

/* Make a call with kwargs built by json_pack(); returns the call id (static storage). */
static const char *call(const char *shape, int64_t deadline_ms, json_t *kwargs) {
        static char ids[64][16];
        char *id = ids[call_counter % 64];
        _cleanup_free_ char *text = NULL;

        assert_non_null(kwargs);
        snprintf(id, 16, "c%u", ++call_counter);
        text = json_dumps(kwargs, JSON_COMPACT);
        json_decref(kwargs);
        assert_non_null(text);
        assert_int_equal(worker_harness_call(worker, id, "sandbox::exec", shape, NULL, text, deadline_ms), 0);
        return id;
}

typedef struct Unary {
        int64_t exit_code;
        bool truncated, timed_out;
        char *output;
        size_t output_size;
} Unary;

static void unary_done(Unary *u) {
        free(u->output);
}

static bool map_bool(const msgpack_object *m, const char *key) {
        const msgpack_object *o = mp_map_get(m, key);

        assert_non_null(o);
        assert_int_equal(o->type, MSGPACK_OBJECT_BOOLEAN);
        return o->via.boolean;
}

static int64_t map_int(const msgpack_object *m, const char *key) {
        int64_t v;

        assert_int_equal(mp_map_get_int(m, key, &v), 0);
        return v;
}

static void expect_unary(const char *id, Unary *ret) {
        WorkerFrame f = {};
        const char *p;
        size_t n;

        assert_int_equal(worker_harness_read_for(worker, id, TIMEOUT_MS, &f), 0);
        if (f.kind != FRAME_RESULT)
                fail_msg("%s: expected RESULT, got '%c' %s: %s", id, f.kind, strna(f.error_type), strna(f.error_message));
        assert_int_equal(f.value->type, MSGPACK_OBJECT_MAP);
        assert_int_equal(f.value->via.map.size, 4); /* exactly the deepagents fields */
        assert_int_equal(mp_map_get_str(f.value, "output", &p, &n), 0);
        *ret = (Unary) {
                .exit_code = map_int(f.value, "exit_code"),
                .truncated = map_bool(f.value, "truncated"),
                .timed_out = map_bool(f.value, "timed_out"),
                .output = strndup(p, n),
                .output_size = n,
        };
        worker_frame_done(&f);
}

static void expect_error(const char *id, const char *type, const char *message_part, bool cancelled) {
        WorkerFrame f = {};

        /* Items before the error (stream, bidi) are fine. */
        for (;;) {
                assert_int_equal(worker_harness_read_for(worker, id, TIMEOUT_MS, &f), 0);
                if (f.kind != FRAME_ITEM)
                        break;
                worker_frame_done(&f);
        }
        if (f.kind != FRAME_ERROR)
                fail_msg("%s: expected ERROR %s, got '%c' %s", id, type, f.kind, strna(f.value_json));
        if (!streq(f.error_type, type))
                fail_msg("%s: expected %s, got %s: %s", id, type, f.error_type, strna(f.error_message));
        if (message_part && !strstr(f.error_message, message_part))
                fail_msg("%s: message \"%s\" lacks \"%s\"", id, f.error_message, message_part);
        assert_int_equal(f.cancelled, cancelled);
        worker_frame_done(&f);
}

/* Run a unary exec of `command` with optional extra kwargs. */
static void run(Unary *u, const char *command, json_t *extra) {
        json_t *kw = json_pack("{s:s}", "command", command);

        if (extra) {
                json_object_update(kw, extra);
                json_decref(extra);
        }
        expect_unary(call("unary", -1, kw), u);
}

/* The items of a stream/bidi call so far: output chunks and the final map. */
typedef struct Stream {
        Buffer text;       /* "stdout:a\n|stderr:b\n|" */
        Buffer data;       /* all data bytes */
        bool final;
        int64_t exit_code;
        bool timed_out, truncated;
        size_t n_chunks;
} Stream;

static void stream_done(Stream *s) {
        buffer_done(&s->text);
        buffer_done(&s->data);
}

/* Read one frame of the call into s. Returns the frame kind. */
static uint8_t stream_read(const char *id, Stream *s) {
        WorkerFrame f = {};
        const msgpack_object *data, *stream;
        uint8_t kind;

        assert_int_equal(worker_harness_read_for(worker, id, TIMEOUT_MS, &f), 0);
        kind = f.kind;
        if (kind == FRAME_ITEM) {
                assert_false(s->final); /* nothing after the final item but END */
                data = mp_map_get(f.value, "data");
                stream = mp_map_get(f.value, "stream");
                if (data) {
                        assert_int_equal(data->type, MSGPACK_OBJECT_BIN);
                        assert_int_equal(stream->type, MSGPACK_OBJECT_STR);
                        assert_int_equal(f.value->via.map.size, 2);
                        assert_int_equal(buffer_append(&s->text, stream->via.str.ptr, stream->via.str.size), 0);
                        assert_int_equal(buffer_append(&s->text, ":", 1), 0);
                        assert_int_equal(buffer_append(&s->text, data->via.bin.ptr, data->via.bin.size), 0);
                        assert_int_equal(buffer_append(&s->text, "|", 1), 0);
                        assert_int_equal(buffer_append(&s->data, data->via.bin.ptr, data->via.bin.size), 0);
                        s->n_chunks++;
                } else {
                        assert_int_equal(f.value->via.map.size, 3);
                        s->final = true;
                        s->exit_code = map_int(f.value, "exit_code");
                        s->timed_out = map_bool(f.value, "timed_out");
                        s->truncated = map_bool(f.value, "truncated");
                }
        } else if (kind == FRAME_ERROR)
                fail_msg("%s: ERROR %s: %s", id, f.error_type, f.error_message);
        worker_frame_done(&f);
        return kind;
}

static void stream_collect(const char *id, Stream *s) {
        while (stream_read(id, s) != FRAME_END)
                ;
        assert_true(s->final);
}

static const char *stream_text(Stream *s) {
        assert_int_equal(buffer_reserve(&s->text, 1), 0);
        buffer_data(&s->text)[s->text.len] = 0;
        return (const char *) buffer_data(&s->text);
}

static const char *stream_data(Stream *s) {
        assert_int_equal(buffer_reserve(&s->data, 1), 0);
        buffer_data(&s->data)[s->data.len] = 0;
        return (const char *) buffer_data(&s->data);
}

/* Read items until the data contains `needle`. */
static void stream_wait_for(const char *id, Stream *s, const char *needle) {
        while (!(s->data.len > 0 && memmem(buffer_data(&s->data), s->data.len, needle, strlen(needle))))
                assert_int_equal(stream_read(id, s), FRAME_ITEM);
}

static void send_in(const char *id, json_t *item) {
        _cleanup_free_ char *text = json_dumps(item, JSON_COMPACT | JSON_ENCODE_ANY);

        json_decref(item);
        assert_int_equal(worker_harness_send_in(worker, id, text), 0);
}

static bool comm_is(pid_t pid, const char *comm) {
        char path[64], buf[64] = {};
        FILE *f;

        snprintf(path, sizeof(path), "/proc/%d/comm", (int) pid);
        f = fopen(path, "re");
        if (!f)
                return false;
        if (!fgets(buf, sizeof(buf), f))
                buf[0] = 0;
        fclose(f);
        buf[strcspn(buf, "\n")] = 0;
        return streq(buf, comm);
}

/* Wait until pid has exec()ed `comm`: a signal that reaches `dash -c` before that is only
 * acted on once the foreground command ends. */
static void wait_comm(pid_t pid, const char *comm) {
        for (int i = 0; i < 5000 && !comm_is(pid, comm); i++)
                usleep(1000);
        assert_true(comm_is(pid, comm));
}

/* Every process of the group gone (orphans are reparented to us and reaped here). */
static bool group_gone(pid_t pgid) {
        for (int i = 0; i < 2000; i++) {
                while (waitpid(-pgid, NULL, WNOHANG) > 0)
                        ;
                if (kill(-pgid, 0) < 0 && errno == ESRCH)
                        return true;
                usleep(1000);
        }
        return false;
}

/* ---- unary ---- */

static void test_echo(void **state) {
        WorkerFrame f = {};
        const char *id;

        id = call("unary", -1, json_pack("{s:s}", "command", "echo hello"));
        assert_int_equal(worker_harness_read_for(worker, id, TIMEOUT_MS, &f), 0);
        assert_int_equal(f.kind, FRAME_RESULT);
        assert_string_equal(f.value_json, "{\"exit_code\":0,\"output\":\"hello\\n\",\"truncated\":false,\"timed_out\":false}");
        worker_frame_done(&f);

        /* Positional arguments bind too. */
        assert_int_equal(worker_harness_call(worker, "pos", "sandbox::exec", "unary", "[\"echo pos\", 5]", NULL, -1), 0);
        assert_int_equal(worker_harness_read_for(worker, "pos", TIMEOUT_MS, &f), 0);
        assert_string_equal(f.value_json, "{\"exit_code\":0,\"output\":\"pos\\n\",\"truncated\":false,\"timed_out\":false}");
        worker_frame_done(&f);
}

static void test_exit_codes(void **state) {
        static const struct { const char *cmd; int64_t code; } cases[] = {
                { "true", 0 }, { "exit 1", 1 }, { "exit 42", 42 }, { "kill -9 $$", 137 },
                { "kill -TERM $$", 143 }, { "no-such-command-agentix", 127 },
        };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                Unary u;

                run(&u, cases[i].cmd, NULL);
                assert_int_equal(u.exit_code, cases[i].code);
                assert_false(u.timed_out);
                unary_done(&u);
        }
}

static void test_stderr_merged_in_order(void **state) {
        Unary u;

        run(&u, "echo out; echo err >&2; echo out2; echo err2 >&2", NULL);
        assert_string_equal(u.output, "out\nerr\nout2\nerr2\n");
        unary_done(&u);
}

static void test_truncation(void **state) {
        Unary u;

        /* 100 MB produced, 1000 bytes kept; the producer must not block on a full pipe. */
        run(&u, "head -c 100000000 /dev/zero | tr '\\0' x; echo tail", json_pack("{s:i}", "max_output", 1000));
        assert_int_equal(u.output_size, 1000);
        assert_true(u.truncated);
        assert_int_equal(u.exit_code, 0);
        unary_done(&u);

        /* A multi-byte character cut by the cap is dropped, not replaced. */
        run(&u, "printf 'ab\\342\\202\\254'", json_pack("{s:i}", "max_output", 4));
        assert_string_equal(u.output, "ab");
        assert_true(u.truncated);
        unary_done(&u);
}

static void test_invalid_utf8(void **state) {
        Unary u;

        run(&u, "printf 'a\\377b\\342\\202'", NULL);
        assert_string_equal(u.output, "a\xEF\xBF\xBD" "b\xEF\xBF\xBD");
        unary_done(&u);
}

static void test_timeout_kills_group(void **state) {
        uint64_t t0 = now_usec();
        pid_t pgid;
        Unary u;

        run(&u, "echo $$; sleep 100 & sleep 100", json_pack("{s:f}", "timeout", 0.3));
        assert_int_equal(u.exit_code, 124);
        assert_true(u.timed_out);
        assert_true(now_usec() - t0 < 3 * 1000 * 1000);
        pgid = (pid_t) atoi(u.output);
        assert_true(pgid > 1);
        assert_true(group_gone(pgid));
        unary_done(&u);
}

static void test_timeout_values(void **state) {
        Unary u;
        const char *id;

        id = call("unary", -1, json_pack("{s:s,s:i}", "command", "true", "timeout", -1));
        expect_error(id, "ValueError", "'timeout' must be >= 0", false);

        run(&u, "echo no-timeout", json_pack("{s:i}", "timeout", 0));
        assert_string_equal(u.output, "no-timeout\n");
        unary_done(&u);

        run(&u, "sleep 5", json_pack("{s:i}", "timeout", 1)); /* int accepted for float */
        assert_true(u.timed_out);
        unary_done(&u);
}

static void test_deadline(void **state) {
        uint64_t t0 = now_usec();
        const char *id;

        /* The call's deadline bounds the run below the timeout. */
        id = call("unary", 300, json_pack("{s:s}", "command", "sleep 100"));
        expect_error(id, RPC_ERR_DEADLINE, NULL, true);
        assert_true(now_usec() - t0 < 2 * 1000 * 1000);
}

static void test_cancel_is_prompt(void **state) {
        Stream s = {};
        const char *id;
        uint64_t t0;
        pid_t pgid;

        id = call("stream", -1, json_pack("{s:s}", "command", "echo $$; sleep 100 & exec sleep 100"));
        stream_wait_for(id, &s, "\n");
        pgid = (pid_t) atoi(stream_data(&s));
        assert_true(pgid > 1);

        t0 = now_usec();
        assert_int_equal(worker_harness_cancel(worker, id, NULL), 0);
        expect_error(id, RPC_ERR_CANCELLED, NULL, true);
        print_message("cancel → terminal frame: %llu µs\n", (unsigned long long) (now_usec() - t0));
        assert_true(now_usec() - t0 < 100 * 1000);
        assert_true(group_gone(pgid));
        stream_done(&s);
}

static void test_cancel_unary(void **state) {
        const char *id = call("unary", -1, json_pack("{s:s}", "command", "sleep 100"));
        uint64_t t0;

        usleep(100 * 1000);
        t0 = now_usec();
        assert_int_equal(worker_harness_cancel(worker, id, NULL), 0);
        expect_error(id, RPC_ERR_CANCELLED, NULL, true);
        print_message("unary cancel → error: %llu µs\n", (unsigned long long) (now_usec() - t0));
        assert_true(now_usec() - t0 < 100 * 1000);
}

static void test_background_job(void **state) {
        uint64_t t0 = now_usec();
        Unary u;

        /* `cmd &` keeping stdout open must not block the call; the job survives it. */
        run(&u, "sleep 30 & echo $$", NULL);
        assert_true(now_usec() - t0 < 2 * 1000 * 1000);
        assert_int_equal(u.exit_code, 0);
        assert_int_equal(kill(-(pid_t) atoi(u.output), 0), 0);
        assert_int_equal(kill(-(pid_t) atoi(u.output), SIGKILL), 0);
        assert_true(group_gone((pid_t) atoi(u.output)));
        unary_done(&u);
}

static void test_cwd(void **state) {
        const char *id;
        Unary u;

        run(&u, "pwd", json_pack("{s:s}", "cwd", "/usr/bin"));
        assert_string_equal(u.output, "/usr/bin\n");
        unary_done(&u);

        id = call("unary", -1, json_pack("{s:s,s:s}", "command", "pwd", "cwd", "usr"));
        expect_error(id, "ValueError", "absolute", false);
        id = call("unary", -1, json_pack("{s:s,s:s}", "command", "pwd", "cwd", "/nonexistent/dir"));
        expect_error(id, "FileNotFoundError", "/nonexistent/dir", false);
        id = call("unary", -1, json_pack("{s:s,s:s}", "command", "pwd", "cwd", "/etc/passwd"));
        expect_error(id, "NotADirectoryError", "/etc/passwd", false);
}

static void test_env(void **state) {
        const char *id;
        Unary u;

        setenv("AGENTIX_TEST_INHERITED", "inherited", 1); /* the worker was forked before: not seen */
        run(&u, "echo \"$FOO|${HOME-unset}|${PATH:+path}|$EMPTY.\"",
            json_pack("{s:{s:s,s:n,s:s}}", "env", "FOO", "b a r", "HOME", "EMPTY", ""));
        assert_string_equal(u.output, "b a r|unset|path|.\n");
        unary_done(&u);

        id = call("unary", -1, json_pack("{s:s,s:{s:i}}", "command", "true", "env", "X", 1));
        expect_error(id, "TypeError", "'X'", false);
        id = call("unary", -1, json_pack("{s:s,s:{s:s}}", "command", "true", "env", "A=B", "x"));
        expect_error(id, "ValueError", "A=B", false);
}

static void test_stdin(void **state) {
        /* bin stdin with every byte value, via raw msgpack kwargs. */
        msgpack_sbuffer sb;
        msgpack_packer pk;
        WorkerFrame f = {};
        uint8_t bytes[256];
        Unary u;
        const char *p;
        size_t n;

        for (size_t i = 0; i < 256; i++)
                bytes[i] = (uint8_t) i;
        msgpack_sbuffer_init(&sb);
        msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
        msgpack_pack_map(&pk, 2);
        mp_pack_cstr(&pk, "command");
        mp_pack_cstr(&pk, "od -An -v -tx1 | tr -d ' \\n'");
        mp_pack_cstr(&pk, "stdin");
        msgpack_pack_bin(&pk, sizeof(bytes));
        msgpack_pack_bin_body(&pk, bytes, sizeof(bytes));
        assert_int_equal(worker_harness_call_mp(worker, "stdin-bin", "sandbox::exec", "unary", NULL, 0, sb.data, sb.size, -1), 0);
        msgpack_sbuffer_destroy(&sb);
        assert_int_equal(worker_harness_read_for(worker, "stdin-bin", TIMEOUT_MS, &f), 0);
        assert_int_equal(f.kind, FRAME_RESULT);
        assert_int_equal(mp_map_get_str(f.value, "output", &p, &n), 0);
        assert_int_equal(n, 512);
        for (size_t i = 0; i < 256; i++) {
                char hex[3];
                snprintf(hex, sizeof(hex), "%02x", (unsigned) i);
                assert_memory_equal(p + 2 * i, hex, 2);
        }
        worker_frame_done(&f);

        /* str stdin; without stdin, /dev/null. */
        run(&u, "cat", json_pack("{s:s}", "stdin", "from str\n"));
        assert_string_equal(u.output, "from str\n");
        unary_done(&u);
        run(&u, "cat; echo rc=$?", NULL);
        assert_string_equal(u.output, "rc=0\n");
        unary_done(&u);
}

static void test_no_fd_leak(void **state) {
        Unary u;

        /* The worker holds its frame socket and more: none of it reaches the command. */
        run(&u, "ls /proc/self/fd", NULL);
        assert_string_equal(u.output, "0\n1\n2\n3\n");
        unary_done(&u);
}

/* sandbox::exec with one int argument packed as msgpack packs it (JSON cannot say 2^64-1). */
static const char *call_int(const char *shape, const char *name, bool negative, uint64_t value) {
        static char ids[16][16];
        char *id = ids[call_counter % 16];
        msgpack_sbuffer sb;
        msgpack_packer pk;

        snprintf(id, 16, "c%u", ++call_counter);
        msgpack_sbuffer_init(&sb);
        msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
        msgpack_pack_map(&pk, 3);
        mp_pack_cstr(&pk, "command");
        mp_pack_cstr(&pk, "echo 0123456789");
        mp_pack_cstr(&pk, "pty");
        msgpack_pack_true(&pk);
        mp_pack_cstr(&pk, name);
        if (negative)
                msgpack_pack_int64(&pk, (int64_t) value);
        else
                msgpack_pack_uint64(&pk, value);
        assert_int_equal(worker_harness_call_mp(worker, id, "sandbox::exec", shape, NULL, 0, sb.data, sb.size, -1), 0);
        msgpack_sbuffer_destroy(&sb);
        return id;
}

static void test_ints_out_of_range(void **state) {
        static const char *const names[] = { "max_output", "rows", "cols" };
        static const uint64_t huge[] = { UINT64_MAX, 1ULL << 63 };

        for (size_t i = 0; i < ELEMENTSOF(names); i++)
                for (size_t k = 0; k < ELEMENTSOF(huge); k++) {
                        expect_error(call_int("unary", names[i], false, huge[k]), "ArgumentError", names[i], false);
                        expect_error(call_int("stream", names[i], false, huge[k]), "ArgumentError", names[i], false);
                }
        expect_error(call_int("stream", "max_output", true, (uint64_t) -1), "ArgumentError", "max_output", false);
        expect_error(call_int("unary", "rows", true, (uint64_t) INT64_MIN), "ArgumentError", "rows", false);
        expect_error(call_int("unary", "cols", false, 65536), "ArgumentError", "cols", false);
}

static void test_bad_arguments(void **state) {
        const char *id;

        id = call("unary", -1, json_pack("{s:s,s:i}", "command", "true", "max_output", -1));
        expect_error(id, "ArgumentError", "max_output", false);
        id = call("unary", -1, json_pack("{s:s,s:i}", "command", "true", "max_output", 1 << 30));
        expect_error(id, "ArgumentError", "stream", false);
        id = call("unary", -1, json_pack("{s:s,s:b,s:i}", "command", "true", "pty", 1, "rows", 0));
        expect_error(id, "ArgumentError", "rows", false);
        id = call("unary", -1, json_pack("{s:s,s:s}", "command", "true", "shell", "/nonexistent/sh"));
        expect_error(id, "FileNotFoundError", "/nonexistent/sh", false);
        id = call("unary", -1, json_pack("{s:i}", "command", 1));
        expect_error(id, RPC_ERR_ARGUMENT, "command", false);
}

static void test_other_shell(void **state) {
        Unary u;

        if (access("/bin/bash", X_OK) < 0)
                skip();
        run(&u, "echo ${BASH_VERSION:+bash}", json_pack("{s:s}", "shell", "/bin/bash"));
        assert_string_equal(u.output, "bash\n");
        unary_done(&u);
}

/* ---- stream ---- */

static void test_stream_order_and_final(void **state) {
        Stream s = {};

        stream_collect(call("stream", -1, json_pack("{s:s}", "command",
                                                    "echo a; sleep 0.05; echo b >&2; sleep 0.05; echo c; exit 3")),
                       &s);
        assert_string_equal(stream_text(&s), "stdout:a\n|stderr:b\n|stdout:c\n|");
        assert_int_equal(s.exit_code, 3);
        assert_false(s.timed_out);
        assert_false(s.truncated);
        stream_done(&s);
}

static void test_stream_truncation(void **state) {
        Stream s = {};

        stream_collect(call("stream", -1, json_pack("{s:s,s:i}", "command", "head -c 50000000 /dev/zero; echo end",
                                                    "max_output", 100000)),
                       &s);
        assert_int_equal(s.data.len, 100000);
        assert_true(s.truncated);
        assert_int_equal(s.exit_code, 0);
        stream_done(&s);
}

static void test_stream_timeout(void **state) {
        Stream s = {};

        stream_collect(call("stream", -1, json_pack("{s:s,s:f}", "command", "echo x; sleep 100", "timeout", 0.2)), &s);
        assert_string_equal(stream_text(&s), "stdout:x\n|");
        assert_int_equal(s.exit_code, 124);
        assert_true(s.timed_out);
        stream_done(&s);
}

/* ---- backpressure ---- */

/* Read the call's frames until none comes for `quiet_ms` (without crediting them): the ITEM
 * payload bytes (what the window counts) into *ret_payload, the items into s. Returns the
 * kind of the last frame: FRAME_ITEM (it went quiet) or the terminal one. */
static uint8_t stream_read_quiet(const char *id, Stream *s, int quiet_ms, uint64_t *ret_payload) {
        for (;;) {
                WorkerFrame f = {};
                int r = worker_harness_read_for(worker, id, quiet_ms, &f);
                uint8_t kind;

                if (r == -ETIMEDOUT)
                        return FRAME_ITEM;
                assert_int_equal(r, 0);
                kind = f.kind;
                if (kind == FRAME_ITEM) {
                        const msgpack_object *data = mp_map_get(f.value, "data");

                        *ret_payload += f.size;
                        if (data)
                                assert_int_equal(buffer_append(&s->data, data->via.bin.ptr, data->via.bin.size), 0);
                        else {
                                s->final = true;
                                s->exit_code = map_int(f.value, "exit_code");
                                s->timed_out = map_bool(f.value, "timed_out");
                        }
                } else if (kind == FRAME_ERROR)
                        fail_msg("%s: ERROR %s: %s", id, f.error_type, f.error_message);
                worker_frame_done(&f);
                if (kind != FRAME_ITEM)
                        return kind;
        }
}

/* A client that does not read holds the command back: a window's worth of output arrives, then
 * nothing, and the command blocks on its full pipe instead of running on; credit lets it go. */
static void test_stream_backpressure(void **state) {
        char dir[] = "/tmp/test-sandbox-bp-XXXXXX", command[256], marker[64];
        uint64_t payload = 0;
        Stream s = {};
        const char *id;

        assert_non_null(mkdtemp(dir));
        snprintf(marker, sizeof(marker), "%s/done", dir);
        snprintf(command, sizeof(command), "head -c 33554432 /dev/zero; touch %s", marker);
        worker_harness_set_auto_credit(worker, false);
        id = call("stream", -1, json_pack("{s:s,s:I}", "command", command, "max_output", (json_int_t) 1 << 30));

        assert_int_equal(stream_read_quiet(id, &s, 500, &payload), FRAME_ITEM);
        /* The loop checks the window before each read: a few pipe reads may overshoot it. */
        if (payload < FRAME_OUT_WINDOW || payload > FRAME_OUT_WINDOW + 256 * 1024)
                fail_msg("%" PRIu64 " bytes arrived without credit (window %u)", payload, FRAME_OUT_WINDOW);
        (void) usleep(300 * 1000);
        assert_int_equal(access(marker, F_OK), -1); /* head is blocked on its pipe */

        assert_int_equal(worker_harness_credit(worker, id, payload), 0);
        worker_harness_set_auto_credit(worker, true);
        stream_collect(id, &s);
        assert_int_equal(s.data.len, 33554432);
        assert_int_equal(s.exit_code, 0);
        assert_int_equal(access(marker, F_OK), 0);
        stream_done(&s);
        (void) unlink(marker);
        (void) rmdir(dir);
}

/* The command's timeout fires while its output waits for a client that does not read: the group
 * is killed, and the rest (what the pipe held) and the exit status come without credit. */
static void test_stream_timeout_while_blocked(void **state) {
        unsigned long long t0 = now_usec();
        uint64_t payload = 0;
        Stream s = {};
        const char *id;

        worker_harness_set_auto_credit(worker, false);
        id = call("stream", -1, json_pack("{s:s,s:f,s:I}", "command", "head -c 1073741824 /dev/zero", "timeout", 1.0,
                                          "max_output", (json_int_t) 1 << 31));
        assert_int_equal(stream_read_quiet(id, &s, TIMEOUT_MS, &payload), FRAME_END);
        worker_harness_set_auto_credit(worker, true);
        assert_true(s.final);
        assert_true(s.timed_out);
        assert_int_equal(s.exit_code, 124);
        assert_true(s.data.len >= FRAME_OUT_WINDOW - 256 * 1024 && s.data.len < FRAME_OUT_WINDOW + 1024 * 1024);
        assert_true(now_usec() - t0 < 5 * 1000 * 1000);
        stream_done(&s);
}

/* ---- bidi ---- */

static void test_bidi_cat(void **state) {
        const char *id = call("bidi", -1, json_pack("{s:s}", "command", "cat; echo done"));
        Stream s = {};

        send_in(id, json_pack("{s:s}", "stdin", "hello\n"));
        stream_wait_for(id, &s, "hello\n");
        send_in(id, json_pack("{s:s}", "stdin", "again\n"));
        send_in(id, json_pack("{s:b}", "eof", 1));
        stream_collect(id, &s);
        assert_string_equal(stream_data(&s), "hello\nagain\ndone\n");
        assert_int_equal(s.exit_code, 0);
        stream_done(&s);
}

static void test_bidi_end_in_is_eof(void **state) {
        const char *id = call("bidi", -1, json_pack("{s:s,s:s}", "command", "wc -c", "stdin", "12"));
        Stream s = {};

        send_in(id, json_pack("{s:s}", "stdin", "345"));
        assert_int_equal(worker_harness_end_in(worker, id), 0);
        stream_collect(id, &s);
        assert_int_equal(atoi(stream_data(&s)), 5);
        stream_done(&s);
}

static void test_bidi_signal(void **state) {
        const char *id = call("bidi", -1, json_pack("{s:s}", "command", "echo $$; exec sleep 100"));
        Stream s = {};

        stream_wait_for(id, &s, "\n");
        wait_comm((pid_t) atoi(stream_data(&s)), "sleep");
        send_in(id, json_pack("{s:s}", "signal", "INT"));
        stream_collect(id, &s);
        assert_int_equal(s.exit_code, 130);
        stream_done(&s);
        s = (Stream) {};

        id = call("bidi", -1, json_pack("{s:s}", "command", "exec sleep 100"));
        send_in(id, json_pack("{s:i}", "signal", 9));
        stream_collect(id, &s);
        assert_int_equal(s.exit_code, 137);
        stream_done(&s);
}

/* A child that never reads its stdin, and more stdin than fits anywhere: the pipe and exec's
 * buffer fill, the rest waits in the inbox. A signal sent urgent still gets through at once. */
static void test_bidi_signal_behind_full_stdin(void **state) {
        const char *id = call("bidi", -1, json_pack("{s:s}", "command", "echo $$; exec sleep 100"));
        _cleanup_free_ char *chunk = malloc(65537);
        unsigned long long t0;
        Stream s = {};

        assert_non_null(chunk);
        memset(chunk, 'x', 65536);
        chunk[65536] = 0;
        stream_wait_for(id, &s, "\n");
        wait_comm((pid_t) atoi(stream_data(&s)), "sleep");
        for (int i = 0; i < 48; i++)
                send_in(id, json_pack("{s:s}", "stdin", chunk));
        (void) usleep(100 * 1000); /* exec has taken what fits and stopped */

        t0 = now_usec();
        assert_int_equal(worker_harness_send_in_urgent(worker, id, "{\"signal\": \"INT\"}"), 0);
        stream_collect(id, &s);
        assert_int_equal(s.exit_code, 130);
        assert_true(now_usec() - t0 < 2 * 1000 * 1000);
        stream_done(&s);
}

static void test_bidi_bad_items(void **state) {
        const char *id = call("bidi", -1, json_pack("{s:s}", "command", "echo $$; sleep 100"));
        Stream s = {};
        pid_t pgid;

        stream_wait_for(id, &s, "\n");
        pgid = (pid_t) atoi(stream_data(&s));
        send_in(id, json_pack("{s:s}", "stdni", "typo"));
        expect_error(id, "ValueError", "stdni", false);
        assert_true(group_gone(pgid)); /* a failed call leaves nothing running */
        stream_done(&s);

        id = call("bidi", -1, json_pack("{s:s}", "command", "sleep 100"));
        send_in(id, json_pack("{s:s}", "signal", "NOPE"));
        expect_error(id, "ValueError", "signal", false);

        id = call("bidi", -1, json_pack("{s:s}", "command", "sleep 100"));
        send_in(id, json_pack("{s:[i,i]}", "resize", 10, 10));
        expect_error(id, "ValueError", "pty=True", false);

        id = call("bidi", -1, json_pack("{s:s}", "command", "sleep 100"));
        send_in(id, json_string("not a map"));
        expect_error(id, "ValueError", "maps", false);
}

/* ---- PTY ---- */

static void test_pty_tty(void **state) {
        Unary u;

        run(&u, "tty; test -t 0 && test -t 1 && test -t 2 && echo all-tty; stty size", json_pack("{s:b,s:i,s:i}", "pty", 1, "rows", 33, "cols", 101));
        assert_true(strncmp(u.output, "/dev/pts/", 9) == 0);
        assert_non_null(strstr(u.output, "\r\nall-tty\r\n33 101\r\n"));
        unary_done(&u);

        run(&u, "echo $TERM", json_pack("{s:b,s:{s:n}}", "pty", 1, "env", "TERM"));
        assert_string_equal(u.output, "xterm-256color\r\n");
        unary_done(&u);
}

static void test_pty_stream_items(void **state) {
        Stream s = {};

        stream_collect(call("stream", -1, json_pack("{s:s,s:b}", "command", "echo hi; echo err >&2", "pty", 1)), &s);
        assert_string_equal(stream_data(&s), "hi\r\nerr\r\n");
        assert_true(strncmp(stream_text(&s), "pty:", 4) == 0);
        assert_null(strstr(stream_text(&s), "stdout:"));
        stream_done(&s);
}

static void test_pty_resize(void **state) {
        const char *id = call("bidi", -1, json_pack("{s:s,s:b}", "command", "stty size; read x; stty size", "pty", 1));
        Stream s = {};

        stream_wait_for(id, &s, "24 80\r\n");
        send_in(id, json_pack("{s:[i,i]}", "resize", 50, 132));
        send_in(id, json_pack("{s:s}", "stdin", "go\n"));
        stream_collect(id, &s);
        assert_non_null(strstr(stream_data(&s), "50 132\r\n"));
        assert_int_equal(s.exit_code, 0);
        stream_done(&s);
}

static void test_pty_ctrl_c(void **state) {
        const char *id = call("bidi", -1, json_pack("{s:s,s:b}", "command", "echo $$; exec sleep 100", "pty", 1));
        Stream s = {};

        stream_wait_for(id, &s, "\n");
        wait_comm((pid_t) atoi(stream_data(&s)), "sleep");
        send_in(id, json_pack("{s:s}", "stdin", "\x03"));
        stream_collect(id, &s);
        assert_int_equal(s.exit_code, 130);
        stream_done(&s);
}

static void test_pty_eof(void **state) {
        const char *id = call("bidi", -1, json_pack("{s:s,s:b}", "command", "stty -echo; echo ready; wc -l", "pty", 1));
        Stream s = {};

        stream_wait_for(id, &s, "ready");
        send_in(id, json_pack("{s:s}", "stdin", "1\n2\n3"));
        send_in(id, json_pack("{s:b}", "eof", 1));
        stream_collect(id, &s);
        assert_non_null(strstr(stream_data(&s), "2\r\n"));
        assert_int_equal(s.exit_code, 0);
        stream_done(&s);
}

/* ---- confined ---- */

static void test_under_seccomp(void **state) {
        /* The real profile (clone3 → ENOSYS, namespace flags denied) still lets us spawn. */
        WorkerHarness *saved = worker;
        WorkerOptions o = { .module_dir = "/nonexistent" };
        Unary u;

        assert_int_equal(worker_harness_start(&o, &worker), 0);
        assert_int_equal(worker_harness_wait_ready(worker, TIMEOUT_MS), 0);
        run(&u, "echo confined; exit 7", NULL);
        assert_string_equal(u.output, "confined\n");
        assert_int_equal(u.exit_code, 7);
        unary_done(&u);
        run(&u, "tty", json_pack("{s:b}", "pty", 1));
        assert_true(strncmp(u.output, "/dev/pts/", 9) == 0);
        unary_done(&u);
        worker = worker_harness_free(worker);
        worker = saved;
}

/* ---- speed ---- */

static int cmp_u64(const void *a, const void *b) {
        uint64_t x = *(const uint64_t *) a, y = *(const uint64_t *) b;
        return x < y ? -1 : x > y;
}

static void test_true_latency(void **state) {
        enum { N = 300 };
        uint64_t t[N];

        for (size_t i = 0; i < N; i++) {
                uint64_t t0 = now_usec();
                Unary u;

                run(&u, "true", NULL);
                t[i] = now_usec() - t0;
                assert_int_equal(u.exit_code, 0);
                unary_done(&u);
        }
        qsort(t, N, sizeof(t[0]), cmp_u64);
        print_message("sandbox::exec('true') through the worker: median %.3f ms, p90 %.3f ms (n=%d)\n",
                      t[N / 2] / 1000.0, t[N * 9 / 10] / 1000.0, N);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_echo),
                cmocka_unit_test(test_exit_codes),
                cmocka_unit_test(test_stderr_merged_in_order),
                cmocka_unit_test(test_truncation),
                cmocka_unit_test(test_invalid_utf8),
                cmocka_unit_test(test_timeout_kills_group),
                cmocka_unit_test(test_timeout_values),
                cmocka_unit_test(test_deadline),
                cmocka_unit_test(test_cancel_is_prompt),
                cmocka_unit_test(test_cancel_unary),
                cmocka_unit_test(test_background_job),
                cmocka_unit_test(test_cwd),
                cmocka_unit_test(test_env),
                cmocka_unit_test(test_stdin),
                cmocka_unit_test(test_no_fd_leak),
                cmocka_unit_test(test_bad_arguments),
                cmocka_unit_test(test_ints_out_of_range),
                cmocka_unit_test(test_other_shell),
                cmocka_unit_test(test_stream_order_and_final),
                cmocka_unit_test(test_stream_truncation),
                cmocka_unit_test(test_stream_timeout),
                cmocka_unit_test(test_stream_backpressure),
                cmocka_unit_test(test_stream_timeout_while_blocked),
                cmocka_unit_test(test_bidi_cat),
                cmocka_unit_test(test_bidi_end_in_is_eof),
                cmocka_unit_test(test_bidi_signal),
                cmocka_unit_test(test_bidi_signal_behind_full_stdin),
                cmocka_unit_test(test_bidi_bad_items),
                cmocka_unit_test(test_pty_tty),
                cmocka_unit_test(test_pty_stream_items),
                cmocka_unit_test(test_pty_resize),
                cmocka_unit_test(test_pty_ctrl_c),
                cmocka_unit_test(test_pty_eof),
                cmocka_unit_test(test_under_seccomp),
                cmocka_unit_test(test_true_latency),
        };

        if (prctl(PR_SET_CHILD_SUBREAPER, 1) < 0)
                return 1;
        return cmocka_run_group_tests(tests, setup, teardown);
}

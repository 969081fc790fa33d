/* SPDX-License-Identifier: MIT */
/* End-to-end: the fs module through a real worker (runtime/worker harness), in frames —
 * argument binding, result maps, bin values, per-file errors, and the seccomp profile. */
#include <inttypes.h>

#include <jansson.h>

#include "envelope.h"
#include "frame.h"
#include "worker-harness.h"
#include "test-fs-util.h"

#define TIMEOUT_MS 20000

static WorkerHarness *start(bool seccomp) {
        WorkerHarness *h = NULL;

        assert_int_equal(worker_harness_start(&(WorkerOptions) { .module_dir = test_dir, .no_seccomp = !seccomp }, &h), 0);
        assert_int_equal(worker_harness_wait_ready(h, TIMEOUT_MS), 0);
        return h;
}

static void stop(WorkerHarness *h) {
        int status;

        assert_int_equal(worker_harness_shutdown(h, TIMEOUT_MS, &status), 0);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
                fail_msg("worker exit status 0x%x", status);
        worker_harness_free(h);
}

/* Call with JSON arguments; the RESULT frame into *f. */
static void call_json(WorkerHarness *h, const char *id, const char *callable, const char *args, const char *kwargs,
                      WorkerFrame *f) {
        assert_int_equal(worker_harness_call(h, id, callable, "unary", args, kwargs, -1), 0);
        assert_int_equal(worker_harness_read_for(h, id, TIMEOUT_MS, f), 0);
        if (f->kind != FRAME_RESULT)
                fail_msg("%s: expected RESULT, got '%c' %s: %s", id, f->kind, strna(f->error_type), strna(f->error_message));
}

static void expect_json(WorkerHarness *h, const char *id, const char *callable, const char *args, const char *kwargs,
                        const char *expected) {
        WorkerFrame f = {};

        call_json(h, id, callable, args, kwargs, &f);
        if (!streq(f.value_json, expected))
                fail_msg("%s:\n expected %s\n      got %s", id, expected, f.value_json);
        worker_frame_done(&f);
}

/* JSON text with the scratch directory's path substituted for every "@" (static buffers,
 * eight at a time: the worker is a fork of this process, so its leak check at exit would
 * also count whatever the test itself leaked). */
static const char *J(const char *fmt) {
        static char bufs[8][8192];
        static unsigned n;
        char *b = bufs[n++ % 8], *o = b;

        for (const char *p = fmt; *p; p++) {
                size_t k = *p == '@' ? strlen(test_dir) : 1;
                assert_true((size_t) (o - b) + k < sizeof(bufs[0]));
                if (*p == '@')
                        memcpy(o, test_dir, k);
                else
                        *o = *p;
                o += k;
        }
        *o = 0;
        return b;
}

static const msgpack_object *field(const msgpack_object *o, const char *key) {
        const msgpack_object *v = mp_map_get(o, key);
        if (!v)
                fail_msg("no field '%s'", key);
        return v;
}

static void assert_str_field(const msgpack_object *o, const char *key, const char *expected) {
        const msgpack_object *v = field(o, key);
        if (!expected) {
                assert_int_equal(v->type, MSGPACK_OBJECT_NIL);
                return;
        }
        assert_int_equal(v->type, MSGPACK_OBJECT_STR);
        if (v->via.str.size != strlen(expected) || memcmp(v->via.str.ptr, expected, v->via.str.size) != 0)
                fail_msg("%s: expected '%s', got '%.*s'", key, expected, (int) v->via.str.size, v->via.str.ptr);
}

static void pack_cstr(msgpack_packer *pk, const char *s) {
        msgpack_pack_str(pk, strlen(s));
        msgpack_pack_str_body(pk, s, strlen(s));
}

static void pack_bin(msgpack_packer *pk, const void *p, size_t n) {
        msgpack_pack_bin(pk, n);
        msgpack_pack_bin_body(pk, p, n);
}

static void test_upload_download_round_trip(void **state) {
        WorkerHarness *h = start(false);
        uint8_t all[256], nul[5] = { 'a', 0, 'b', 0, 0 };
        for (unsigned i = 0; i < 256; i++)
                all[i] = (uint8_t) i;

        /* upload([[p1, all], [relative, x], [new/dir/p2, nul], "garbage", [p3]]) */
        msgpack_sbuffer sb;
        msgpack_packer pk;
        msgpack_sbuffer_init(&sb);
        msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
        msgpack_pack_array(&pk, 1);
        msgpack_pack_array(&pk, 5);
        msgpack_pack_array(&pk, 2);
        pack_cstr(&pk, P("all.bin"));
        pack_bin(&pk, all, sizeof(all));
        msgpack_pack_array(&pk, 2);
        pack_cstr(&pk, "relative.bin");
        pack_bin(&pk, "x", 1);
        msgpack_pack_array(&pk, 2);
        pack_cstr(&pk, P("new/dir/nul.bin"));
        pack_bin(&pk, nul, sizeof(nul));
        pack_cstr(&pk, "garbage");
        msgpack_pack_array(&pk, 1);
        pack_cstr(&pk, P("p3"));

        WorkerFrame f = {};
        assert_int_equal(worker_harness_call_mp(h, "up", "fs::upload", "unary", sb.data, sb.size, NULL, 0, -1), 0);
        msgpack_sbuffer_destroy(&sb);
        assert_int_equal(worker_harness_read_for(h, "up", TIMEOUT_MS, &f), 0);
        assert_int_equal(f.kind, FRAME_RESULT);
        assert_int_equal(f.value->type, MSGPACK_OBJECT_ARRAY);
        assert_int_equal(f.value->via.array.size, 5);
        const msgpack_object *res = f.value->via.array.ptr;
        assert_str_field(&res[0], "path", P("all.bin"));
        assert_str_field(&res[0], "error", NULL);
        assert_str_field(&res[1], "path", "relative.bin");
        assert_str_field(&res[1], "error", "invalid_path");
        assert_str_field(&res[2], "error", NULL);
        assert_str_field(&res[3], "path", NULL);
        assert_str_field(&res[3], "error", "invalid_path");
        assert_str_field(&res[3], "message", "invalid entry");
        assert_str_field(&res[4], "path", P("p3"));
        assert_str_field(&res[4], "error", "invalid_path");
        worker_frame_done(&f);
        assert_int_equal(access(P("p3"), F_OK), -1);

        /* download: order kept, bytes exact, per-file errors */
        mkdir_p("adir");
        const char *args = J("[[\"@/all.bin\", \"@/missing\", \"@/adir\", \"rel\", \"@/new/dir/nul.bin\", \"\"]]");
        call_json(h, "down", "fs::download", args, NULL, &f);
        assert_int_equal(f.value->via.array.size, 6);
        res = f.value->via.array.ptr;
        const msgpack_object *c = field(&res[0], "content");
        assert_int_equal(c->type, MSGPACK_OBJECT_BIN);
        assert_int_equal(c->via.bin.size, 256);
        assert_memory_equal(c->via.bin.ptr, all, 256);
        assert_str_field(&res[0], "error", NULL);
        assert_str_field(&res[1], "path", P("missing"));
        assert_str_field(&res[1], "error", "file_not_found");
        assert_int_equal(field(&res[1], "content")->type, MSGPACK_OBJECT_NIL);
        assert_str_field(&res[2], "error", "is_directory");
        assert_str_field(&res[3], "error", "invalid_path");
        c = field(&res[4], "content");
        assert_int_equal(c->via.bin.size, sizeof(nul));
        assert_memory_equal(c->via.bin.ptr, nul, sizeof(nul));
        assert_str_field(&res[5], "error", "invalid_path");
        worker_frame_done(&f);

        /* an empty batch is an empty list */
        expect_json(h, "none", "fs::download", "[[]]", NULL, "[]");
        expect_json(h, "none2", "fs::upload", "[[]]", NULL, "[]");
        stop(h);
}

static void test_download_budget(void **state) {
        WorkerHarness *h = start(false);

        /* sparse: over the per-call budget without writing 300 MiB */
        int fd = open(P("huge.bin"), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
        assert_true(fd >= 0);
        assert_int_equal(ftruncate(fd, 300 * 1024 * 1024), 0);
        close(fd);
        puts_file("small.txt", "small");

        WorkerFrame f = {};
        const char *args = J("[[\"@/huge.bin\", \"@/small.txt\"]]");
        call_json(h, "big", "fs::download", args, NULL, &f);
        const msgpack_object *res = f.value->via.array.ptr;
        assert_str_field(&res[0], "error", "too_large");
        assert_int_equal(field(&res[0], "content")->type, MSGPACK_OBJECT_NIL);
        assert_str_field(&res[1], "error", NULL);
        assert_int_equal(field(&res[1], "content")->via.bin.size, 5);
        worker_frame_done(&f);
        stop(h);
}

static void test_read_write_edit(void **state) {
        WorkerHarness *h = start(false);
        const char *a, *e;

        a = J("[\"@/w/t.txt\", \"one\\ntwo\\r\\nthree\\n\"]");
        e = J("{\"path\":\"@/w/t.txt\",\"bytes_written\":15,\"error\":null,\"message\":null}");
        expect_json(h, "w1", "fs::write", a, NULL, e);
        e = J("{\"path\":\"@/w/t.txt\",\"bytes_written\":null,\"error\":\"already_exists\","
              "\"message\":\"Error: File '@/w/t.txt' already exists\"}");
        expect_json(h, "w2", "fs::write", a, NULL, e);
        a = J("[\"@/w/t.txt\", {\"$bin\": \"bytes\\n\"}]");
        e = J("{\"path\":\"@/w/t.txt\",\"bytes_written\":6,\"error\":null,\"message\":null}");
        expect_json(h, "w3", "fs::write", a, "{\"overwrite\": true}", e);
        a = J("[\"@/w/t.txt\", \"one\\ntwo\\r\\nthree\\n\", true]");
        expect_json(h, "w4", "fs::write", a, NULL,
                    J("{\"path\":\"@/w/t.txt\",\"bytes_written\":15,\"error\":null,\"message\":null}"));

        a = J("[\"@/w/t.txt\"]");
        expect_json(h, "r1", "fs::read", a, "{\"offset\": 1, \"limit\": 1}",
                    "{\"content\":\"     2\\ttwo\",\"encoding\":\"utf-8\",\"data\":null,\"total_lines\":3,"
                    "\"start_line\":2,\"end_line\":2,\"next_offset\":2,\"truncated\":false,\"error\":null,\"message\":null}");
        expect_json(h, "r2", "fs::read", a, NULL,
                    "{\"content\":\"     1\\tone\\n     2\\ttwo\\n     3\\tthree\",\"encoding\":\"utf-8\",\"data\":null,"
                    "\"total_lines\":3,\"start_line\":1,\"end_line\":3,\"next_offset\":null,\"truncated\":false,"
                    "\"error\":null,\"message\":null}");
        expect_json(h, "r3", "fs::read", a, "{\"offset\": 7}",
                    "{\"content\":null,\"encoding\":null,\"data\":null,\"total_lines\":null,\"start_line\":null,"
                    "\"end_line\":null,\"next_offset\":null,\"truncated\":false,\"error\":\"invalid_offset\","
                    "\"message\":\"Line offset 7 exceeds file length (3 lines)\"}");

        /* the CRLF line edited with an LF old string keeps its CRLF */
        a = J("[\"@/w/t.txt\", \"two\\nthree\", \"2\\n3\"]");
        e = J("{\"path\":\"@/w/t.txt\",\"occurrences\":1,\"error\":null,\"message\":null}");
        expect_json(h, "e1", "fs::edit", a, NULL, e);
        char *content = slurp(P("w/t.txt"), NULL);
        assert_string_equal(content, "one\n2\r\n3\n");
        free(content);
        a = J("[\"@/w/t.txt\", \"zzz\", \"y\"]");
        e = J("{\"path\":\"@/w/t.txt\",\"occurrences\":null,\"error\":\"string_not_found\","
              "\"message\":\"Error: String not found in file: 'zzz'\"}");
        expect_json(h, "e2", "fs::edit", a, NULL, e);

        /* binary read comes back as bin */
        put("w/b.bin", "\x00\xff\x01", 3);
        WorkerFrame f = {};
        a = J("[\"@/w/b.bin\"]");
        call_json(h, "r4", "fs::read", a, NULL, &f);
        assert_str_field(f.value, "encoding", "bytes");
        assert_int_equal(field(f.value, "data")->type, MSGPACK_OBJECT_BIN);
        assert_int_equal(field(f.value, "data")->via.bin.size, 3);
        assert_memory_equal(field(f.value, "data")->via.bin.ptr, "\x00\xff\x01", 3);
        worker_frame_done(&f);

        /* relative paths are a result, not an exception */
        expect_json(h, "rel", "fs::read", "[\"x.txt\"]", NULL,
                    "{\"content\":null,\"encoding\":null,\"data\":null,\"total_lines\":null,\"start_line\":null,"
                    "\"end_line\":null,\"next_offset\":null,\"truncated\":false,\"error\":\"invalid_path\","
                    "\"message\":\"Error: Path must be absolute: 'x.txt'\"}");
        stop(h);
}

static void test_ls_grep_glob(void **state) {
        WorkerHarness *h = start(false);
        const char *a, *e;

        puts_file("t/src/a.py", "import os\nprint('x: y')\n");
        puts_file("t/src/b.txt", "print\n");
        puts_file("t/c:d.py", "print: z\n");
        mkdir_p("t/empty");

        WorkerFrame f = {};
        a = J("[\"@/t\"]");
        call_json(h, "ls", "fs::ls", a, NULL, &f);
        const msgpack_object *entries = field(f.value, "entries");
        assert_int_equal(entries->via.array.size, 3);
        assert_str_field(&entries->via.array.ptr[0], "path", P("t/c:d.py"));
        assert_int_equal(field(&entries->via.array.ptr[0], "is_dir")->via.boolean, false);
        assert_int_equal(field(&entries->via.array.ptr[0], "size")->via.u64, 9);
        assert_int_equal(field(&entries->via.array.ptr[0], "modified_at")->via.str.size, 32);
        assert_str_field(&entries->via.array.ptr[1], "path", P("t/empty"));
        assert_int_equal(field(&entries->via.array.ptr[1], "is_dir")->via.boolean, true);
        assert_str_field(f.value, "error", NULL);
        worker_frame_done(&f);

        a = J("[\"@/nope\"]");
        e = J("{\"entries\":null,\"truncated\":false,\"error\":\"file_not_found\",\"message\":\"Error: Path '@/nope' not found\"}");
        expect_json(h, "ls2", "fs::ls", a, NULL, e);

        a = J("[\"print\", \"@/t\"]");
        e = J("{\"matches\":[{\"path\":\"@/t/c:d.py\",\"line\":1,\"text\":\"print: z\"},"
              "{\"path\":\"@/t/src/a.py\",\"line\":2,\"text\":\"print('x: y')\"},"
              "{\"path\":\"@/t/src/b.txt\",\"line\":1,\"text\":\"print\"}],"
              "\"truncated\":false,\"error\":null,\"message\":null}");
        expect_json(h, "g1", "fs::grep", a, NULL, e);
        e = J("{\"matches\":[{\"path\":\"@/t/c:d.py\",\"line\":1,\"text\":\"print: z\"}],"
              "\"truncated\":true,\"error\":null,\"message\":null}");
        expect_json(h, "g2", "fs::grep", a, "{\"glob\": \"*.py\", \"max_count\": 1}", e);

        a = J("[\"**/*.py\"]");
        call_json(h, "gl", "fs::glob", a, J("{\"path\": \"@/t\"}"), &f);
        const msgpack_object *m = field(f.value, "matches");
        assert_int_equal(m->via.array.size, 2);
        assert_str_field(&m->via.array.ptr[0], "path", P("t/c:d.py"));
        assert_str_field(&m->via.array.ptr[1], "path", P("t/src/a.py"));
        assert_int_equal(field(&m->via.array.ptr[1], "size")->via.u64, 24);
        assert_int_equal(field(f.value, "truncated")->via.boolean, false);
        worker_frame_done(&f);

        expect_json(h, "gl2", "fs::glob", "[\"../*\", \"/tmp\"]", NULL,
                    "{\"matches\":null,\"truncated\":false,\"error\":\"invalid_path\","
                    "\"message\":\"Error: Path traversal not allowed in glob pattern '../*'\"}");
        stop(h);
}

static void test_argument_errors(void **state) {
        WorkerHarness *h = start(false);
        WorkerFrame f = {};

        assert_int_equal(worker_harness_call(h, "a1", "fs::read", "unary", "[\"/x\"]", "{\"offset\": \"1\"}", -1), 0);
        assert_int_equal(worker_harness_read_for(h, "a1", TIMEOUT_MS, &f), 0);
        assert_int_equal(f.kind, FRAME_ERROR);
        assert_string_equal(f.error_type, "ArgumentError");
        assert_non_null(strstr(f.error_message, "offset"));
        worker_frame_done(&f);

        assert_int_equal(worker_harness_call(h, "a2", "fs::write", "unary", "[\"/x\"]", NULL, -1), 0);
        assert_int_equal(worker_harness_read_for(h, "a2", TIMEOUT_MS, &f), 0);
        assert_string_equal(f.error_type, "ArgumentError");
        assert_non_null(strstr(f.error_message, "content"));
        worker_frame_done(&f);

        assert_int_equal(worker_harness_call(h, "a3", "fs::download", "unary", "[[\"/x\", 1]]", NULL, -1), 0);
        assert_int_equal(worker_harness_read_for(h, "a3", TIMEOUT_MS, &f), 0);
        assert_string_equal(f.error_type, "ArgumentError");
        worker_frame_done(&f);

        assert_int_equal(worker_harness_call(h, "a4", "fs::nothing", "unary", NULL, NULL, -1), 0);
        assert_int_equal(worker_harness_read_for(h, "a4", TIMEOUT_MS, &f), 0);
        assert_string_equal(f.error_type, "NoSuchCallable");
        worker_frame_done(&f);
        stop(h);
}

/* Calls run on threads of their own: many at once, each with its own answer. */
static void test_concurrent_calls(void **state) {
        WorkerHarness *h = start(false);
        enum { N = 16 };

        for (int i = 0; i < N; i++) {
                char rel[32], text[64];
                snprintf(rel, sizeof(rel), "c/f%02d.txt", i);
                snprintf(text, sizeof(text), "file %d\nneedle %d\n", i, i);
                puts_file(rel, text);
        }
        for (int i = 0; i < N; i++) {
                char id[16], args[PATH_MAX + 64];
                snprintf(id, sizeof(id), "c%02d", i);
                if (i % 4 == 0)
                        snprintf(args, sizeof(args), "[\"needle %d\", \"%s\"]", i, P("c"));
                else if (i % 4 == 1)
                        snprintf(args, sizeof(args), "[\"f%02d.*\", \"%s\"]", i, P("c"));
                else
                        snprintf(args, sizeof(args), "[\"%s/c/f%02d.txt\", 1, 1]", test_dir, i);
                assert_int_equal(worker_harness_call(h, id, i % 4 == 0 ? "fs::grep" : i % 4 == 1 ? "fs::glob" : "fs::read",
                                                     "unary", args, NULL, -1), 0);
        }
        for (int i = N - 1; i >= 0; i--) {
                char id[16], expected[64];
                WorkerFrame f = {};
                snprintf(id, sizeof(id), "c%02d", i);
                assert_int_equal(worker_harness_read_for(h, id, TIMEOUT_MS, &f), 0);
                assert_int_equal(f.kind, FRAME_RESULT);
                if (i % 4 == 0) {
                        const msgpack_object *m = field(f.value, "matches");
                        assert_int_equal(m->via.array.size, 1);
                        snprintf(expected, sizeof(expected), "needle %d", i);
                        assert_str_field(&m->via.array.ptr[0], "text", expected);
                } else if (i % 4 == 1) {
                        const msgpack_object *m = field(f.value, "matches");
                        assert_int_equal(m->via.array.size, 1);
                } else {
                        snprintf(expected, sizeof(expected), "     2\tneedle %d", i);
                        assert_str_field(f.value, "content", expected);
                }
                worker_frame_done(&f);
        }
        stop(h);
}

/* The same operations under the default seccomp profile: nothing fs needs is denied. */
static void test_under_seccomp(void **state) {
        WorkerHarness *h = start(true);
        const char *a, *e;

        a = J("[[[\"@/s/f.txt\", {\"$bin\": \"needle\\n\"}]]]");
        e = J("[{\"path\":\"@/s/f.txt\",\"error\":null,\"message\":null}]");
        expect_json(h, "s1", "fs::upload", a, NULL, e);
        assert_int_equal(chmod(P("s/f.txt"), 0640), 0);
        a = J("[\"@/s/f.txt\", \"needle\", \"pin\"]");
        e = J("{\"path\":\"@/s/f.txt\",\"occurrences\":1,\"error\":null,\"message\":null}");
        expect_json(h, "s2", "fs::edit", a, NULL, e);
        struct stat st;
        assert_int_equal(stat(P("s/f.txt"), &st), 0);
        assert_int_equal(st.st_mode & 0777, 0640);
        a = J("[\"pin\", \"@/s\"]");
        e = J("{\"matches\":[{\"path\":\"@/s/f.txt\",\"line\":1,\"text\":\"pin\"}],\"truncated\":false,\"error\":null,\"message\":null}");
        expect_json(h, "s3", "fs::grep", a, NULL, e);
        a = J("[[\"@/s/f.txt\"]]");
        e = J("[{\"path\":\"@/s/f.txt\",\"content\":{\"$bin\":\"pin\\n\"},\"error\":null,\"message\":null,\"mode\":416}]");
        expect_json(h, "s4", "fs::download", a, NULL, e);

        /* the worker exits by itself under seccomp; LeakSanitizer cannot run there */
        int status;
        assert_int_equal(worker_harness_shutdown(h, TIMEOUT_MS, &status), 0);
        worker_harness_free(h);
}

/* ---- mkdir, modes, read_stream, write_stream -------------------------------------------------- */

static void send_bin(WorkerHarness *h, const char *id, const void *p, size_t n) {
        msgpack_sbuffer sb;
        msgpack_packer pk;

        msgpack_sbuffer_init(&sb);
        msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
        pack_bin(&pk, p, n);
        assert_int_equal(worker_harness_send_in_mp(h, id, sb.data, sb.size), 0);
        msgpack_sbuffer_destroy(&sb);
}

/* The frames of one stream or bidi call up to its terminal frame (into *terminal): its bin
 * items joined into *ret_data (malloc()ed), how many there were and the largest. */
static void collect_bin_items(WorkerHarness *h, const char *id, uint8_t **ret_data, size_t *ret_size, size_t *ret_items,
                              size_t *ret_largest, WorkerFrame *terminal) {
        uint8_t *data = NULL;
        size_t size = 0, items = 0, largest = 0;

        for (;;) {
                WorkerFrame f = {};
                assert_int_equal(worker_harness_read_for(h, id, TIMEOUT_MS, &f), 0);
                if (f.kind != FRAME_ITEM) {
                        *terminal = f;
                        break;
                }
                assert_int_equal(f.value->type, MSGPACK_OBJECT_BIN);
                data = realloc(data, size + f.value->via.bin.size + 1);
                assert_non_null(data);
                memcpy(data + size, f.value->via.bin.ptr, f.value->via.bin.size);
                size += f.value->via.bin.size;
                largest = MAX(largest, (size_t) f.value->via.bin.size);
                items++;
                worker_frame_done(&f);
        }
        *ret_data = data;
        *ret_size = size;
        *ret_items = items;
        *ret_largest = largest;
}

static void expect_error(WorkerHarness *h, const char *id, const char *type, const char *fragment) {
        WorkerFrame f = {};

        assert_int_equal(worker_harness_read_for(h, id, TIMEOUT_MS, &f), 0);
        if (f.kind != FRAME_ERROR)
                fail_msg("%s: expected ERROR %s, got '%c' %s", id, type, f.kind, strna(f.value_json));
        if (!streq(f.error_type, type) || (fragment && !strstr(strna(f.error_message), fragment)))
                fail_msg("%s: expected %s (%s), got %s: %s", id, type, strna(fragment), f.error_type,
                         strna(f.error_message));
        worker_frame_done(&f);
}

/* Wait (a few seconds at most) until the directory has `want` entries starting with prefix. */
static void wait_for_prefixed(const char *rel_dir, const char *prefix, unsigned want) {
        unsigned n = 0;

        for (int i = 0; i < 500; i++) {
                n = count_prefixed(P(rel_dir), prefix);
                if (n == want)
                        return;
                usleep(10 * 1000);
        }
        fail_msg("%s: %u entries starting with '%s', expected %u", rel_dir, n, prefix, want);
}

static void random_bytes(uint8_t *p, size_t n) {
        uint64_t x = 0x9e3779b97f4a7c15ull ^ n;
        for (size_t i = 0; i < n; i++) {
                x ^= x << 13, x ^= x >> 7, x ^= x << 17;
                p[i] = (uint8_t) x;
        }
}

static void test_mkdir_batch(void **state) {
        WorkerHarness *h = start(false);
        struct stat st;

        puts_file("file.txt", "x");
        mkdir_p("there");
        expect_json(h, "md", "fs::mkdir", J("[[\"@/m/a/b\", \"@/there\", \"@/file.txt\", \"@/file.txt/sub\", \"rel\", \"@/m/a\", \"\"]]"),
                    NULL,
                    J("[{\"path\":\"@/m/a/b\",\"error\":null,\"message\":null},"
                      "{\"path\":\"@/there\",\"error\":null,\"message\":null},"
                      "{\"path\":\"@/file.txt\",\"error\":\"not_a_directory\",\"message\":\"Error: '@/file.txt' exists and is not a directory\"},"
                      "{\"path\":\"@/file.txt/sub\",\"error\":\"not_a_directory\",\"message\":\"Error: Cannot create '@/file.txt/sub': a parent is not a directory\"},"
                      "{\"path\":\"rel\",\"error\":\"invalid_path\",\"message\":\"Error: Path must be absolute: 'rel'\"},"
                      "{\"path\":\"@/m/a\",\"error\":null,\"message\":null},"
                      "{\"path\":\"\",\"error\":\"invalid_path\",\"message\":\"Error: Path is empty\"}]"));
        assert_int_equal(stat(P("m/a/b"), &st), 0);
        assert_true(S_ISDIR(st.st_mode));
        assert_int_equal(stat(P("file.txt"), &st), 0);
        assert_true(S_ISREG(st.st_mode));
        expect_json(h, "md0", "fs::mkdir", "[[]]", NULL, "[]");
        stop(h);
}

/* stat, move and remove through the worker, under its seccomp filter. */
static void test_stat_move_remove(void **state) {
        WorkerHarness *h = start(true);
        struct stat st;

        puts_file("f.txt", "hello");
        assert_int_equal(chmod(P("f.txt"), 0640), 0);
        mkdir_p("d/sub");
        assert_int_equal(symlink("f.txt", P("ln")), 0);
        {
                WorkerFrame f = {};
                json_t *v, *e;

                assert_int_equal(worker_harness_call(h, "st2", "fs::stat", "unary", J("[[\"@/f.txt\", \"@/d\", \"@/ln\", \"@/nope\"]]"),
                                                     NULL, -1), 0);
                assert_int_equal(worker_harness_read_for(h, "st2", TIMEOUT_MS, &f), 0);
                assert_int_equal(f.kind, FRAME_RESULT);
                v = json_loads(f.value_json, 0, NULL);
                assert_non_null(v);
                e = json_array_get(v, 0);
                assert_string_equal(json_string_value(json_object_get(e, "type")), "file");
                assert_int_equal(json_integer_value(json_object_get(e, "size")), 5);
                assert_int_equal(json_integer_value(json_object_get(e, "mode")), 0640);
                assert_non_null(strstr(json_string_value(json_object_get(e, "modified_at")), "+00:00"));
                assert_true(json_is_null(json_object_get(e, "error")));
                assert_string_equal(json_string_value(json_object_get(json_array_get(v, 1), "type")), "directory");
                e = json_array_get(v, 2);
                assert_string_equal(json_string_value(json_object_get(e, "type")), "symlink");
                assert_string_equal(json_string_value(json_object_get(e, "symlink_target")), "f.txt");
                e = json_array_get(v, 3);
                assert_string_equal(json_string_value(json_object_get(e, "error")), "file_not_found");
                assert_true(json_is_null(json_object_get(e, "type")));
                json_decref(v);
                worker_frame_done(&f);
        }
        expect_json(h, "mv", "fs::move", J("[\"@/f.txt\", \"@/new/g.txt\"]"), NULL,
                    J("{\"path\":\"@/new/g.txt\",\"error\":null,\"message\":null}"));
        assert_int_equal(stat(P("new/g.txt"), &st), 0);
        expect_json(h, "mv2", "fs::move", J("[\"@/f.txt\", \"@/x\"]"), NULL,
                    J("{\"path\":null,\"error\":\"file_not_found\",\"message\":\"Error: File '@/f.txt' not found\"}"));
        expect_json(h, "rm", "fs::remove", J("[[\"@/d\", \"@/ln\", \"@/nope\", \"/\"]]"), NULL,
                    J("[{\"path\":\"@/d\",\"error\":null,\"message\":null},"
                      "{\"path\":\"@/ln\",\"error\":null,\"message\":null},"
                      "{\"path\":\"@/nope\",\"error\":\"file_not_found\",\"message\":\"Error: File '@/nope' not found\"},"
                      "{\"path\":\"/\",\"error\":\"invalid_path\",\"message\":\"Error: Will not remove '/' ('/')\"}]"));
        assert_int_equal(access(P("d"), F_OK), -1);
        assert_int_equal(access(P("new/g.txt"), F_OK), 0);
        stop(h);
}

static void test_upload_download_modes(void **state) {
        WorkerHarness *h = start(false);
        mode_t um = umask(0);
        umask(um);

        expect_json(h, "up", "fs::upload",
                    J("[[[\"@/u/exe\", {\"$bin\": \"#!\"}, 493], [\"@/u/priv\", {\"$bin\": \"p\"}, 384],"
                      " [\"@/u/plain\", {\"$bin\": \"q\"}], [\"@/u/nil\", \"r\", null], [\"@/u/bad\", \"s\", \"755\"],"
                      " [\"@/u/neg\", \"t\", -1], [\"@/u/big\", \"u\", 4096], [\"@/u/setid\", \"v\", 3565]]]"),
                    NULL,
                    J("[{\"path\":\"@/u/exe\",\"error\":null,\"message\":null},"
                      "{\"path\":\"@/u/priv\",\"error\":null,\"message\":null},"
                      "{\"path\":\"@/u/plain\",\"error\":null,\"message\":null},"
                      "{\"path\":\"@/u/nil\",\"error\":null,\"message\":null},"
                      "{\"path\":\"@/u/bad\",\"error\":\"invalid_path\",\"message\":\"invalid entry\"},"
                      "{\"path\":\"@/u/neg\",\"error\":\"invalid_path\",\"message\":\"invalid entry\"},"
                      "{\"path\":\"@/u/big\",\"error\":\"invalid_path\",\"message\":\"invalid entry\"},"
                      "{\"path\":\"@/u/setid\",\"error\":null,\"message\":null}]"));
        struct stat st;
        assert_int_equal(stat(P("u/exe"), &st), 0);
        assert_int_equal(st.st_mode & 07777, 0755);
        assert_int_equal(stat(P("u/priv"), &st), 0);
        assert_int_equal(st.st_mode & 07777, 0600);
        assert_int_equal(stat(P("u/plain"), &st), 0);
        assert_int_equal(st.st_mode & 07777, 0666 & ~um);
        assert_int_equal(stat(P("u/nil"), &st), 0);
        assert_int_equal(st.st_mode & 07777, 0666 & ~um);
        assert_int_equal(stat(P("u/setid"), &st), 0);
        assert_int_equal(st.st_mode & 07777, 0755); /* set-id bits are not given on request */
        assert_int_equal(access(P("u/bad"), F_OK), -1);
        assert_int_equal(access(P("u/neg"), F_OK), -1);
        assert_int_equal(access(P("u/big"), F_OK), -1);

        /* download reports modes, also for a file too large for max_bytes */
        put("u/large", "0123456789", 10);
        assert_int_equal(chmod(P("u/large"), 0700), 0);
        expect_json(h, "down", "fs::download", J("[[\"@/u/exe\", \"@/u/missing\", \"@/u/large\", \"@/u/priv\"]]"),
                    "{\"max_bytes\": 4}",
                    J("[{\"path\":\"@/u/exe\",\"content\":{\"$bin\":\"#!\"},\"error\":null,\"message\":null,\"mode\":493},"
                      "{\"path\":\"@/u/missing\",\"content\":null,\"error\":\"file_not_found\","
                      "\"message\":\"Error: File '@/u/missing' not found\",\"mode\":null},"
                      "{\"path\":\"@/u/large\",\"content\":null,\"error\":\"too_large\",\"message\":\"Error: File "
                      "'@/u/large' (10 bytes) does not fit in this response: 2 bytes left; download it separately\",\"mode\":448},"
                      "{\"path\":\"@/u/priv\",\"content\":{\"$bin\":\"p\"},\"error\":null,\"message\":null,\"mode\":384}]"));
        /* without max_bytes it fits */
        WorkerFrame f = {};
        call_json(h, "down2", "fs::download", J("[[\"@/u/large\"]]"), NULL, &f);
        assert_str_field(&f.value->via.array.ptr[0], "error", NULL);
        assert_int_equal(field(&f.value->via.array.ptr[0], "mode")->via.u64, 0700);
        worker_frame_done(&f);

        /* ls entries carry the mode too */
        call_json(h, "ls", "fs::ls", J("[\"@/u\"]"), NULL, &f);
        const msgpack_object *entries = field(f.value, "entries");
        assert_str_field(&entries->via.array.ptr[0], "path", P("u/exe"));
        assert_int_equal(field(&entries->via.array.ptr[0], "mode")->via.u64, 0755);
        worker_frame_done(&f);
        stop(h);
}

static void test_read_stream(void **state) {
        WorkerHarness *h = start(false);
        size_t size = 3 * 1024 * 1024 + 512 * 1024 + 7, got_size, items, largest;
        uint8_t *data = malloc(size), *got;
        WorkerFrame t = {};

        random_bytes(data, size);
        put("r/data", data, size);
        put("r/empty", "", 0);

        /* the default chunk: 1 MiB */
        assert_int_equal(worker_harness_call(h, "rs1", "fs::read_stream", "stream", J("[\"@/r/data\"]"), NULL, -1), 0);
        collect_bin_items(h, "rs1", &got, &got_size, &items, &largest, &t);
        assert_int_equal(t.kind, FRAME_END);
        worker_frame_done(&t);
        assert_int_equal(got_size, size);
        assert_memory_equal(got, data, size);
        assert_int_equal(items, 4);
        assert_int_equal(largest, 1024 * 1024);
        free(got);

        /* an odd chunk size: every item at most that */
        assert_int_equal(worker_harness_call(h, "rs2", "fs::read_stream", "stream", J("[\"@/r/data\"]"),
                                             "{\"chunk_size\": 1000000}", -1), 0);
        collect_bin_items(h, "rs2", &got, &got_size, &items, &largest, &t);
        assert_int_equal(t.kind, FRAME_END);
        worker_frame_done(&t);
        assert_int_equal(got_size, size);
        assert_memory_equal(got, data, size);
        assert_int_equal(items, (size + 999999) / 1000000);
        assert_int_equal(largest, 1000000);
        free(got);

        /* an empty file: no items, then the end */
        assert_int_equal(worker_harness_call(h, "rs3", "fs::read_stream", "stream", J("[\"@/r/empty\"]"), NULL, -1), 0);
        collect_bin_items(h, "rs3", &got, &got_size, &items, &largest, &t);
        assert_int_equal(t.kind, FRAME_END);
        worker_frame_done(&t);
        assert_int_equal(items, 0);
        free(got);

        /* errors are the call's, typed with the fs error code */
        assert_int_equal(worker_harness_call(h, "rs4", "fs::read_stream", "stream", J("[\"@/r/missing\"]"), NULL, -1), 0);
        expect_error(h, "rs4", "file_not_found", P("r/missing"));
        assert_int_equal(worker_harness_call(h, "rs5", "fs::read_stream", "stream", J("[\"@/r\"]"), NULL, -1), 0);
        expect_error(h, "rs5", "is_directory", NULL);
        assert_int_equal(worker_harness_call(h, "rs6", "fs::read_stream", "stream", "[\"r/data\"]", NULL, -1), 0);
        expect_error(h, "rs6", "invalid_path", "absolute");
        assert_int_equal(worker_harness_call(h, "rs7", "fs::read_stream", "stream", J("[\"@/r/data\", 0]"), NULL, -1), 0);
        expect_error(h, "rs7", "ValueError", "chunk_size");
        assert_int_equal(worker_harness_call(h, "rs8", "fs::read_stream", "stream", J("[\"@/r/data\", 16777217]"), NULL, -1),
                         0);
        expect_error(h, "rs8", "ValueError", "chunk_size");
        /* it is a stream: a unary call is refused */
        assert_int_equal(worker_harness_call(h, "rs9", "fs::read_stream", "unary", J("[\"@/r/data\"]"), NULL, -1), 0);
        expect_error(h, "rs9", "BadRequest", NULL);

        /* cancelled after the first item */
        assert_int_equal(worker_harness_call(h, "rs10", "fs::read_stream", "stream", J("[\"@/r/data\"]"),
                                             "{\"chunk_size\": 4096}", -1), 0);
        WorkerFrame f = {};
        assert_int_equal(worker_harness_read_for(h, "rs10", TIMEOUT_MS, &f), 0);
        assert_int_equal(f.kind, FRAME_ITEM);
        worker_frame_done(&f);
        assert_int_equal(worker_harness_cancel(h, "rs10", NULL), 0);
        for (;;) {
                assert_int_equal(worker_harness_read_for(h, "rs10", TIMEOUT_MS, &f), 0);
                if (f.kind != FRAME_ITEM)
                        break;
                worker_frame_done(&f);
        }
        assert_int_equal(f.kind, FRAME_ERROR);
        assert_true(f.cancelled);
        worker_frame_done(&f);
        free(data);
        stop(h);
}

static void test_write_stream(void **state) {
        WorkerHarness *h = start(false);
        size_t size = 1000001;
        uint8_t *data = malloc(size);
        struct stat st;
        char *c;
        size_t n;

        random_bytes(data, size);

        /* parents made, the content in order, renamed into place at the end with its mode */
        assert_int_equal(worker_harness_call(h, "ws1", "fs::write_stream", "bidi", J("[\"@/w/sub/out.bin\"]"),
                                             "{\"mode\": 488}", -1), 0);
        wait_for_prefixed("w/sub", ".#out.bin.", 1);
        send_bin(h, "ws1", data, 300000);
        send_bin(h, "ws1", data + 300000, 1);
        send_bin(h, "ws1", data + 300001, size - 300001);
        assert_int_equal(access(P("w/sub/out.bin"), F_OK), -1); /* not before the end */
        assert_int_equal(worker_harness_end_in(h, "ws1"), 0);
        char *items = NULL;
        WorkerFrame t = {};
        assert_int_equal(worker_harness_collect(h, "ws1", TIMEOUT_MS, &items, &t), 0);
        assert_int_equal(t.kind, FRAME_END);
        worker_frame_done(&t);
        assert_string_equal(items, J("[{\"path\":\"@/w/sub/out.bin\",\"size\":1000001}]"));
        free(items);
        c = slurp(P("w/sub/out.bin"), &n);
        assert_int_equal(n, size);
        assert_memory_equal(c, data, size);
        free(c);
        assert_int_equal(stat(P("w/sub/out.bin"), &st), 0);
        assert_int_equal(st.st_mode & 07777, 0750);
        assert_int_equal(count_prefixed(P("w/sub"), ".#"), 0);

        /* an empty inbox: an empty file (str items count as bytes too) */
        assert_int_equal(worker_harness_call(h, "ws2", "fs::write_stream", "bidi", J("[\"@/w/empty\"]"), NULL, -1), 0);
        assert_int_equal(worker_harness_end_in(h, "ws2"), 0);
        assert_int_equal(worker_harness_collect(h, "ws2", TIMEOUT_MS, &items, &t), 0);
        assert_int_equal(t.kind, FRAME_END);
        worker_frame_done(&t);
        assert_string_equal(items, J("[{\"path\":\"@/w/empty\",\"size\":0}]"));
        free(items);
        assert_int_equal(stat(P("w/empty"), &st), 0);
        assert_int_equal(st.st_size, 0);

        /* cancelled: the old file stays, the temporary file goes */
        puts_file("w/keep", "old");
        assert_int_equal(worker_harness_call(h, "ws3", "fs::write_stream", "bidi", J("[\"@/w/keep\"]"), NULL, -1), 0);
        send_bin(h, "ws3", "new data", 8);
        wait_for_prefixed("w", ".#keep.", 1);
        assert_int_equal(worker_harness_cancel(h, "ws3", NULL), 0);
        expect_error(h, "ws3", "Cancelled", NULL);
        wait_for_prefixed("w", ".#", 0);
        c = slurp(P("w/keep"), NULL);
        assert_string_equal(c, "old");
        free(c);

        /* an item that is not bytes fails the call, and nothing is left */
        assert_int_equal(worker_harness_call(h, "ws4", "fs::write_stream", "bidi", J("[\"@/w/bad\"]"), NULL, -1), 0);
        send_bin(h, "ws4", "ok", 2);
        assert_int_equal(worker_harness_send_in(h, "ws4", "{\"x\": 1}"), 0);
        expect_error(h, "ws4", "TypeError", "bytes");
        wait_for_prefixed("w", ".#", 0);
        assert_int_equal(access(P("w/bad"), F_OK), -1);

        /* path and argument errors, before any inbox item */
        assert_int_equal(worker_harness_call(h, "ws5", "fs::write_stream", "bidi", J("[\"@/w/keep\"]"),
                                             "{\"overwrite\": false}", -1), 0);
        expect_error(h, "ws5", "already_exists", P("w/keep"));
        assert_int_equal(worker_harness_call(h, "ws6", "fs::write_stream", "bidi", J("[\"@/w/keep/x\"]"), NULL, -1), 0);
        expect_error(h, "ws6", "not_a_directory", NULL);
        assert_int_equal(worker_harness_call(h, "ws7", "fs::write_stream", "bidi", J("[\"@/w\"]"), NULL, -1), 0);
        expect_error(h, "ws7", "is_directory", NULL);
        assert_int_equal(worker_harness_call(h, "ws8", "fs::write_stream", "bidi", "[\"rel\"]", NULL, -1), 0);
        expect_error(h, "ws8", "invalid_path", NULL);
        assert_int_equal(worker_harness_call(h, "ws9", "fs::write_stream", "bidi", J("[\"@/w/m\"]"), "{\"mode\": 4096}", -1),
                         0);
        expect_error(h, "ws9", "ValueError", "mode");
        assert_int_equal(count_prefixed(P("w"), ".#"), 0);

        /* the worker shutting down while a write is open removes its temporary file */
        assert_int_equal(worker_harness_call(h, "ws10", "fs::write_stream", "bidi", J("[\"@/w/exit\"]"), NULL, -1), 0);
        send_bin(h, "ws10", "partial", 7);
        wait_for_prefixed("w", ".#exit.", 1);
        stop(h);
        assert_int_equal(count_prefixed(P("w"), ".#"), 0);
        assert_int_equal(access(P("w/exit"), F_OK), -1);
        free(data);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_upload_download_round_trip, test_dir_setup, test_dir_teardown),
                cmocka_unit_test_setup_teardown(test_download_budget, test_dir_setup, test_dir_teardown),
                cmocka_unit_test_setup_teardown(test_read_write_edit, test_dir_setup, test_dir_teardown),
                cmocka_unit_test_setup_teardown(test_ls_grep_glob, test_dir_setup, test_dir_teardown),
                cmocka_unit_test_setup_teardown(test_argument_errors, test_dir_setup, test_dir_teardown),
                cmocka_unit_test_setup_teardown(test_concurrent_calls, test_dir_setup, test_dir_teardown),
                cmocka_unit_test_setup_teardown(test_under_seccomp, test_dir_setup, test_dir_teardown),
                cmocka_unit_test_setup_teardown(test_mkdir_batch, test_dir_setup, test_dir_teardown),
                cmocka_unit_test_setup_teardown(test_stat_move_remove, test_dir_setup, test_dir_teardown),
                cmocka_unit_test_setup_teardown(test_upload_download_modes, test_dir_setup, test_dir_teardown),
                cmocka_unit_test_setup_teardown(test_read_stream, test_dir_setup, test_dir_teardown),
                cmocka_unit_test_setup_teardown(test_write_stream, test_dir_setup, test_dir_teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}

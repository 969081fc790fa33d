/* SPDX-License-Identifier: MIT */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "fs-result.h"
#include "test-mp.h"

typedef struct Value {
        Buffer b;
        msgpack_unpacked u;
} Value;

static const msgpack_object *value(Value *v, const char *json) {
        return test_mp(json, &v->b, &v->u);
}

static void value_done(Value *v) {
        msgpack_unpacked_destroy(&v->u);
        buffer_done(&v->b);
}

static void test_files(void **state) {
        agentix_error e = AGENTIX_ERROR_NULL;
        agentix_file_result *f = NULL;
        Value v;

        /* download: content bytes (NULs included), per-file errors, input order. */
        assert_int_equal(fs_result_files(value(&v, "[{\"path\":\"/a\",\"content\":\"bin:x\\u0000y\",\"error\":null,"
                                                    "\"message\":null},"
                                                    "{\"path\":\"/b\",\"content\":null,\"error\":\"file_not_found\","
                                                    "\"message\":\"Error: File '/b' not found\"}]"),
                                         2, &f, &e),
                         0);
        value_done(&v);
        assert_string_equal(f[0].path, "/a");
        assert_int_equal(f[0].size, 3);
        assert_memory_equal(f[0].content, "x\0y", 3);
        assert_null(f[0].error);
        assert_string_equal(f[1].path, "/b");
        assert_null(f[1].content);
        assert_string_equal(f[1].error, "file_not_found");
        assert_string_equal(f[1].message, "Error: File '/b' not found");
        agentix_file_results_free(f, 2);

        /* upload results have no content; a nil path (malformed entry) is fine. */
        assert_int_equal(fs_result_files(value(&v, "[{\"path\":null,\"error\":\"invalid_path\",\"message\":\"invalid entry\"}]"),
                                         1, &f, &e),
                         0);
        value_done(&v);
        assert_null(f[0].path);
        assert_string_equal(f[0].error, "invalid_path");
        agentix_file_results_free(f, 1);

        /* One answer per input, or the result is not usable. */
        assert_int_equal(fs_result_files(value(&v, "[{\"path\":\"/a\"}]"), 2, &f, &e), -EPROTO);
        value_done(&v);
        assert_int_equal(e.kind, AGENTIX_E_PROTOCOL);
        assert_int_equal(fs_result_files(value(&v, "[{\"path\":\"/a\"},3]"), 2, &f, &e), -EPROTO);
        value_done(&v);
        assert_int_equal(fs_result_files(value(&v, "[{\"path\":7}]"), 1, &f, &e), -EPROTO);
        value_done(&v);
        assert_int_equal(fs_result_files(value(&v, "{}"), 0, &f, &e), -EPROTO);
        value_done(&v);
        agentix_error_done(&e);
}

static void test_read(void **state) {
        agentix_error e = AGENTIX_ERROR_NULL;
        agentix_read_result r;
        Value v;

        assert_int_equal(fs_result_read(value(&v, "{\"content\":\"     1\\tone\\n     2\\ttwo\",\"encoding\":\"utf-8\","
                                                  "\"data\":null,\"total_lines\":3,\"start_line\":1,\"end_line\":2,"
                                                  "\"next_offset\":2,\"truncated\":false,\"error\":null,\"message\":null}"),
                                        &r, &e),
                         0);
        value_done(&v);
        assert_string_equal(r.content, "     1\tone\n     2\ttwo");
        assert_int_equal(r.content_size, strlen(r.content));
        assert_null(r.data);
        assert_int_equal(r.total_lines, 3);
        assert_int_equal(r.start_line, 1);
        assert_int_equal(r.end_line, 2);
        assert_int_equal(r.next_offset, 2);
        agentix_read_result_done(&r);

        /* At EOF of a big file: next_offset and total_lines are nil → -1. Binary: data. */
        assert_int_equal(fs_result_read(value(&v, "{\"content\":null,\"encoding\":\"bytes\",\"data\":\"bin:\\u0000\\u0001\","
                                                  "\"total_lines\":null,\"next_offset\":null,\"truncated\":true}"),
                                        &r, &e),
                         0);
        value_done(&v);
        assert_null(r.content);
        assert_int_equal(r.data_size, 2);
        assert_memory_equal(r.data, "\0\1", 2);
        assert_int_equal(r.total_lines, -1);
        assert_int_equal(r.next_offset, -1);
        assert_true(r.truncated);
        agentix_read_result_done(&r);

        /* An fs error is AGENTIX_E_FILE with the errno of its code. */
        assert_int_equal(fs_result_read(value(&v, "{\"content\":null,\"error\":\"file_not_found\","
                                                  "\"message\":\"Error: File '/nope' not found\"}"),
                                        &r, &e),
                         -ENOENT);
        value_done(&v);
        assert_int_equal(e.kind, AGENTIX_E_FILE);
        assert_string_equal(e.type, "file_not_found");
        assert_string_equal(e.message, "Error: File '/nope' not found");

        assert_int_equal(fs_result_read(value(&v, "{\"content\":3}"), &r, &e), -EPROTO);
        value_done(&v);
        assert_int_equal(fs_result_read(value(&v, "{\"content\":\"x\",\"truncated\":\"yes\"}"), &r, &e), -EPROTO);
        value_done(&v);
        assert_int_equal(fs_result_read(value(&v, "[]"), &r, &e), -EPROTO);
        value_done(&v);
        agentix_error_done(&e);
}

static void test_entries(void **state) {
        agentix_error e = AGENTIX_ERROR_NULL;
        agentix_entries l;
        Value v;

        assert_int_equal(fs_result_entries(value(&v, "{\"entries\":[{\"path\":\"/d/a\",\"is_dir\":true,\"size\":4096,"
                                                     "\"modified_at\":\"2024-05-01T12:34:56.789012+00:00\"},"
                                                     "{\"path\":\"/d/b\",\"is_dir\":false,\"size\":3}],"
                                                     "\"truncated\":false,\"error\":null,\"message\":null}"),
                                           "entries", &l, &e),
                         0);
        value_done(&v);
        assert_int_equal(l.n_entries, 2);
        assert_string_equal(l.entries[0].path, "/d/a");
        assert_true(l.entries[0].is_dir);
        assert_int_equal(l.entries[0].size, 4096);
        assert_string_equal(l.entries[0].modified_at, "2024-05-01T12:34:56.789012+00:00");
        assert_false(l.entries[1].is_dir);
        assert_null(l.entries[1].modified_at);
        agentix_entries_done(&l);

        assert_int_equal(fs_result_entries(value(&v, "{\"matches\":[],\"truncated\":true}"), "matches", &l, &e), 0);
        value_done(&v);
        assert_int_equal(l.n_entries, 0);
        assert_true(l.truncated);
        agentix_entries_done(&l);

        assert_int_equal(fs_result_entries(value(&v, "{\"entries\":null,\"error\":\"not_a_directory\",\"message\":\"m\"}"),
                                           "entries", &l, &e),
                         -ENOTDIR);
        value_done(&v);
        assert_int_equal(e.kind, AGENTIX_E_FILE);
        /* Entries without a path, or of the wrong type, are a protocol error (and free what was read). */
        assert_int_equal(fs_result_entries(value(&v, "{\"entries\":[{\"path\":\"/a\"},{\"is_dir\":true}]}"), "entries",
                                           &l, &e),
                         -EPROTO);
        value_done(&v);
        assert_int_equal(fs_result_entries(value(&v, "{\"entries\":[{\"path\":\"/a\",\"size\":\"big\"}]}"), "entries", &l,
                                           &e),
                         -EPROTO);
        value_done(&v);
        assert_int_equal(fs_result_entries(value(&v, "{\"entries\":{}}"), "entries", &l, &e), -EPROTO);
        value_done(&v);
        agentix_error_done(&e);
}

static void test_matches(void **state) {
        agentix_error e = AGENTIX_ERROR_NULL;
        agentix_matches m;
        Value v;

        assert_int_equal(fs_result_matches(value(&v, "{\"matches\":[{\"path\":\"/a:b\",\"line\":7,\"text\":\"x: y\"},"
                                                     "{\"path\":\"/c\",\"line\":1,\"text\":\"\"}],\"truncated\":true}"),
                                           &m, &e),
                         0);
        value_done(&v);
        assert_int_equal(m.n_matches, 2);
        assert_string_equal(m.matches[0].path, "/a:b");
        assert_int_equal(m.matches[0].line, 7);
        assert_string_equal(m.matches[0].text, "x: y");
        assert_string_equal(m.matches[1].text, "");
        assert_true(m.truncated);
        agentix_matches_done(&m);

        assert_int_equal(fs_result_matches(value(&v, "{\"matches\":[{\"path\":\"/a\",\"line\":-1,\"text\":\"\"}]}"), &m, &e),
                         -EPROTO);
        value_done(&v);
        assert_int_equal(fs_result_matches(value(&v, "{\"matches\":null,\"error\":\"invalid_path\",\"message\":\"m\"}"),
                                           &m, &e),
                         -EINVAL);
        value_done(&v);
        assert_int_equal(e.kind, AGENTIX_E_FILE);
        agentix_error_done(&e);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_files),
                cmocka_unit_test(test_read),
                cmocka_unit_test(test_entries),
                cmocka_unit_test(test_matches),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}

/* SPDX-License-Identifier: MIT */
/* fs_ls(): sorted entries with metadata, errors instead of silent empty lists. */
#include "test-fs-util.h"

static void test_listing(void **state) {
        puts_file("b.txt", "12345");
        puts_file(".hidden", "h");
        puts_file("a.txt", "");
        puts_file("ünï.txt", "u");
        mkdir_p("zdir/inner");
        assert_int_equal(symlink("zdir", P("link-to-dir")), 0);

        struct timespec ts[2] = { { .tv_sec = 1700000000, .tv_nsec = 123456789 },
                                  { .tv_sec = 1700000000, .tv_nsec = 123456789 } };
        assert_int_equal(utimensat(AT_FDCWD, P("b.txt"), ts, 0), 0);
        assert_int_equal(chmod(P("b.txt"), 04751), 0);

        FsLsResult r = {};
        assert_int_equal(fs_ls(P(""), 0, &r), 0);
        assert_status(&r.status, FS_OK);
        assert_false(r.truncated);
        assert_int_equal(r.n_entries, 6);

        const char *names[] = { ".hidden", "a.txt", "b.txt", "link-to-dir", "zdir", "ünï.txt" };
        for (size_t i = 0; i < 6; i++)
                assert_string_equal(r.entries[i].path, P(names[i]));

        assert_false(r.entries[2].is_dir);
        assert_int_equal(r.entries[2].size, 5);
        char buf[FS_TIMESTAMP_MAX];
        fs_format_timestamp(&r.entries[2].mtime, buf);
        assert_string_equal(buf, "2023-11-14T22:13:20.123456+00:00");
        assert_int_equal(r.entries[2].mode, 04751); /* permission bits, no file type */
        assert_int_equal(r.entries[3].mode, 0777);  /* the link's own */

        assert_false(r.entries[3].is_dir); /* a symlink, not followed */
        assert_true(r.entries[4].is_dir);
        fs_ls_result_done(&r);

        /* a trailing slash does not double in the entries' paths */
        char with_slash[PATH_MAX];
        snprintf(with_slash, sizeof(with_slash), "%s/zdir/", test_dir);
        assert_int_equal(fs_ls(with_slash, 0, &r), 0);
        assert_int_equal(r.n_entries, 1);
        assert_string_equal(r.entries[0].path, P("zdir/inner"));
        fs_ls_result_done(&r);

        /* an empty directory is an empty list, not an error */
        assert_int_equal(fs_ls(P("zdir/inner"), 0, &r), 0);
        assert_status(&r.status, FS_OK);
        assert_int_equal(r.n_entries, 0);
        fs_ls_result_done(&r);

        /* the root works too */
        assert_int_equal(fs_ls("/", 0, &r), 0);
        assert_status(&r.status, FS_OK);
        bool found_tmp = false;
        for (size_t i = 0; i < r.n_entries; i++)
                found_tmp |= streq(r.entries[i].path, "/tmp");
        assert_true(found_tmp);
        fs_ls_result_done(&r);
}

static void test_truncated(void **state) {
        for (int i = 0; i < 10; i++) {
                char name[16];
                snprintf(name, sizeof(name), "f%d", i);
                puts_file(name, "x");
        }
        FsLsResult r = {};
        assert_int_equal(fs_ls(P(""), 4, &r), 0);
        assert_status(&r.status, FS_OK);
        assert_true(r.truncated);
        assert_int_equal(r.n_entries, 4);
        for (size_t i = 1; i < r.n_entries; i++)
                assert_true(strcmp(r.entries[i - 1].path, r.entries[i].path) < 0);
        fs_ls_result_done(&r);
}

static void test_errors(void **state) {
        FsLsResult r = {};

        assert_int_equal(fs_ls(P("missing"), 0, &r), 0);
        assert_status(&r.status, FS_ERROR_FILE_NOT_FOUND);
        assert_null(r.entries);
        fs_ls_result_done(&r);

        puts_file("file", "x");
        assert_int_equal(fs_ls(P("file"), 0, &r), 0);
        assert_status(&r.status, FS_ERROR_NOT_A_DIRECTORY);
        fs_ls_result_done(&r);

        assert_int_equal(fs_ls("relative", 0, &r), 0);
        assert_status(&r.status, FS_ERROR_INVALID_PATH);
        fs_ls_result_done(&r);
}

static void locked_out(void *arg) {
        FsLsResult r = {};
        child_check(fs_ls(P("locked"), 0, &r) == 0);
        child_check(r.status.error == FS_ERROR_PERMISSION_DENIED);
        child_check(r.n_entries == 0);
        fs_ls_result_done(&r);
}

static void test_permission_denied(void **state) {
        puts_file("locked/x", "x");
        assert_int_equal(chmod(P("locked"), 0), 0);
        as_nobody(locked_out, NULL);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_listing, test_dir_setup, test_dir_teardown),
                cmocka_unit_test_setup_teardown(test_truncated, test_dir_setup, test_dir_teardown),
                cmocka_unit_test_setup_teardown(test_errors, test_dir_setup, test_dir_teardown),
                cmocka_unit_test_setup_teardown(test_permission_denied, test_dir_setup, test_dir_teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}

/* SPDX-License-Identifier: MIT */
/* fs_stat(), fs_move(), fs_remove(): single paths, every failure a status. */
#include "test-fs-util.h"

static void test_stat(void **state) {
        FsStatResult r = {};

        put("f", "hello", 5);
        assert_int_equal(chmod(P("f"), 0640), 0);
        assert_int_equal(fs_stat(P("f"), &r), 0);
        assert_status(&r.status, FS_OK);
        assert_int_equal(r.type, FS_TYPE_FILE);
        assert_int_equal(r.size, 5);
        assert_int_equal(r.mode, 0640);
        assert_int_equal(r.uid, getuid());
        assert_true(r.mtime.tv_sec > 0);
        assert_null(r.symlink_target);
        fs_stat_result_done(&r);

        mkdir_p("d");
        assert_int_equal(fs_stat(P("d"), &r), 0);
        assert_int_equal(r.type, FS_TYPE_DIRECTORY);
        fs_stat_result_done(&r);

        /* A link is one, even to nothing. */
        assert_int_equal(symlink("f", P("link")), 0);
        assert_int_equal(symlink("nowhere", P("dangling")), 0);
        assert_int_equal(fs_stat(P("link"), &r), 0);
        assert_int_equal(r.type, FS_TYPE_SYMLINK);
        assert_string_equal(r.symlink_target, "f");
        fs_stat_result_done(&r);
        assert_int_equal(fs_stat(P("dangling"), &r), 0);
        assert_status(&r.status, FS_OK);
        assert_string_equal(r.symlink_target, "nowhere");
        fs_stat_result_done(&r);
        assert_int_equal(mkfifo(P("fifo"), 0600), 0);
        assert_int_equal(fs_stat(P("fifo"), &r), 0);
        assert_int_equal(r.type, FS_TYPE_OTHER);
        fs_stat_result_done(&r);

        assert_int_equal(fs_stat(P("missing"), &r), 0);
        assert_status(&r.status, FS_ERROR_FILE_NOT_FOUND);
        fs_stat_result_done(&r);
        assert_int_equal(fs_stat(P("f/below"), &r), 0);
        assert_status(&r.status, FS_ERROR_FILE_NOT_FOUND);
        fs_stat_result_done(&r);
        assert_int_equal(fs_stat("relative", &r), 0);
        assert_status(&r.status, FS_ERROR_INVALID_PATH);
        fs_stat_result_done(&r);
}

static void test_move(void **state) {
        FsStatus s = {};
        struct stat st;

        put("a", "A", 1);
        assert_int_equal(fs_move(P("a"), P("new/dir/b"), &s), 0); /* parents made */
        assert_status(&s, FS_OK);
        assert_int_equal(access(P("a"), F_OK), -1);
        assert_int_equal(stat(P("new/dir/b"), &st), 0);

        put("c", "C", 1);
        assert_int_equal(fs_move(P("c"), P("new/dir/b"), &s), 0); /* a file is replaced */
        assert_status(&s, FS_OK);
        assert_int_equal(stat(P("new/dir/b"), &st), 0);
        assert_int_equal(st.st_size, 1);

        mkdir_p("full/x");
        mkdir_p("src");
        assert_int_equal(fs_move(P("src"), P("full"), &s), 0);
        assert_status(&s, FS_ERROR_ALREADY_EXISTS);
        fs_status_done(&s);
        assert_int_equal(fs_move(P("src"), P("src/inside"), &s), 0);
        assert_status(&s, FS_ERROR_INVALID_PATH);
        fs_status_done(&s);
        assert_int_equal(fs_move(P("missing"), P("x"), &s), 0);
        assert_status(&s, FS_ERROR_FILE_NOT_FOUND);
        fs_status_done(&s);
        put("file", "x", 1);
        assert_int_equal(fs_move(P("src"), P("file/sub/x"), &s), 0);
        assert_status(&s, FS_ERROR_NOT_A_DIRECTORY);
        fs_status_done(&s);
        assert_int_equal(fs_move(P("src"), "relative", &s), 0);
        assert_status(&s, FS_ERROR_INVALID_PATH);
        fs_status_done(&s);
        assert_int_equal(access(P("src"), F_OK), 0);
}

static void test_remove(void **state) {
        FsStatus s = {};

        mkdir_p("tree/a/b");
        put("tree/a/b/f", "x", 1);
        put("tree/g", "y", 1);
        put("outside", "z", 1);
        assert_int_equal(symlink(P("outside"), P("tree/link")), 0);
        assert_int_equal(fs_remove(P("tree"), &s), 0);
        assert_status(&s, FS_OK);
        assert_int_equal(access(P("tree"), F_OK), -1);
        assert_int_equal(access(P("outside"), F_OK), 0); /* a link's target stays */

        assert_int_equal(symlink(P("outside"), P("link2")), 0);
        assert_int_equal(fs_remove(P("link2"), &s), 0);
        assert_status(&s, FS_OK);
        assert_int_equal(access(P("outside"), F_OK), 0);
        assert_int_equal(fs_remove(P("outside"), &s), 0);
        assert_status(&s, FS_OK);
        assert_int_equal(access(P("outside"), F_OK), -1);

        assert_int_equal(fs_remove(P("missing"), &s), 0);
        assert_status(&s, FS_ERROR_FILE_NOT_FOUND);
        fs_status_done(&s);
        assert_int_equal(fs_remove("/", &s), 0);
        assert_status(&s, FS_ERROR_INVALID_PATH);
        fs_status_done(&s);
        assert_int_equal(fs_remove("/tmp/..", &s), 0);
        assert_status(&s, FS_ERROR_INVALID_PATH);
        fs_status_done(&s);
        assert_int_equal(access("/tmp", F_OK), 0);
}

static void undeletable(void *arg) {
        FsStatus s = {};

        child_check(fs_remove(P("locked/f"), &s) == 0);
        child_check(s.error == FS_ERROR_PERMISSION_DENIED);
        fs_status_done(&s);
        child_check(fs_move(P("locked/f"), P("locked/g"), &s) == 0);
        child_check(s.error == FS_ERROR_PERMISSION_DENIED);
        fs_status_done(&s);
}

static void test_permission_denied(void **state) {
        mkdir_p("locked");
        put("locked/f", "x", 1);
        assert_int_equal(chmod(P("locked"), 0755), 0);
        as_nobody(undeletable, NULL);
        assert_int_equal(access(P("locked/f"), F_OK), 0);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_stat, test_dir_setup, test_dir_teardown),
                cmocka_unit_test_setup_teardown(test_move, test_dir_setup, test_dir_teardown),
                cmocka_unit_test_setup_teardown(test_remove, test_dir_setup, test_dir_teardown),
                cmocka_unit_test_setup_teardown(test_permission_denied, test_dir_setup, test_dir_teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}

/* SPDX-License-Identifier: MIT */
/* fs_mkdir(): mkdir -p, with every failure a status. */
#include "fs-path.h"
#include "test-fs-util.h"

static FsStatus md(const char *path) {
        FsStatus s = {};
        assert_int_equal(fs_mkdir(path, &s), 0);
        return s;
}

static void test_create(void **state) {
        struct stat st;
        FsStatus s = md(P("a/b/c"));

        assert_status(&s, FS_OK);
        assert_null(s.message);
        assert_int_equal(stat(P("a/b/c"), &st), 0);
        assert_true(S_ISDIR(st.st_mode));

        /* existing: fine, and so are a trailing slash, "//", "." and a link to a directory */
        s = md(P("a/b/c"));
        assert_status(&s, FS_OK);
        s = md(P("a//b/./c/d/"));
        assert_status(&s, FS_OK);
        assert_int_equal(stat(P("a/b/c/d"), &st), 0);
        assert_int_equal(symlink("a/b", P("link")), 0);
        s = md(P("link"));
        assert_status(&s, FS_OK);
        s = md(P("link/new"));
        assert_status(&s, FS_OK);
        assert_int_equal(stat(P("a/b/new"), &st), 0);
        s = md("/");
        assert_status(&s, FS_OK);

        /* the mode: 0777 minus the umask */
        mode_t um = umask(027);
        s = md(P("masked"));
        umask(um);
        assert_status(&s, FS_OK);
        assert_int_equal(stat(P("masked"), &st), 0);
        assert_int_equal(st.st_mode & 0777, 0750);
}

/* With an owner for new things (E2B's envd writes for an account), what is made is that
 * account's and what was there stays as it was; files replaced keep their owner. */
static void test_owner(void **state) {
        struct stat st;
        FsStatus s = {};

        if (geteuid() != 0)
                skip(); /* giving files away takes root */
        mkdir_p("old");
        fs_new_owner = (FsOwner) { 4242, 4343 };
        s = md(P("old/new/newer"));
        assert_status(&s, FS_OK);
        assert_int_equal(fs_write(P("old/new/file"), "x", 1, true, &s), 0);
        assert_status(&s, FS_OK);
        assert_int_equal(fs_write(P("old/made/deep/file"), "x", 1, true, &s), 0);
        assert_status(&s, FS_OK);
        fs_new_owner = FS_OWNER_NONE;
        put("old/mine", "y", 1);
        fs_new_owner = (FsOwner) { 4242, 4343 };
        assert_int_equal(fs_write(P("old/mine"), "z", 1, true, &s), 0);
        fs_new_owner = FS_OWNER_NONE;
        assert_status(&s, FS_OK);

        assert_int_equal(stat(P("old"), &st), 0);
        assert_int_equal(st.st_uid, 0);
        for (const char *const *p = (const char *const[]) { "old/new", "old/new/newer", "old/new/file", "old/made",
                                                             "old/made/deep", "old/made/deep/file", NULL };
             *p; p++) {
                assert_int_equal(stat(P(*p), &st), 0);
                assert_int_equal(st.st_uid, 4242);
                assert_int_equal(st.st_gid, 4343);
        }
        assert_int_equal(stat(P("old/mine"), &st), 0);
        assert_int_equal(st.st_uid, 0);
}

static void test_errors(void **state) {
        FsStatus s;

        puts_file("file", "x");
        s = md(P("file"));
        assert_status(&s, FS_ERROR_NOT_A_DIRECTORY);
        assert_non_null(strstr(s.message, "exists and is not a directory"));
        fs_status_done(&s);

        s = md(P("file/sub/deeper"));
        assert_status(&s, FS_ERROR_NOT_A_DIRECTORY);
        assert_non_null(strstr(s.message, "a parent is not a directory"));
        fs_status_done(&s);
        assert_int_equal(access(P("file"), F_OK), 0);

        s = md("relative/dir");
        assert_status(&s, FS_ERROR_INVALID_PATH);
        fs_status_done(&s);
        s = md("");
        assert_status(&s, FS_ERROR_INVALID_PATH);
        fs_status_done(&s);

        assert_int_equal(symlink("nowhere", P("dangling")), 0);
        s = md(P("dangling/x"));
        assert_int_not_equal(s.error, FS_OK);
        fs_status_done(&s);
}

static void unwritable(void *arg) {
        FsStatus s = {};

        child_check(fs_mkdir(P("locked/new"), &s) == 0);
        child_check(s.error == FS_ERROR_PERMISSION_DENIED);
        fs_status_done(&s);
        child_check(fs_mkdir(P("locked/new/deeper"), &s) == 0);
        child_check(s.error == FS_ERROR_PERMISSION_DENIED);
        fs_status_done(&s);
        /* an existing directory needs no permission to be made */
        child_check(fs_mkdir(P("locked/there"), &s) == 0);
        child_check(s.error == FS_OK);
}

static void test_permission_denied(void **state) {
        mkdir_p("locked/there");
        assert_int_equal(chmod(P("locked"), 0755), 0);
        as_nobody(unwritable, NULL);
        assert_int_equal(access(P("locked/new"), F_OK), -1);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_create, test_dir_setup, test_dir_teardown),
                cmocka_unit_test_setup_teardown(test_owner, test_dir_setup, test_dir_teardown),
                cmocka_unit_test_setup_teardown(test_errors, test_dir_setup, test_dir_teardown),
                cmocka_unit_test_setup_teardown(test_permission_denied, test_dir_setup, test_dir_teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}

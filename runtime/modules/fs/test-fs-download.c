/* SPDX-License-Identifier: MIT */
/* fs_download_open(): the file download() streams into a frame (agentix_pack_bin_from_fd()
 * reads it; its handling of a file that changes meanwhile is tested with the worker). */
#include "buffer.h"
#include "test-fs-util.h"

static void test_open(void **state) {
        uint8_t all[256];
        for (unsigned i = 0; i < 256; i++)
                all[i] = (uint8_t) i;
        put("all.bin", all, sizeof(all));
        assert_int_equal(chmod(P("all.bin"), 0754), 0);

        FsStatus s = {};
        uint64_t size = 0;
        unsigned mode = 0;
        int fd = -1;
        assert_int_equal(fs_download_open(P("all.bin"), &fd, &size, &mode, &s), 0);
        assert_status(&s, FS_OK);
        assert_true(fd >= 0);
        assert_int_equal(size, 256);
        assert_int_equal(mode, 0754);
        assert_true(fcntl(fd, F_GETFD) & FD_CLOEXEC);

        uint8_t got[257];
        assert_int_equal(read(fd, got, sizeof(got)), 256);
        assert_memory_equal(got, all, 256);
        close(fd);

        put("empty", "", 0);
        assert_int_equal(fs_download_open(P("empty"), &fd, &size, NULL, &s), 0);
        assert_status(&s, FS_OK);
        assert_int_equal(size, 0);
        close(fd);
}

static void test_errors(void **state) {
        FsStatus s = {};
        uint64_t size = 7;
        int fd = -1;

        assert_int_equal(fs_download_open(P("missing"), &fd, &size, NULL, &s), 0);
        assert_status(&s, FS_ERROR_FILE_NOT_FOUND);
        assert_int_equal(fd, -1);
        assert_int_equal(size, 7);
        fs_status_done(&s);

        mkdir_p("dir");
        assert_int_equal(fs_download_open(P("dir"), &fd, &size, NULL, &s), 0);
        assert_status(&s, FS_ERROR_IS_DIRECTORY);
        fs_status_done(&s);

        assert_int_equal(fs_download_open("relative/x", &fd, &size, NULL, &s), 0);
        assert_status(&s, FS_ERROR_INVALID_PATH);
        fs_status_done(&s);

        assert_int_equal(fs_download_open("/dev/null", &fd, &size, NULL, &s), 0);
        assert_status(&s, FS_ERROR_NOT_A_FILE);
        fs_status_done(&s);
}

static void locked(void *arg) {
        FsStatus s = {};
        uint64_t size;
        int fd = -1;

        child_check(fs_download_open(P("secret"), &fd, &size, NULL, &s) == 0);
        child_check(s.error == FS_ERROR_PERMISSION_DENIED);
        child_check(fd == -1);
        fs_status_done(&s);
}

static void test_permission_denied(void **state) {
        puts_file("secret", "s");
        assert_int_equal(chmod(P("secret"), 0), 0);
        as_nobody(locked, NULL);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_open, test_dir_setup, test_dir_teardown),
                cmocka_unit_test_setup_teardown(test_errors, test_dir_setup, test_dir_teardown),
                cmocka_unit_test_setup_teardown(test_permission_denied, test_dir_setup, test_dir_teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}

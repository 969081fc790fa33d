/* SPDX-License-Identifier: MIT */
/* fs_download_open() and fs_copy_exact(): what download() streams into a frame. */
#include "buffer.h"
#include "test-fs-util.h"

static int to_buffer(const void *data, size_t n, void *userdata) {
        return buffer_append(userdata, data, n);
}

static void test_open(void **state) {
        uint8_t all[256];
        for (unsigned i = 0; i < 256; i++)
                all[i] = (uint8_t) i;
        put("all.bin", all, sizeof(all));

        FsStatus s = {};
        uint64_t size = 0;
        int fd = -1;
        assert_int_equal(fs_download_open(P("all.bin"), &fd, &size, &s), 0);
        assert_status(&s, FS_OK);
        assert_true(fd >= 0);
        assert_int_equal(size, 256);
        assert_true(fcntl(fd, F_GETFD) & FD_CLOEXEC);

        Buffer b = BUFFER_NULL;
        assert_int_equal(fs_copy_exact(fd, size, to_buffer, &b), 0);
        assert_int_equal(b.len, 256);
        assert_memory_equal(buffer_data(&b), all, 256);
        buffer_done(&b);
        close(fd);

        put("empty", "", 0);
        assert_int_equal(fs_download_open(P("empty"), &fd, &size, &s), 0);
        assert_status(&s, FS_OK);
        assert_int_equal(size, 0);
        close(fd);
}

static void test_errors(void **state) {
        FsStatus s = {};
        uint64_t size = 7;
        int fd = -1;

        assert_int_equal(fs_download_open(P("missing"), &fd, &size, &s), 0);
        assert_status(&s, FS_ERROR_FILE_NOT_FOUND);
        assert_int_equal(fd, -1);
        assert_int_equal(size, 7);
        fs_status_done(&s);

        mkdir_p("dir");
        assert_int_equal(fs_download_open(P("dir"), &fd, &size, &s), 0);
        assert_status(&s, FS_ERROR_IS_DIRECTORY);
        fs_status_done(&s);

        assert_int_equal(fs_download_open("relative/x", &fd, &size, &s), 0);
        assert_status(&s, FS_ERROR_INVALID_PATH);
        fs_status_done(&s);

        assert_int_equal(fs_download_open("/dev/null", &fd, &size, &s), 0);
        assert_status(&s, FS_ERROR_NOT_A_FILE);
        fs_status_done(&s);
}

static void locked(void *arg) {
        FsStatus s = {};
        uint64_t size;
        int fd = -1;

        child_check(fs_download_open(P("secret"), &fd, &size, &s) == 0);
        child_check(s.error == FS_ERROR_PERMISSION_DENIED);
        child_check(fd == -1);
        fs_status_done(&s);
}

static void test_permission_denied(void **state) {
        puts_file("secret", "s");
        assert_int_equal(chmod(P("secret"), 0), 0);
        as_nobody(locked, NULL);
}

static void test_file_changes_while_copied(void **state) {
        char data[10240];
        for (size_t i = 0; i < sizeof(data); i++)
                data[i] = (char) ('a' + i % 26);
        put("changing", data, sizeof(data));

        /* grows after the size was taken: exactly the announced bytes */
        FsStatus s = {};
        uint64_t size;
        int fd;
        assert_int_equal(fs_download_open(P("changing"), &fd, &size, &s), 0);
        int w = open(P("changing"), O_WRONLY | O_APPEND | O_CLOEXEC);
        assert_int_equal(loop_write(w, "MORE", 4), 0);
        close(w);
        Buffer b = BUFFER_NULL;
        assert_int_equal(fs_copy_exact(fd, size, to_buffer, &b), 0);
        assert_int_equal(b.len, sizeof(data));
        assert_memory_equal(buffer_data(&b), data, sizeof(data));
        buffer_done(&b);
        close(fd);

        /* shrinks: still exactly the announced length (zero-padded), and -EIO */
        assert_int_equal(fs_download_open(P("changing"), &fd, &size, &s), 0);
        assert_int_equal(truncate(P("changing"), 4096), 0);
        assert_int_equal(fs_copy_exact(fd, size, to_buffer, &b), -EIO);
        assert_int_equal(b.len, size);
        assert_memory_equal(buffer_data(&b), data, 4096);
        for (size_t i = 4096; i < size; i++)
                assert_int_equal(((uint8_t *) buffer_data(&b))[i], 0);
        buffer_done(&b);
        close(fd);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_open, test_dir_setup, test_dir_teardown),
                cmocka_unit_test_setup_teardown(test_errors, test_dir_setup, test_dir_teardown),
                cmocka_unit_test_setup_teardown(test_permission_denied, test_dir_setup, test_dir_teardown),
                cmocka_unit_test_setup_teardown(test_file_changes_while_copied, test_dir_setup, test_dir_teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}

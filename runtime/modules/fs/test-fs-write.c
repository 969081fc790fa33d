/* SPDX-License-Identifier: MIT */
/* fs_write(), fs_write_atomic(), fs_atomic_file_*(): create-only vs overwrite, atomic replacement,
 * modes kept or given, content written piecemeal. */
#include <zlib.h>

#include "fs-path.h"
#include "test-fs-util.h"

static FsStatus wr(const char *path, const void *data, size_t n, bool overwrite) {
        FsStatus s = {};
        assert_int_equal(fs_write(path, data, n, overwrite, &s), 0);
        return s;
}

static void assert_no_temp_files(const char *rel_dir) {
        assert_int_equal(count_prefixed(P(rel_dir), ".#"), 0);
}

static void test_create_with_parents(void **state) {
        FsStatus s = wr(P("a/b/c/new.txt"), "hello\n", 6, false);
        assert_status(&s, FS_OK);
        assert_null(s.message);

        size_t n;
        char *c = slurp(P("a/b/c/new.txt"), &n);
        assert_int_equal(n, 6);
        assert_string_equal(c, "hello\n");
        free(c);

        /* a new file gets 0666 minus the umask */
        struct stat st;
        mode_t um = umask(0);
        umask(um);
        assert_int_equal(stat(P("a/b/c/new.txt"), &st), 0);
        assert_int_equal(st.st_mode & 0777, 0666 & ~um);
        assert_no_temp_files("a/b/c");

        /* empty content, special characters, "//" in the path */
        s = wr(P("a//sp ace 'q\"$x.txt"), "", 0, false);
        assert_status(&s, FS_OK);
        assert_int_equal(stat(P("a/sp ace 'q\"$x.txt"), &st), 0);
        assert_int_equal(st.st_size, 0);
}

static void test_already_exists(void **state) {
        puts_file("f.txt", "original");

        FsStatus s = wr(P("f.txt"), "new", 3, false);
        assert_status(&s, FS_ERROR_ALREADY_EXISTS);
        char *expected;
        assert_true(asprintf(&expected, "Error: File '%s' already exists", P("f.txt")) > 0);
        assert_string_equal(s.message, expected);
        free(expected);
        fs_status_done(&s);

        char *c = slurp(P("f.txt"), NULL);
        assert_string_equal(c, "original");
        free(c);
        assert_no_temp_files("");

        s = wr(P("f.txt"), "replaced", 8, true);
        assert_status(&s, FS_OK);
        c = slurp(P("f.txt"), NULL);
        assert_string_equal(c, "replaced");
        free(c);
        assert_no_temp_files("");
}

static void test_overwrite_keeps_mode_and_owner(void **state) {
        struct stat before, after;

        puts_file("script.sh", "#!/bin/sh\n");
        assert_int_equal(chmod(P("script.sh"), 0750), 0);
        if (getuid() == 0)
                assert_int_equal(chown(P("script.sh"), 65534, 65534), 0);
        assert_int_equal(stat(P("script.sh"), &before), 0);

        FsStatus s = wr(P("script.sh"), "#!/bin/sh\necho hi\n", 18, true);
        assert_status(&s, FS_OK);
        assert_int_equal(stat(P("script.sh"), &after), 0);
        assert_int_equal(after.st_mode & 07777, 0750);
        assert_int_equal(after.st_uid, before.st_uid);
        assert_int_equal(after.st_gid, before.st_gid);
        assert_int_not_equal(after.st_ino, before.st_ino); /* replaced, not rewritten in place */

        /* set-id bits survive the chown too */
        assert_int_equal(chmod(P("script.sh"), 02755), 0);
        s = wr(P("script.sh"), "x", 1, true);
        assert_status(&s, FS_OK);
        assert_int_equal(stat(P("script.sh"), &after), 0);
        assert_int_equal(after.st_mode & 07777, 02755);
}

static int private_writer(int fd, void *userdata) {
        struct stat st;
        assert_int_equal(fstat(fd, &st), 0);
        *(mode_t *) userdata = st.st_mode & 07777;
        return loop_write(fd, "new", 3);
}

static void test_replacement_private_until_done(void **state) {
        mode_t seen = 0;
        FsStatus s = {};
        struct stat st;

        puts_file("shared.txt", "old");
        assert_int_equal(chmod(P("shared.txt"), 04755), 0);
        assert_int_equal(fs_write_atomic(P("shared.txt"), true, private_writer, &seen, &s), 0);
        assert_status(&s, FS_OK);
        assert_int_equal(seen, 0600); /* no set-id, no group/other access while incomplete */
        assert_int_equal(stat(P("shared.txt"), &st), 0);
        assert_int_equal(st.st_mode & 07777, 04755);
}

static int failing_writer(int fd, void *userdata) {
        /* half a file, then a failure (as a full disk would) */
        assert_int_equal(loop_write(fd, "partial", 7), 0);
        return -ENOSPC;
}

static void test_failure_leaves_file_untouched(void **state) {
        struct stat before, after;
        FsStatus s = {};

        puts_file("keep.txt", "precious");
        assert_int_equal(stat(P("keep.txt"), &before), 0);

        assert_int_equal(fs_write_atomic(P("keep.txt"), true, failing_writer, NULL, &s), 0);
        assert_status(&s, FS_ERROR_IO);
        assert_non_null(strstr(s.message, "No space left on device"));
        fs_status_done(&s);

        char *c = slurp(P("keep.txt"), NULL);
        assert_string_equal(c, "precious");
        free(c);
        assert_int_equal(stat(P("keep.txt"), &after), 0);
        assert_int_equal(after.st_ino, before.st_ino);
        assert_no_temp_files("");

        /* a new file that fails is not created at all */
        assert_int_equal(fs_write_atomic(P("never.txt"), false, failing_writer, NULL, &s), 0);
        assert_status(&s, FS_ERROR_IO);
        fs_status_done(&s);
        assert_int_equal(access(P("never.txt"), F_OK), -1);
        assert_no_temp_files("");
}

static void test_symlink_target_replaced(void **state) {
        puts_file("real.txt", "old");
        assert_int_equal(symlink("real.txt", P("link.txt")), 0);

        FsStatus s = wr(P("link.txt"), "new", 3, true);
        assert_status(&s, FS_OK);

        struct stat st;
        assert_int_equal(lstat(P("link.txt"), &st), 0);
        assert_true(S_ISLNK(st.st_mode));
        char *c = slurp(P("real.txt"), NULL);
        assert_string_equal(c, "new");
        free(c);

        /* create-only through a link to an existing file: already exists */
        s = wr(P("link.txt"), "x", 1, false);
        assert_status(&s, FS_ERROR_ALREADY_EXISTS);
        fs_status_done(&s);

        /* a dangling link creates its target */
        assert_int_equal(symlink("sub/target.txt", P("dangling")), 0);
        s = wr(P("dangling"), "made", 4, false);
        assert_status(&s, FS_OK);
        c = slurp(P("sub/target.txt"), NULL);
        assert_string_equal(c, "made");
        free(c);
}

static void test_errors(void **state) {
        FsStatus s;

        mkdir_p("dir");
        s = wr(P("dir"), "x", 1, true);
        assert_status(&s, FS_ERROR_IS_DIRECTORY);
        fs_status_done(&s);

        s = wr(P("dir/"), "x", 1, true);
        assert_status(&s, FS_ERROR_IS_DIRECTORY);
        fs_status_done(&s);

        s = wr("/", "x", 1, true);
        assert_status(&s, FS_ERROR_IS_DIRECTORY);
        fs_status_done(&s);

        puts_file("file", "f");
        s = wr(P("file/child.txt"), "x", 1, true);
        assert_status(&s, FS_ERROR_NOT_A_DIRECTORY);
        fs_status_done(&s);
        s = wr(P("file/deeper/child.txt"), "x", 1, true);
        assert_status(&s, FS_ERROR_NOT_A_DIRECTORY);
        fs_status_done(&s);

        s = wr("relative.txt", "x", 1, true);
        assert_status(&s, FS_ERROR_INVALID_PATH);
        assert_string_equal(s.message, "Error: Path must be absolute: 'relative.txt'");
        fs_status_done(&s);

        s = wr("", "x", 1, true);
        assert_status(&s, FS_ERROR_INVALID_PATH);
        fs_status_done(&s);

        assert_int_equal(mkfifo(P("fifo"), 0644), 0);
        s = wr(P("fifo"), "x", 1, true);
        assert_status(&s, FS_ERROR_NOT_A_FILE);
        fs_status_done(&s);

        /* the path checker also refuses NUL bytes and overlong paths */
        assert_int_equal(fs_path_check("/a\0b", 4, &s), 0);
        assert_status(&s, FS_ERROR_INVALID_PATH);
        assert_string_equal(s.message, "Error: Path contains a NUL byte");
        fs_status_done(&s);
        char *longpath = malloc(PATH_MAX + 10);
        memset(longpath, 'a', PATH_MAX + 9);
        longpath[0] = '/';
        longpath[PATH_MAX + 9] = 0;
        s = wr(longpath, "x", 1, true);
        assert_status(&s, FS_ERROR_INVALID_PATH);
        fs_status_done(&s);
        free(longpath);
        assert_no_temp_files("");
}

static void test_binary_round_trip(void **state) {
        uint8_t all[512];
        for (unsigned i = 0; i < sizeof(all); i++)
                all[i] = (uint8_t) (i * 7 + 3);
        all[0] = 0;
        all[511] = 0;

        FsStatus s = wr(P("bin/all.bin"), all, sizeof(all), false);
        assert_status(&s, FS_OK);
        size_t n;
        char *c = slurp(P("bin/all.bin"), &n);
        assert_int_equal(n, sizeof(all));
        assert_memory_equal(c, all, sizeof(all));
        free(c);
}

static void unwritable(void *arg) {
        FsStatus s = {};

        child_check(fs_write(P("locked/new.txt"), "x", 1, false, &s) == 0);
        child_check(s.error == FS_ERROR_PERMISSION_DENIED);
        fs_status_done(&s);
        child_check(fs_write(P("locked/existing.txt"), "x", 1, true, &s) == 0);
        child_check(s.error == FS_ERROR_PERMISSION_DENIED);
        fs_status_done(&s);
        child_check(fs_write(P("locked/sub/new.txt"), "x", 1, false, &s) == 0);
        child_check(s.error == FS_ERROR_PERMISSION_DENIED);
        fs_status_done(&s);
}

static void test_permission_denied(void **state) {
        mkdir_p("locked");
        puts_file("locked/existing.txt", "keep");
        assert_int_equal(chmod(P("locked"), 0755), 0);
        as_nobody(unwritable, NULL);

        char *c = slurp(P("locked/existing.txt"), NULL);
        assert_string_equal(c, "keep");
        free(c);
        assert_no_temp_files("locked");
}

static mode_t mode_of(const char *rel) {
        struct stat st;
        assert_int_equal(stat(P(rel), &st), 0);
        return st.st_mode & 07777;
}

/* A given mode is exact: no umask, set-id bits dropped, the replaced file's mode ignored. */
static void test_given_mode(void **state) {
        FsStatus s = {};
        mode_t um = umask(022);

        assert_int_equal(fs_write_mode(P("m/exe"), "#!/bin/sh\n", 10, false, 0755, &s), 0);
        assert_status(&s, FS_OK);
        assert_int_equal(mode_of("m/exe"), 0755);

        assert_int_equal(fs_write_mode(P("m/open"), "x", 1, false, 0666, &s), 0);
        assert_status(&s, FS_OK);
        assert_int_equal(mode_of("m/open"), 0666); /* not 0644: the umask does not apply */

        assert_int_equal(fs_write_mode(P("m/none"), "x", 1, false, 0, &s), 0);
        assert_status(&s, FS_OK);
        assert_int_equal(mode_of("m/none"), 0);

        assert_int_equal(fs_write_mode(P("m/setid"), "x", 1, false, 06755, &s), 0);
        assert_status(&s, FS_OK);
        assert_int_equal(mode_of("m/setid"), 0755);
        assert_int_equal(fs_write_mode(P("m/sticky"), "x", 1, false, 01700, &s), 0);
        assert_status(&s, FS_OK);
        assert_int_equal(mode_of("m/sticky"), 01700);

        /* replacing: the given mode wins over the old file's */
        assert_int_equal(chmod(P("m/exe"), 0600), 0);
        assert_int_equal(fs_write_mode(P("m/exe"), "y", 1, true, 0750, &s), 0);
        assert_status(&s, FS_OK);
        assert_int_equal(mode_of("m/exe"), 0750);
        char *c = slurp(P("m/exe"), NULL);
        assert_string_equal(c, "y");
        free(c);

        /* FS_MODE_DEFAULT keeps it */
        assert_int_equal(fs_write_mode(P("m/exe"), "z", 1, true, FS_MODE_DEFAULT, &s), 0);
        assert_status(&s, FS_OK);
        assert_int_equal(mode_of("m/exe"), 0750);
        umask(um);
        assert_no_temp_files("m");
}

/* The pieces fs.write_stream uses: open, write in parts, commit or drop. */
static void test_atomic_file(void **state) {
        _cleanup_(fs_atomic_file_freep) FsAtomicFile *f = NULL;
        FsStatus s = {};
        struct stat st;

        assert_int_equal(fs_atomic_file_open(P("a/b/streamed"), true, 0751, &f, &s), 0);
        assert_status(&s, FS_OK);
        assert_non_null(f);
        /* the parents are there, the target is not yet; the temporary file is private */
        assert_int_equal(access(P("a/b/streamed"), F_OK), -1);
        assert_int_equal(count_prefixed(P("a/b"), ".#streamed."), 1);
        assert_int_equal(fstat(fs_atomic_file_fd(f), &st), 0);
        assert_int_equal(st.st_mode & 07777, 0600);
        for (int i = 0; i < 3; i++)
                assert_int_equal(loop_write(fs_atomic_file_fd(f), "part;", 5), 0);
        assert_int_equal(fs_atomic_file_commit(f, &s), 0);
        assert_status(&s, FS_OK);
        f = fs_atomic_file_free(f);
        char *c = slurp(P("a/b/streamed"), NULL);
        assert_string_equal(c, "part;part;part;");
        free(c);
        assert_int_equal(mode_of("a/b/streamed"), 0751);
        assert_no_temp_files("a/b");

        /* dropped without a commit: the old file is untouched, nothing left behind */
        assert_int_equal(fs_atomic_file_open(P("a/b/streamed"), true, FS_MODE_DEFAULT, &f, &s), 0);
        assert_status(&s, FS_OK);
        assert_int_equal(loop_write(fs_atomic_file_fd(f), "half", 4), 0);
        f = fs_atomic_file_free(f);
        c = slurp(P("a/b/streamed"), NULL);
        assert_string_equal(c, "part;part;part;");
        free(c);
        assert_no_temp_files("a/b");

        /* create-only: refused at open, and again at commit when the file appeared meanwhile */
        assert_int_equal(fs_atomic_file_open(P("a/b/streamed"), false, FS_MODE_DEFAULT, &f, &s), 0);
        assert_status(&s, FS_ERROR_ALREADY_EXISTS);
        assert_null(f);
        fs_status_done(&s);
        assert_int_equal(fs_atomic_file_open(P("a/b/late"), false, FS_MODE_DEFAULT, &f, &s), 0);
        assert_status(&s, FS_OK);
        puts_file("a/b/late", "first");
        assert_int_equal(fs_atomic_file_commit(f, &s), 0);
        assert_status(&s, FS_ERROR_ALREADY_EXISTS);
        fs_status_done(&s);
        f = fs_atomic_file_free(f);
        c = slurp(P("a/b/late"), NULL);
        assert_string_equal(c, "first");
        free(c);
        assert_no_temp_files("a/b");

        /* path errors come from open */
        puts_file("plain", "p");
        assert_int_equal(fs_atomic_file_open(P("plain/x"), true, FS_MODE_DEFAULT, &f, &s), 0);
        assert_status(&s, FS_ERROR_NOT_A_DIRECTORY);
        assert_null(f);
        fs_status_done(&s);
        assert_int_equal(fs_atomic_file_open(P("a"), true, FS_MODE_DEFAULT, &f, &s), 0);
        assert_status(&s, FS_ERROR_IS_DIRECTORY);
        fs_status_done(&s);
        assert_int_equal(fs_atomic_file_open("rel", true, FS_MODE_DEFAULT, &f, &s), 0);
        assert_status(&s, FS_ERROR_INVALID_PATH);
        fs_status_done(&s);
}

/* data as a gzip member, into a malloc()ed buffer. */
static uint8_t *gzip_of(const void *data, size_t size, size_t *ret_n) {
        z_stream z = {};
        size_t cap = compressBound(size) + 64;
        uint8_t *out = malloc(cap);

        assert_non_null(out);
        assert_int_equal(deflateInit2(&z, Z_BEST_SPEED, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY), Z_OK);
        z.next_in = (Bytef *) data;
        z.avail_in = (uInt) size;
        z.next_out = out;
        z.avail_out = (uInt) cap;
        assert_int_equal(deflate(&z, Z_FINISH), Z_STREAM_END);
        *ret_n = z.total_out;
        deflateEnd(&z);
        return out;
}

static void test_gunzip(void **state) {
        size_t big_n = 3 * 1024 * 1024 + 17, gz_n, gz2_n, n;
        _cleanup_free_ uint8_t *big = malloc(big_n), *gz = NULL, *two = NULL;
        _cleanup_free_ char *back = NULL;
        FsStatus s = {};

        /* Larger than one inflate chunk, and not all alike. */
        assert_non_null(big);
        for (size_t i = 0; i < big_n; i++)
                big[i] = (uint8_t) (i * 7 + i / 4096);
        gz = gzip_of(big, big_n, &gz_n);
        assert_int_equal(fs_write_gunzip(P("deep/big"), gz, gz_n, true, FS_MODE_DEFAULT, &s), 0);
        assert_status(&s, FS_OK);
        back = slurp(P("deep/big"), &n);
        assert_int_equal(n, big_n);
        assert_memory_equal(back, big, big_n);

        /* Two members one after another inflate to both, in order. */
        free(gz);
        gz = gzip_of("one,", 4, &gz_n);
        two = gzip_of("two", 3, &gz2_n);
        gz = realloc(gz, gz_n + gz2_n);
        memcpy(gz + gz_n, two, gz2_n);
        assert_int_equal(fs_write_gunzip(P("both"), gz, gz_n + gz2_n, true, 0640, &s), 0);
        assert_status(&s, FS_OK);
        free(back);
        back = slurp(P("both"), &n);
        assert_int_equal(n, 7);
        assert_memory_equal(back, "one,two", 7);

        /* Not gzip, cut short, empty: an error, and the file as it was. */
        assert_int_equal(fs_write_gunzip(P("both"), "plain text", 10, true, FS_MODE_DEFAULT, &s), 0);
        assert_status(&s, FS_ERROR_IO);
        assert_non_null(strstr(s.message, "not valid gzip"));
        fs_status_done(&s);
        assert_int_equal(fs_write_gunzip(P("both"), gz, gz_n - 5, true, FS_MODE_DEFAULT, &s), 0);
        assert_status(&s, FS_ERROR_IO);
        fs_status_done(&s);
        assert_int_equal(fs_write_gunzip(P("both"), "", 0, true, FS_MODE_DEFAULT, &s), 0);
        assert_status(&s, FS_ERROR_IO);
        fs_status_done(&s);
        free(back);
        back = slurp(P("both"), &n);
        assert_memory_equal(back, "one,two", 7);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_create_with_parents, test_dir_setup, test_dir_teardown),
                cmocka_unit_test_setup_teardown(test_already_exists, test_dir_setup, test_dir_teardown),
                cmocka_unit_test_setup_teardown(test_overwrite_keeps_mode_and_owner, test_dir_setup, test_dir_teardown),
                cmocka_unit_test_setup_teardown(test_failure_leaves_file_untouched, test_dir_setup, test_dir_teardown),
                cmocka_unit_test_setup_teardown(test_replacement_private_until_done, test_dir_setup, test_dir_teardown),
                cmocka_unit_test_setup_teardown(test_symlink_target_replaced, test_dir_setup, test_dir_teardown),
                cmocka_unit_test_setup_teardown(test_errors, test_dir_setup, test_dir_teardown),
                cmocka_unit_test_setup_teardown(test_binary_round_trip, test_dir_setup, test_dir_teardown),
                cmocka_unit_test_setup_teardown(test_permission_denied, test_dir_setup, test_dir_teardown),
                cmocka_unit_test_setup_teardown(test_given_mode, test_dir_setup, test_dir_teardown),
                cmocka_unit_test_setup_teardown(test_atomic_file, test_dir_setup, test_dir_teardown),
                cmocka_unit_test_setup_teardown(test_gunzip, test_dir_setup, test_dir_teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}

/* SPDX-License-Identifier: MIT */
/* fs_edit(): string replacement with deepagents 0.7 errors and CRLF handling. */
#include "test-fs-util.h"

static FsEditResult ed(const char *rel, const char *old, const char *new, bool all) {
        FsEditResult r = {};
        assert_int_equal(fs_edit(P(rel), old, strlen(old), new, strlen(new), all, &r), 0);
        return r;
}

static void assert_file(const char *rel, const char *expected) {
        size_t n;
        char *c = slurp(P(rel), &n);
        assert_non_null(c);
        assert_int_equal(n, strlen(expected));
        assert_memory_equal(c, expected, n);
        free(c);
}

static void test_single_and_all(void **state) {
        puts_file("a.py", "def f():\n    return 1\n\ndef g():\n    return 1\n");

        FsEditResult r = ed("a.py", "def f", "def h", false);
        assert_status(&r.status, FS_OK);
        assert_int_equal(r.occurrences, 1);
        assert_file("a.py", "def h():\n    return 1\n\ndef g():\n    return 1\n");
        fs_edit_result_done(&r);

        r = ed("a.py", "return 1", "return 2", false);
        assert_status(&r.status, FS_ERROR_MULTIPLE_OCCURRENCES);
        assert_string_equal(r.status.message,
                            "Error: String 'return 1' appears 2 times in file. Use replace_all=True to replace all "
                            "instances, or provide a more specific string with surrounding context.");
        assert_file("a.py", "def h():\n    return 1\n\ndef g():\n    return 1\n");
        fs_edit_result_done(&r);

        r = ed("a.py", "return 1", "return 2", true);
        assert_status(&r.status, FS_OK);
        assert_int_equal(r.occurrences, 2);
        assert_file("a.py", "def h():\n    return 2\n\ndef g():\n    return 2\n");
        fs_edit_result_done(&r);

        /* non-overlapping counting, like str.count(): "aa" occurs twice in "aaaaa" */
        puts_file("aaa", "aaaaa");
        r = ed("aaa", "aa", "b", true);
        assert_int_equal(r.occurrences, 2);
        assert_file("aaa", "bba");
        fs_edit_result_done(&r);

        /* multiline, deleting, identical strings */
        puts_file("m.txt", "one\ntwo\nthree\n");
        r = ed("m.txt", "one\ntwo\n", "", false);
        assert_status(&r.status, FS_OK);
        assert_file("m.txt", "three\n");
        fs_edit_result_done(&r);
        r = ed("m.txt", "three", "three", false);
        assert_status(&r.status, FS_OK);
        assert_file("m.txt", "three\n");
        fs_edit_result_done(&r);
}

static void test_not_found(void **state) {
        puts_file("a.txt", "hello\n");

        FsEditResult r = ed("a.txt", "bye", "x", false);
        assert_status(&r.status, FS_ERROR_STRING_NOT_FOUND);
        assert_string_equal(r.status.message, "Error: String not found in file: 'bye'");
        fs_edit_result_done(&r);

        r = ed("a.txt", "", "x", false);
        assert_status(&r.status, FS_ERROR_STRING_NOT_FOUND);
        assert_file("a.txt", "hello\n");
        fs_edit_result_done(&r);

        r = ed("nope.txt", "a", "b", false);
        assert_status(&r.status, FS_ERROR_FILE_NOT_FOUND);
        char *expected;
        assert_true(asprintf(&expected, "Error: File '%s' not found", P("nope.txt")) > 0);
        assert_string_equal(r.status.message, expected);
        free(expected);
        fs_edit_result_done(&r);
}

static void test_crlf(void **state) {
        /* The file is CRLF; old arrives with LF (as read() shows it): new gets CRLF too. */
        puts_file("win.txt", "line1\r\nline2\r\nline3\r\n");
        FsEditResult r = ed("win.txt", "line1\nline2\n", "first\nsecond\nextra\n", false);
        assert_status(&r.status, FS_OK);
        assert_int_equal(r.occurrences, 1);
        assert_file("win.txt", "first\r\nsecond\r\nextra\r\nline3\r\n");
        fs_edit_result_done(&r);

        /* old sent with CRLF matches as is */
        r = ed("win.txt", "line3\r\n", "last\r\n", false);
        assert_status(&r.status, FS_OK);
        assert_file("win.txt", "first\r\nsecond\r\nextra\r\nlast\r\n");
        fs_edit_result_done(&r);

        /* old with CRLF on an LF file: the LF variant matches, new becomes LF */
        puts_file("unix.txt", "a\nb\nc\n");
        r = ed("unix.txt", "a\r\nb\r\n", "x\r\ny\r\n", false);
        assert_status(&r.status, FS_OK);
        assert_file("unix.txt", "x\ny\nc\n");
        fs_edit_result_done(&r);

        /* replace_all across CRLF lines */
        puts_file("many.txt", "k=1\r\nk=1\r\n");
        r = ed("many.txt", "k=1\n", "k=2\n", true);
        assert_int_equal(r.occurrences, 2);
        assert_file("many.txt", "k=2\r\nk=2\r\n");
        fs_edit_result_done(&r);
}

static void test_unicode_and_keep_mode(void **state) {
        puts_file("u.txt", "naïve café — 中文 🙂\n");
        assert_int_equal(chmod(P("u.txt"), 0600), 0);

        FsEditResult r = ed("u.txt", "中文 🙂", "日本語 🎉", false);
        assert_status(&r.status, FS_OK);
        assert_file("u.txt", "naïve café — 日本語 🎉\n");
        struct stat st;
        assert_int_equal(stat(P("u.txt"), &st), 0);
        assert_int_equal(st.st_mode & 07777, 0600);
        assert_int_equal(count_prefixed(P(""), ".#"), 0);
        fs_edit_result_done(&r);
}

static void test_not_text_and_not_file(void **state) {
        put("bin", "ab\xff\xfe" "cd", 6);
        FsEditResult r = ed("bin", "ab", "x", false);
        assert_status(&r.status, FS_ERROR_NOT_A_TEXT_FILE);
        char *expected;
        assert_true(asprintf(&expected, "Error: File '%s' is not a text file", P("bin")) > 0);
        assert_string_equal(r.status.message, expected);
        free(expected);
        fs_edit_result_done(&r);

        mkdir_p("d");
        r = ed("d", "a", "b", false);
        assert_status(&r.status, FS_ERROR_IS_DIRECTORY);
        fs_edit_result_done(&r);

        assert_int_equal(mkfifo(P("fifo"), 0600), 0);
        r = ed("fifo", "a", "b", false);
        assert_status(&r.status, FS_ERROR_NOT_A_FILE);
        fs_edit_result_done(&r);

        assert_int_equal(fs_edit("rel.txt", "a", 1, "b", 1, false, &r), 0);
        assert_status(&r.status, FS_ERROR_INVALID_PATH);
        fs_edit_result_done(&r);
}

static void test_large_replacements(void **state) {
        /* many small replacements and one big one go through the buffered writer in order */
        size_t n = 200000;
        char *text = malloc(n * 2 + 1);
        for (size_t i = 0; i < n; i++) {
                text[2 * i] = 'x';
                text[2 * i + 1] = ',';
        }
        text[2 * n] = 0;
        puts_file("csv", text);

        char *big = malloc(100001);
        memset(big, 'B', 100000);
        big[100000] = 0;
        FsEditResult r = ed("csv", ",", "; ", true);
        assert_status(&r.status, FS_OK);
        assert_int_equal(r.occurrences, n);
        fs_edit_result_done(&r);
        r = ed("csv", "x; x", big, false);
        assert_status(&r.status, FS_ERROR_MULTIPLE_OCCURRENCES);
        fs_edit_result_done(&r);

        puts_file("one", "head|MARK|tail");
        r = ed("one", "MARK", big, false);
        assert_status(&r.status, FS_OK);
        size_t len;
        char *c = slurp(P("one"), &len);
        assert_int_equal(len, 5 + 100000 + 5);
        assert_memory_equal(c, "head|", 5);
        assert_memory_equal(c + 5 + 100000, "|tail", 5);
        free(c);
        fs_edit_result_done(&r);

        c = slurp(P("csv"), &len);
        assert_int_equal(len, 3 * n);
        for (size_t i = 0; i < n; i++)
                assert_memory_equal(c + 3 * i, "x; ", 3);
        free(c);
        free(big);
        free(text);
}

static void denied(void *arg) {
        FsEditResult r = {};
        child_check(fs_edit(P("ro/f.txt"), "a", 1, "b", 1, false, &r) == 0);
        child_check(r.status.error == FS_ERROR_PERMISSION_DENIED);
        child_check(strstr(r.status.message, "Error: Permission denied editing file '") != NULL);
        fs_edit_result_done(&r);
        child_check(fs_edit(P("ro/secret.txt"), "a", 1, "b", 1, false, &r) == 0);
        child_check(r.status.error == FS_ERROR_PERMISSION_DENIED);
        fs_edit_result_done(&r);
}

static void test_permission_denied(void **state) {
        puts_file("ro/f.txt", "a\n");     /* readable, directory not writable for nobody */
        puts_file("ro/secret.txt", "a\n");
        assert_int_equal(chmod(P("ro/secret.txt"), 0), 0);
        as_nobody(denied, NULL);
        assert_file("ro/f.txt", "a\n");
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_single_and_all, test_dir_setup, test_dir_teardown),
                cmocka_unit_test_setup_teardown(test_not_found, test_dir_setup, test_dir_teardown),
                cmocka_unit_test_setup_teardown(test_crlf, test_dir_setup, test_dir_teardown),
                cmocka_unit_test_setup_teardown(test_unicode_and_keep_mode, test_dir_setup, test_dir_teardown),
                cmocka_unit_test_setup_teardown(test_not_text_and_not_file, test_dir_setup, test_dir_teardown),
                cmocka_unit_test_setup_teardown(test_large_replacements, test_dir_setup, test_dir_teardown),
                cmocka_unit_test_setup_teardown(test_permission_denied, test_dir_setup, test_dir_teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}

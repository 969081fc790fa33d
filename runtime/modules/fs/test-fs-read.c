/* SPDX-License-Identifier: MIT */
/* fs_read(): deepagents 0.7 read semantics. */
#include "fs-line-reader.h"
#include "test-fs-util.h"

static FsReadResult rd(const char *rel, int64_t offset, int64_t limit) {
        FsReadResult r = {};
        assert_int_equal(fs_read(P(rel), offset, limit, &r), 0);
        return r;
}

static void test_numbered_page(void **state) {
        puts_file("a.txt", "alpha\nbeta\ngamma\n");

        FsReadResult r = rd("a.txt", 0, 2000);
        assert_status(&r.status, FS_OK);
        assert_false(r.binary);
        assert_string_equal(r.data, "     1\talpha\n     2\tbeta\n     3\tgamma");
        assert_int_equal(r.total_lines, 3);
        assert_int_equal(r.start_line, 1);
        assert_int_equal(r.end_line, 3);
        assert_int_equal(r.next_offset, -1);
        assert_false(r.truncated);
        assert_null(r.status.message);
        fs_read_result_done(&r);

        /* offset/limit window in the middle */
        r = rd("a.txt", 1, 1);
        assert_string_equal(r.data, "     2\tbeta");
        assert_int_equal(r.start_line, 2);
        assert_int_equal(r.end_line, 2);
        assert_int_equal(r.next_offset, 2);
        assert_int_equal(r.total_lines, 3);
        fs_read_result_done(&r);

        /* the last page reaches EOF exactly */
        r = rd("a.txt", 2, 1);
        assert_string_equal(r.data, "     3\tgamma");
        assert_int_equal(r.next_offset, -1);
        fs_read_result_done(&r);
}

static void test_offsets_and_limits(void **state) {
        puts_file("a.txt", "one\ntwo\nthree");

        FsReadResult r = rd("a.txt", -5, 1);
        assert_status(&r.status, FS_OK);
        assert_string_equal(r.data, "     1\tone");
        fs_read_result_done(&r);

        r = rd("a.txt", 0, 0);
        assert_status(&r.status, FS_OK);
        assert_true(r.no_lines_requested);
        assert_string_equal(r.data, "");
        assert_int_equal(r.start_line, 0);
        fs_read_result_done(&r);

        r = rd("a.txt", 0, -3);
        assert_true(r.no_lines_requested);
        fs_read_result_done(&r);

        r = rd("a.txt", 3, 10);
        assert_status(&r.status, FS_ERROR_INVALID_OFFSET);
        assert_string_equal(r.status.message, "Line offset 3 exceeds file length (3 lines)");
        assert_null(r.data);
        fs_read_result_done(&r);

        r = rd("a.txt", 1000000, 10);
        assert_status(&r.status, FS_ERROR_INVALID_OFFSET);
        assert_string_equal(r.status.message, "Line offset 1000000 exceeds file length (3 lines)");
        fs_read_result_done(&r);

        /* the last line has no newline and still counts */
        r = rd("a.txt", 2, 5);
        assert_string_equal(r.data, "     3\tthree");
        assert_int_equal(r.total_lines, 3);
        fs_read_result_done(&r);
}

static void test_empty_file(void **state) {
        puts_file("empty", "");

        FsReadResult r = rd("empty", 0, 100);
        assert_status(&r.status, FS_OK);
        assert_string_equal(r.data, "");
        assert_string_equal(r.status.message, "System reminder: File exists but has empty contents");
        assert_int_equal(r.total_lines, 0);
        fs_read_result_done(&r);

        /* the reminder wins over limit <= 0 */
        r = rd("empty", 0, 0);
        assert_string_equal(r.status.message, FS_READ_EMPTY_MESSAGE);
        fs_read_result_done(&r);
}

static void test_line_endings(void **state) {
        /* CRLF, a lone CR and LF all end lines (Python universal newlines) */
        puts_file("crlf.txt", "a\r\nb\rc\nd\r\n\r\ne");

        FsReadResult r = rd("crlf.txt", 0, 100);
        assert_string_equal(r.data, "     1\ta\n     2\tb\n     3\tc\n     4\td\n     5\t\n     6\te");
        assert_int_equal(r.total_lines, 6);
        fs_read_result_done(&r);

        /* a CRLF split across the reader's buffer boundary is still one terminator */
        size_t n = FS_LINE_READER_BUFFER_SIZE;
        char *big = malloc(n + 8);
        memset(big, 'x', n - 1);
        memcpy(big + n - 1, "\r\nz\n", 4);
        put("split.txt", big, n + 3);
        free(big);
        r = rd("split.txt", 1, 5);
        assert_string_equal(r.data, "     2\tz");
        assert_int_equal(r.total_lines, 2);
        fs_read_result_done(&r);
}

static void test_long_lines(void **state) {
        /* 12000 characters, three of them multi-byte: rows of 5000 characters each */
        size_t n = 12000;
        char *line = malloc(n * 3 + 2);
        size_t len = 0;
        for (size_t i = 0; i < n; i++) {
                if (i == 4999 || i == 5000 || i == 11999) {
                        memcpy(line + len, "\xe2\x82\xac", 3); /* € */
                        len += 3;
                } else
                        line[len++] = (char) ('a' + i % 26);
        }
        line[len++] = '\n';
        put("long.txt", line, len);

        FsReadResult r = rd("long.txt", 0, 10);
        assert_status(&r.status, FS_OK);
        const char *c = (const char *) r.data;
        assert_memory_equal(c, "     1\t", 7);
        const char *row2 = strstr(c, "\n   1.1\t");
        const char *row3 = strstr(c, "\n   1.2\t");
        assert_non_null(row2);
        assert_non_null(row3);
        /* row 1: 4999 ASCII + € = 5000 characters = 5002 bytes */
        assert_int_equal(row2 - (c + 7), 4999 + 3);
        assert_memory_equal(row2 - 3, "\xe2\x82\xac", 3);
        /* row 2 starts with the second € and holds 5000 characters (3 + 4999 bytes) */
        assert_memory_equal(row2 + 8, "\xe2\x82\xac", 3);
        assert_int_equal(row3 - (row2 + 8), 3 + 4999);
        /* row 3: 1999 ASCII + € */
        assert_int_equal(strlen(row3 + 8), 1999 + 3);
        assert_int_equal(r.end_line, 1);
        fs_read_result_done(&r);
        free(line);
}

static void test_page_cap(void **state) {
        /* 2000 lines of 400 bytes: ~800 KiB, more than one page */
        size_t n_lines = 2000, width = 400;
        char *buf = malloc(n_lines * (width + 1));
        for (size_t i = 0; i < n_lines; i++) {
                memset(buf + i * (width + 1), 'a' + (int) (i % 26), width);
                buf[i * (width + 1) + width] = '\n';
        }
        put("big.txt", buf, n_lines * (width + 1));

        FsReadResult r = rd("big.txt", 0, 2000);
        assert_status(&r.status, FS_OK);
        assert_true(r.truncated);
        assert_true(r.size <= FS_READ_MAX_OUTPUT_BYTES);
        assert_true(r.size > FS_READ_MAX_OUTPUT_BYTES - 500); /* the partial line fills up the page */
        assert_non_null(r.status.message);
        /* k rows take 408k - 1 bytes: 1254 full rows fit, then part of row 1255 */
        assert_int_equal(r.end_line, 1254);
        assert_int_equal(r.next_offset, 1254);
        assert_int_equal(r.total_lines, 2000); /* the file is below 1 MiB: counted */
        const char *last = strrchr((const char *) r.data, '\n');
        assert_memory_equal(last + 1, "  1255\t", 7);
        fs_read_result_done(&r);

        /* the next page starts with the line that was cut */
        r = rd("big.txt", 1254, 2000);
        assert_memory_equal(r.data, "  1255\t", 7);
        assert_false(r.truncated);
        assert_int_equal(r.next_offset, -1);
        assert_int_equal(r.end_line, 2000);
        fs_read_result_done(&r);
        free(buf);
}

static void test_first_line_over_cap_advances(void **state) {
        size_t n = FS_READ_MAX_OUTPUT_BYTES + 1000;
        char *buf = malloc(n + 8);
        memset(buf, 'q', n);
        memcpy(buf + n, "\nnext\n", 6);
        put("huge-line.txt", buf, n + 6);
        free(buf);

        FsReadResult r = rd("huge-line.txt", 0, 10);
        assert_status(&r.status, FS_OK);
        assert_true(r.truncated);
        assert_int_equal(r.size, FS_READ_MAX_OUTPUT_BYTES);
        assert_int_equal(r.end_line, 1);
        assert_int_equal(r.next_offset, 1); /* progress, although line 1 was not complete */
        fs_read_result_done(&r);

        r = rd("huge-line.txt", 1, 10);
        assert_string_equal(r.data, "     2\tnext");
        fs_read_result_done(&r);
}

static void test_total_lines_unknown_for_large_files(void **state) {
        size_t n = 2 * FS_READ_MAX_LINE_COUNT_BYTES;
        char *buf = malloc(n);
        for (size_t i = 0; i < n; i++)
                buf[i] = i % 64 == 63 ? '\n' : 'x';
        put("large.txt", buf, n);
        free(buf);

        FsReadResult r = rd("large.txt", 0, 10);
        assert_int_equal(r.total_lines, -1);
        assert_int_equal(r.next_offset, 10);
        fs_read_result_done(&r);

        /* ...but known once a page reaches EOF */
        r = rd("large.txt", (int64_t) (n / 64) - 2, 10);
        assert_int_equal(r.total_lines, (int64_t) (n / 64));
        assert_int_equal(r.next_offset, -1);
        fs_read_result_done(&r);
}

static void test_binary(void **state) {
        uint8_t all[256];
        for (unsigned i = 0; i < 256; i++)
                all[i] = (uint8_t) i;
        put("all.bin", all, sizeof(all));

        FsReadResult r = rd("all.bin", 0, 2000);
        assert_status(&r.status, FS_OK);
        assert_true(r.binary);
        assert_int_equal(r.size, 256);
        assert_memory_equal(r.data, all, 256);
        assert_int_equal(r.start_line, 0);
        fs_read_result_done(&r);

        /* larger than the preview cap */
        size_t n = FS_READ_MAX_BINARY_BYTES + 1;
        uint8_t *big = calloc(1, n);
        big[0] = 0xff;
        put("big.bin", big, n);
        free(big);
        r = rd("big.bin", 0, 10);
        assert_status(&r.status, FS_ERROR_TOO_LARGE);
        assert_string_equal(r.status.message, "Binary file exceeds maximum preview size of 512000 bytes");
        assert_null(r.data);
        fs_read_result_done(&r);

        /* exactly at the cap is fine */
        big = calloc(1, FS_READ_MAX_BINARY_BYTES);
        big[10] = 0xc0;
        put("cap.bin", big, FS_READ_MAX_BINARY_BYTES);
        free(big);
        r = rd("cap.bin", 0, 10);
        assert_status(&r.status, FS_OK);
        assert_true(r.binary);
        assert_int_equal(r.size, FS_READ_MAX_BINARY_BYTES);
        fs_read_result_done(&r);
}

static void test_utf8_boundary(void **state) {
        /* a 3-byte character across byte 8192: text, not binary */
        char *buf = malloc(9000);
        memset(buf, 'a', 8191);
        memcpy(buf + 8191, "\xe4\xb8\xad", 3); /* 中 */
        memcpy(buf + 8194, "\nend\n", 5);
        put("cjk.txt", buf, 8199);
        FsReadResult r = rd("cjk.txt", 1, 10);
        assert_status(&r.status, FS_OK);
        assert_false(r.binary);
        assert_string_equal(r.data, "     2\tend");
        fs_read_result_done(&r);

        r = rd("cjk.txt", 0, 1);
        /* 8192 characters: rows of 5000, the last one ends with the character intact */
        assert_non_null(strstr((char *) r.data, "\n   1.1\t"));
        assert_memory_equal((char *) r.data + r.size - 3, "\xe4\xb8\xad", 3);
        fs_read_result_done(&r);

        /* a file that ends inside a character is not text */
        put("cut.txt", "abc\xe4\xb8", 5);
        r = rd("cut.txt", 0, 10);
        assert_true(r.binary);
        fs_read_result_done(&r);

        /* invalid bytes after the sniffed prefix become U+FFFD, the content stays UTF-8 */
        memset(buf, 'b', 8999);
        buf[8999 - 2] = '\xff';
        buf[8999 - 1] = '\n';
        put("late.txt", buf, 8999);
        r = rd("late.txt", 0, 10);
        assert_false(r.binary);
        assert_memory_equal((char *) r.data + r.size - 3, "\xef\xbf\xbd", 3);
        fs_read_result_done(&r);

        /* emoji and CJK round trip */
        puts_file("emoji.txt", "héllo 🙂\n中文\n");
        r = rd("emoji.txt", 0, 10);
        assert_string_equal(r.data, "     1\théllo 🙂\n     2\t中文");
        fs_read_result_done(&r);
        free(buf);
}

static void test_errors(void **state) {
        FsReadResult r = {};

        r = rd("missing", 0, 10);
        assert_status(&r.status, FS_ERROR_FILE_NOT_FOUND);
        char *expected;
        assert_true(asprintf(&expected, "Error: File '%s' not found", P("missing")) > 0);
        assert_string_equal(r.status.message, expected);
        free(expected);
        fs_read_result_done(&r);

        mkdir_p("d");
        r = rd("d", 0, 10);
        assert_status(&r.status, FS_ERROR_IS_DIRECTORY);
        fs_read_result_done(&r);

        assert_int_equal(mkfifo(P("fifo"), 0644), 0);
        r = rd("fifo", 0, 10);
        assert_status(&r.status, FS_ERROR_NOT_A_FILE);
        fs_read_result_done(&r);

        assert_int_equal(fs_read("relative/path", 0, 10, &r), 0);
        assert_status(&r.status, FS_ERROR_INVALID_PATH);
        fs_read_result_done(&r);

        assert_int_equal(fs_read("", 0, 10, &r), 0);
        assert_status(&r.status, FS_ERROR_INVALID_PATH);
        fs_read_result_done(&r);

        puts_file("f", "x\n");
        char through_file[PATH_MAX];
        snprintf(through_file, sizeof(through_file), "%s/x", P("f"));
        assert_int_equal(fs_read(through_file, 0, 10, &r), 0);
        assert_status(&r.status, FS_ERROR_FILE_NOT_FOUND);
        fs_read_result_done(&r);
}

static bool cancel_after(void *userdata) {
        unsigned *left = userdata;
        return *left == 0 || --*left == 0;
}

static void test_cancel_long_skip(void **state) {
        size_t n = 300000;
        char *buf = malloc(n * 2);
        for (size_t i = 0; i < n; i++) {
                buf[2 * i] = 'l';
                buf[2 * i + 1] = '\n';
        }
        put("lines.txt", buf, n * 2);
        free(buf);

        /* asked often enough while skipping: the first "yes" ends the read */
        unsigned left = 2;
        FsReadResult r = {};
        assert_int_equal(fs_read_full(P("lines.txt"), 250000, 10, cancel_after, &left, &r), 0);
        assert_status(&r.status, FS_ERROR_IO);
        assert_int_equal(left, 0);
        fs_read_result_done(&r);

        left = 1000;
        assert_int_equal(fs_read_full(P("lines.txt"), 250000, 1, cancel_after, &left, &r), 0);
        assert_status(&r.status, FS_OK);
        assert_string_equal(r.data, "250001\tl");
        fs_read_result_done(&r);
}

static void unreadable(void *arg) {
        FsReadResult r = {};
        child_check(fs_read(P("secret"), 0, 10, &r) == 0);
        child_check(r.status.error == FS_ERROR_PERMISSION_DENIED);
        fs_read_result_done(&r);
}

static void test_permission_denied(void **state) {
        puts_file("secret", "s\n");
        assert_int_equal(chmod(P("secret"), 0), 0);
        as_nobody(unreadable, NULL);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_numbered_page, test_dir_setup, test_dir_teardown),
                cmocka_unit_test_setup_teardown(test_offsets_and_limits, test_dir_setup, test_dir_teardown),
                cmocka_unit_test_setup_teardown(test_empty_file, test_dir_setup, test_dir_teardown),
                cmocka_unit_test_setup_teardown(test_line_endings, test_dir_setup, test_dir_teardown),
                cmocka_unit_test_setup_teardown(test_long_lines, test_dir_setup, test_dir_teardown),
                cmocka_unit_test_setup_teardown(test_page_cap, test_dir_setup, test_dir_teardown),
                cmocka_unit_test_setup_teardown(test_first_line_over_cap_advances, test_dir_setup, test_dir_teardown),
                cmocka_unit_test_setup_teardown(test_total_lines_unknown_for_large_files, test_dir_setup, test_dir_teardown),
                cmocka_unit_test_setup_teardown(test_binary, test_dir_setup, test_dir_teardown),
                cmocka_unit_test_setup_teardown(test_utf8_boundary, test_dir_setup, test_dir_teardown),
                cmocka_unit_test_setup_teardown(test_errors, test_dir_setup, test_dir_teardown),
                cmocka_unit_test_setup_teardown(test_cancel_long_skip, test_dir_setup, test_dir_teardown),
                cmocka_unit_test_setup_teardown(test_permission_denied, test_dir_setup, test_dir_teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}

/* SPDX-License-Identifier: MIT */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "format-util.h"
#include "progress.h"

static void test_format_bytes(void **state) {
        char b[FORMAT_BYTES_MAX];

        assert_string_equal(format_bytes(0, b), "0 B");
        assert_string_equal(format_bytes(1023, b), "1023 B");
        assert_string_equal(format_bytes(1024, b), "1.0 KiB");
        assert_string_equal(format_bytes(256ull << 20, b), "256.0 MiB");
        assert_string_equal(format_bytes(3ull << 40, b), "3.0 TiB");
        assert_string_equal(format_bytes(UINT64_MAX, b), "16.0 EiB");
}

static void test_format_timestamp(void **state) {
        char t[FORMAT_TIME_MAX];

        assert_string_equal(format_timestamp("2024-05-01T12:34:56.789012+00:00", t), "2024-05-01 12:34");
        assert_string_equal(format_timestamp("garbage", t), "garbage");
        assert_string_equal(format_timestamp(NULL, t), "n/a");
}

static void test_format_mode(void **state) {
        char m[FORMAT_MODE_MAX];

        assert_string_equal(format_mode(true, 0755, m), "drwxr-xr-x");
        assert_string_equal(format_mode(false, 0644, m), "-rw-r--r--");
        assert_string_equal(format_mode(false, 0, m), "----------");
        assert_string_equal(format_mode(false, 04755, m), "-rwsr-xr-x");
        assert_string_equal(format_mode(false, 02640, m), "-rw-r-S---");
        assert_string_equal(format_mode(true, 01777, m), "drwxrwxrwt");
        assert_string_equal(format_mode(true, 01770, m), "drwxrwx--T");
        assert_string_equal(format_mode(false, 07777, m), "-rwsrwsrwt");
        assert_string_equal(format_mode(true, -1, m), "d?????????");
}

static void test_frame(void **state) {
        char line[512];

        /* Half of 100 MiB in 2 s: 25 MiB/s, 2 s to go. */
        progress_format(line, sizeof(line), 100, 50ull << 20, 100ull << 20, 3, 7, 2000000);
        assert_non_null(strstr(line, " 50% ["));
        assert_non_null(strstr(line, "50.0 MiB / 100.0 MiB"));
        assert_non_null(strstr(line, "25.0 MiB/s"));
        assert_non_null(strstr(line, "ETA 0:02"));
        assert_non_null(strstr(line, "3/7 files"));
        assert_true(strlen(line) <= 100);

        /* Done: the elapsed time instead of an ETA, a full bar. */
        progress_format(line, sizeof(line), 80, 10, 10, 1, 1, 61000000);
        assert_non_null(strstr(line, "100% [####"));
        assert_non_null(strstr(line, "in 1:01"));
        assert_null(strchr(line, '.') && strstr(line, "[.") ? line : NULL);

        /* Narrow terminals get a cut line, never a longer one. */
        progress_format(line, sizeof(line), 30, 1, 2, 0, 1, 1);
        assert_true(strlen(line) <= 30);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_format_bytes),
                cmocka_unit_test(test_format_timestamp),
                cmocka_unit_test(test_format_mode),
                cmocka_unit_test(test_frame),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}

/* SPDX-License-Identifier: MIT */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "utf8.h"

/* Sanitize `in` and compare with `expected` (both NUL-terminated for convenience). */
static void check(const char *in, const char *expected) {
        _cleanup_buffer_ Buffer b = {};

        assert_int_equal(utf8_append_sanitized(&b, (const uint8_t *) in, strlen(in)), 0);
        assert_int_equal(b.len, strlen(expected));
        assert_memory_equal(buffer_data(&b), expected, b.len);
}

#define FFFD "\xEF\xBF\xBD"

static void test_valid_passes_through(void **state) {
        check("", "");
        check("hello\n", "hello\n");
        check("h\xC3\xA9llo \xE2\x82\xAC \xF0\x9F\x98\x80", "h\xC3\xA9llo \xE2\x82\xAC \xF0\x9F\x98\x80");
        check("\xF4\x8F\xBF\xBF", "\xF4\x8F\xBF\xBF"); /* U+10FFFF */
}

static void test_invalid_bytes_replaced(void **state) {
        check("a\xFF" "b", "a" FFFD "b");
        check("\xC0\xAF", FFFD FFFD);                 /* overlong '/' */
        check("\xED\xA0\x80", FFFD FFFD FFFD);        /* surrogate: ED then two stray bytes */
        check("\xF4\x90\x80\x80", FFFD FFFD FFFD FFFD); /* above U+10FFFF */
        check("\x80\x80", FFFD FFFD);                 /* stray continuation bytes */
        /* A truncated sequence is one maximal subpart: one U+FFFD, then what follows. */
        check("\xE2\x82" "x", FFFD "x");
        check("\xF0\x9F\x98" "x", FFFD "x");
        check("x\xE2\x82", "x" FFFD);
}

static void test_valid_prefix(void **state) {
        const uint8_t s[] = "ab\xC3\xA9\xFF" "cd";

        assert_int_equal(utf8_valid_prefix(s, sizeof(s) - 1), 4);
        assert_int_equal(utf8_valid_prefix(s, 3), 2); /* stops inside the cut é */
}

static void test_trim_incomplete_tail(void **state) {
        const uint8_t euro[] = "ab\xE2\x82\xAC";

        assert_int_equal(utf8_trim_incomplete_tail(euro, 5), 5);
        assert_int_equal(utf8_trim_incomplete_tail(euro, 4), 2);
        assert_int_equal(utf8_trim_incomplete_tail(euro, 3), 2);
        assert_int_equal(utf8_trim_incomplete_tail(euro, 2), 2);
        /* Invalid, not incomplete: left for the replacement. */
        assert_int_equal(utf8_trim_incomplete_tail((const uint8_t *) "a\xFF", 2), 2);
        assert_int_equal(utf8_trim_incomplete_tail((const uint8_t *) "a\x80", 2), 2);
        assert_int_equal(utf8_trim_incomplete_tail((const uint8_t *) "\xF0\x9F\x98", 3), 0);
        assert_int_equal(utf8_trim_incomplete_tail((const uint8_t *) "", 0), 0);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_valid_passes_through),
                cmocka_unit_test(test_invalid_bytes_replaced),
                cmocka_unit_test(test_valid_prefix),
                cmocka_unit_test(test_trim_incomplete_tail),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}

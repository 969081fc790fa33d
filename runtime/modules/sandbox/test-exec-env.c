/* SPDX-License-Identifier: MIT */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "exec-env.h"
#include "macro.h"

static size_t len_or_zero(const char *s) {
        return s ? strlen(s) : 0;
}

#define OVR(k, v) { .key = k, .key_len = STRLEN(k), .value = v, .value_len = len_or_zero(v) }

static void test_merge(void **state) {
        char *base[] = { (char *) "PATH=/bin", (char *) "HOME=/root", (char *) "A=1", NULL };
        const EnvOverride o[] = {
                OVR("A", "2"),          /* replaced in place… */
                OVR("HOME", NULL),      /* removed */
                OVR("NEW", "x=y"),      /* values may contain '=' */
                OVR("NEW", "z"),        /* a later override wins */
                OVR("GONE", NULL),      /* unsetting an absent variable is fine */
                OVR("PAT", "short"),    /* a prefix of PATH must not touch PATH */
        };
        _cleanup_strv_free_ char **l = NULL;

        assert_int_equal(env_merge(base, o, ELEMENTSOF(o), &l), 0);
        assert_int_equal(strv_length(l), 4);
        assert_string_equal(env_get(l, "PATH"), "/bin");
        assert_null(env_get(l, "HOME"));
        assert_string_equal(env_get(l, "A"), "2");
        assert_string_equal(env_get(l, "NEW"), "z");
        assert_string_equal(env_get(l, "PAT"), "short");
        assert_null(env_get(l, "GONE"));
}

static void test_empty(void **state) {
        _cleanup_strv_free_ char **l = NULL;

        assert_int_equal(env_merge(NULL, NULL, 0, &l), 0);
        assert_non_null(l);
        assert_null(l[0]);
}

static void test_validity(void **state) {
        assert_true(env_key_is_valid("A_B", 3));
        assert_false(env_key_is_valid("", 0));
        assert_false(env_key_is_valid("A=B", 3));
        assert_false(env_key_is_valid("A\0B", 3));
        assert_true(env_value_is_valid("a=b", 3));
        assert_false(env_value_is_valid("a\0b", 3));
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_merge),
                cmocka_unit_test(test_empty),
                cmocka_unit_test(test_validity),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}

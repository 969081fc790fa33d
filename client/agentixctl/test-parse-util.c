/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "parse-util.h"

static void test_seconds(void **state) {
        double v;

        assert_int_equal(parse_seconds("0", &v), 0);
        assert_true(v == 0);
        assert_int_equal(parse_seconds("2.5", &v), 0);
        assert_true(v == 2.5);
        assert_int_equal(parse_seconds("-1", &v), -EINVAL);
        assert_int_equal(parse_seconds("nan", &v), -EINVAL);
        assert_int_equal(parse_seconds("inf", &v), -EINVAL);
        assert_int_equal(parse_seconds("1e10", &v), -EINVAL);
        assert_int_equal(parse_seconds("5s", &v), -EINVAL);
        assert_int_equal(parse_seconds("", &v), -EINVAL);
}

static void test_int64(void **state) {
        int64_t v;

        assert_int_equal(parse_int64("42", 0, &v), 0);
        assert_int_equal(v, 42);
        assert_int_equal(parse_int64("0", 1, &v), -EINVAL);
        assert_int_equal(parse_int64("99999999999999999999", 0, &v), -EINVAL);
        assert_int_equal(parse_int64("1x", 0, &v), -EINVAL);
}

static void test_env(void **state) {
        char **env = NULL;
        size_t n = 0;

        assert_int_equal(env_append(&env, &n, "A=1"), 0);
        assert_int_equal(env_append(&env, &n, "B"), 0);
        assert_int_equal(env_append(&env, &n, "=x"), -EINVAL);
        assert_int_equal(env_append(&env, &n, ""), -EINVAL);
        assert_int_equal(n, 2);
        assert_string_equal(env[0], "A=1");
        assert_string_equal(env[1], "B");
        assert_null(env[2]);
        for (int i = 0; i < 4094; i++)
                assert_int_equal(env_append(&env, &n, "C=1"), 0);
        assert_int_equal(env_append(&env, &n, "D=1"), -E2BIG);
        free(env);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_seconds),
                cmocka_unit_test(test_int64),
                cmocka_unit_test(test_env),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}

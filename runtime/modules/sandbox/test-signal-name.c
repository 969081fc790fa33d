/* SPDX-License-Identifier: MIT */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "macro.h"
#include "signal-name.h"

static void test_names(void **state) {
        assert_int_equal(signal_from_string("INT"), SIGINT);
        assert_int_equal(signal_from_string("SIGINT"), SIGINT);
        assert_int_equal(signal_from_string("sigterm"), SIGTERM);
        assert_int_equal(signal_from_string("kill"), SIGKILL);
        assert_int_equal(signal_from_string("WINCH"), SIGWINCH);
        assert_int_equal(signal_from_string("9"), SIGKILL);
}

static void test_bad(void **state) {
        assert_int_equal(signal_from_string(""), -EINVAL);
        assert_int_equal(signal_from_string("SIG"), -EINVAL);
        assert_int_equal(signal_from_string("NOPE"), -EINVAL);
        assert_int_equal(signal_from_string("0"), -EINVAL);
        assert_int_equal(signal_from_string("9x"), -EINVAL);
        assert_int_equal(signal_from_number(0), -EINVAL);
        assert_int_equal(signal_from_number(-2), -EINVAL);
        assert_int_equal(signal_from_number(NSIG), -EINVAL);
        assert_int_equal(signal_from_number(15), SIGTERM);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_names),
                cmocka_unit_test(test_bad),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}

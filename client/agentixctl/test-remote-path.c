/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "remote-path.h"

static void check(const char *operand, bool remote, const char *sandbox, const char *path) {
        RemotePath p;

        assert_int_equal(remote_path_parse(operand, &p), 0);
        assert_int_equal(p.remote, remote);
        if (sandbox)
                assert_string_equal(p.sandbox, sandbox);
        else
                assert_null(p.sandbox);
        assert_string_equal(p.path, path);
        remote_path_done(&p);
}

static void test_operands(void **state) {
        check(":/tmp/x", true, NULL, "/tmp/x");
        check(":", true, NULL, "");
        check("sb-1:/etc", true, "sb-1", "/etc");
        check("/tmp/a:b", false, NULL, "/tmp/a:b");
        check("./a:b", false, NULL, "./a:b");
        check("file.txt", false, NULL, "file.txt");
        check("", false, NULL, "");
}

static void test_bad_ids(void **state) {
        RemotePath p;

        assert_int_equal(remote_path_parse("a b:/x", &p), -EINVAL);
        assert_int_equal(remote_path_parse("a$:/x", &p), -EINVAL);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_operands),
                cmocka_unit_test(test_bad_ids),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}

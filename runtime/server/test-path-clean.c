/* SPDX-License-Identifier: MIT */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>
#include <cmocka.h>

#include "path-clean.h"

static void check(const char *in, const char *want) {
        char buf[256];

        strcpy(buf, in);
        path_clean(buf);
        if (strcmp(buf, want) != 0)
                fail_msg("%s: %s, expected %s", in, buf, want);
}

static void test_clean(void **state) {
        check("/", "/");
        check("//", "/");
        check("/a/./b/", "/a/b");
        check("/root/.", "/root");
        check("/a/../..", "/");
        check("/a/b/../c", "/a/c");
        check("/../x", "/x");
        check("/a//b", "/a/b");
        check("/a/..b/c", "/a/..b/c");
        check("/...", "/...");
        check("/a/b/c/../../d/./e/..", "/a/d");
        check("/./.././", "/");
        check("/home/user/x y", "/home/user/x y");
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_clean),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}

/* SPDX-License-Identifier: MIT */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "environment-file.h"
#include "macro.h"

static int assign_setenv(const char *name, const char *value, void *userdata) {
        (*(unsigned *) userdata)++;
        return setenv(name, value, 1) < 0 ? -errno : 0;
}

static const char *lookup_getenv(const char *name, void *userdata) {
        return getenv(name);
}

static int parse(const char *text, unsigned *ret_line) {
        unsigned n = 0;

        return environment_parse(text, strlen(text), lookup_getenv, assign_setenv, &n, ret_line);
}

static void test_assignments_and_expansion(void **state) {
        unsigned line = 0;

        setenv("PATH", "/usr/bin:/bin", 1);
        unsetenv("AGX_UNSET");
        assert_int_equal(parse("# the bundle\n"
                               "\n"
                               "PATH=/nix/runtime/bin:${PATH}\n"
                               "  AGX_A=x=y z\r\n"
                               "AGX_B=${AGX_A}/${AGX_UNSET}end\n"
                               "AGX_EMPTY=\n"
                               "AGX_DOLLAR=$HOME",
                               &line),
                         0);
        assert_string_equal(getenv("PATH"), "/nix/runtime/bin:/usr/bin:/bin");
        assert_string_equal(getenv("AGX_A"), "x=y z");
        assert_string_equal(getenv("AGX_B"), "x=y z/end");
        assert_string_equal(getenv("AGX_EMPTY"), "");
        assert_string_equal(getenv("AGX_DOLLAR"), "$HOME"); /* only ${NAME} expands */
}

static void test_malformed_lines(void **state) {
        static const struct {
                const char *text;
                unsigned line;
        } cases[] = {
                { "A=1\nnot an assignment\n", 2 },
                { "1A=x\n", 1 },
                { "=x\n", 1 },
                { "A=1\n\n# c\nB=${UNCLOSED\n", 4 },
                { "B=${}\n", 1 },
                { "B=${A-B}\n", 1 },
                { "A B=1\n", 1 },
        };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                unsigned line = 0;
                assert_int_equal(parse(cases[i].text, &line), -EBADMSG);
                assert_int_equal(line, cases[i].line);
        }
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_assignments_and_expansion),
                cmocka_unit_test(test_malformed_lines),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}

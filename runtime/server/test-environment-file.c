/* SPDX-License-Identifier: MIT */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* A=${A}${A} on each line doubles A: 40 such lines would ask for a terabyte. A value past 128
 * KiB is refused at its line; what came before stays. */
static void test_expansion_is_bounded(void **state) {
        _cleanup_free_ char *text = NULL;
        size_t n = 0;
        unsigned line = 0;
        FILE *f = open_memstream(&text, &n);

        assert_non_null(f);
        fprintf(f, "AGX_BIG=0123456789abcdef\n");
        for (int i = 0; i < 40; i++)
                fprintf(f, "AGX_BIG=${AGX_BIG}${AGX_BIG}\n");
        assert_int_equal(fclose(f), 0);
        assert_int_equal(environment_parse(text, n, lookup_getenv, assign_setenv, &(unsigned) { 0 }, &line), -E2BIG);
        /* 16 << 13 = 128 KiB is the longest a value gets: line 14 would make 256 KiB. */
        assert_int_equal(line, 15);
        assert_int_equal(strlen(getenv("AGX_BIG")), 16u << 13);
        /* Exactly the bound is fine; a literal one byte over is not. */
        free(text);
        text = NULL;
        f = open_memstream(&text, &n);
        assert_non_null(f);
        fprintf(f, "AGX_LONG=%0*d\n", 128 * 1024 + 1, 0);
        assert_int_equal(fclose(f), 0);
        assert_int_equal(environment_parse(text, n, lookup_getenv, assign_setenv, &(unsigned) { 0 }, &line), -E2BIG);
        assert_int_equal(line, 1);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_assignments_and_expansion),
                cmocka_unit_test(test_malformed_lines),
                cmocka_unit_test(test_expansion_is_bounded),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}

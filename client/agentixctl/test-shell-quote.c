/* SPDX-License-Identifier: MIT */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "shell-quote.h"

static void check(const char *word, const char *expected) {
        char *q = shell_quote(word);
        assert_non_null(q);
        assert_string_equal(q, expected);
        free(q);
}

static void test_quoting(void **state) {
        check("ls", "ls");
        check("/usr/bin/x-y_z.1,2:3@4%5+6", "/usr/bin/x-y_z.1,2:3@4%5+6");
        check("", "''");
        check("a b", "'a b'");
        check("it's", "'it'\\''s'");
        check("$HOME", "'$HOME'");
        check("FOO=bar", "'FOO=bar'");
        check("~", "'~'");
        check("*", "'*'");
        check("a\nb", "'a\nb'");
}

/* What sh makes of the quoted line is the words we started from: run it for real. */
static void test_sh_reads_back_the_words(void **state) {
        char *words[] = { "printf", "<%s>\\n", "plain", "with space", "it's", "$(echo no)", "`x`", "\"q\"", "", "a\nb",
                          "FOO=bar", "*", "\\", "-n" };
        size_t n = sizeof(words) / sizeof(words[0]);
        char *line = shell_quote_argv(words, n), out[4096] = {};
        char expected[4096] = {};
        int fds[2];
        pid_t pid;
        ssize_t k, total = 0;

        assert_non_null(line);
        for (size_t i = 2; i < n; i++)
                snprintf(expected + strlen(expected), sizeof(expected) - strlen(expected), "<%s>\n", words[i]);

        assert_int_equal(pipe(fds), 0);
        pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                dup2(fds[1], 1);
                execl("/bin/sh", "sh", "-c", line, (char *) NULL);
                _exit(127);
        }
        close(fds[1]);
        while ((k = read(fds[0], out + total, sizeof(out) - 1 - (size_t) total)) > 0)
                total += k;
        close(fds[0]);
        waitpid(pid, NULL, 0);
        assert_string_equal(out, expected);
        free(line);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_quoting),
                cmocka_unit_test(test_sh_reads_back_the_words),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}

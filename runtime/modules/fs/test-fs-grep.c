/* SPDX-License-Identifier: MIT */
/* fs_grep(): literal recursive search, bounded. */
#include <inttypes.h>

#include "buffer.h"
#include "fs-search.h"
#include "test-fs-util.h"

static FsGrepResult grep_opts(FsGrepOptions o) {
        FsGrepResult r = {};
        if (o.max_count == 0 && !o.userdata)
                o.max_count = -1;
        assert_int_equal(fs_grep(&o, &r), 0);
        return r;
}

static FsGrepResult grep(const char *pattern, const char *root_rel, const char *glob) {
        return grep_opts((FsGrepOptions) {
                .pattern = pattern,
                .pattern_len = strlen(pattern),
                .path = root_rel ? P(root_rel) : NULL,
                .glob = glob,
                .max_count = -1,
        });
}

/* "relpath:line:text" for every match, joined with '|'. */
static char *render(const FsGrepResult *r) {
        Buffer b = BUFFER_NULL;
        size_t prefix = strlen(test_dir) + 1;

        assert_int_equal(buffer_reserve(&b, 0), 0);
        for (size_t i = 0; i < r->n_matches; i++) {
                const FsGrepMatch *m = &r->matches[i];
                const char *path = fs_grep_match_path(r, m);
                assert_true(strneq(path, test_dir, prefix - 1));
                assert_int_equal(buffer_printf(&b, "%s%s:%" PRIu64 ":%s", i ? "|" : "", path + prefix, m->line,
                                               fs_grep_match_text(r, m)), 0);
        }
        return (char *) buffer_steal(&b, NULL);
}

static void check(const char *pattern, const char *root, const char *glob, const char *expected) {
        FsGrepResult r = grep(pattern, root, glob);
        if (r.status.error != FS_OK)
                fail_msg("grep '%s': %s", pattern, r.status.message);
        char *got = render(&r);
        if (!streq(got, expected))
                fail_msg("grep '%s' glob '%s':\n expected [%s]\n      got [%s]", pattern, strna(glob), expected, got);
        assert_false(r.truncated);
        free(got);
        fs_grep_result_done(&r);
}

static void test_literal(void **state) {
        puts_file("f.txt", "a.b*c(x)\naXb*c\n[a-z]+ $HOME \\n\n");
        check("a.b*", "", NULL, "f.txt:1:a.b*c(x)");
        check("[a-z]+", "", NULL, "f.txt:3:[a-z]+ $HOME \\n");
        check("$HOME \\n", "", NULL, "f.txt:3:[a-z]+ $HOME \\n");
        check("b*c", "", NULL, "f.txt:1:a.b*c(x)|f.txt:2:aXb*c");
        /* case-sensitive */
        check("AXB", "", NULL, "");
        /* a line with several hits is reported once */
        puts_file("g.txt", "xx xx xx\n");
        check("xx", "g.txt", NULL, "g.txt:1:xx xx xx");
        /* the empty pattern matches every line, as grep -F '' does */
        puts_file("h.txt", "1\n\n3");
        check("", "h.txt", NULL, "h.txt:1:1|h.txt:2:|h.txt:3:3");
        /* a pattern with a newline matches no single line */
        check("1\n", "h.txt", NULL, "");
}

static void test_colons_and_names(void **state) {
        puts_file("we:ird:name.txt", "key: value: more\nnothing\n");
        puts_file("sp ace/ünï.txt", "ünïcode: ✓\n");
        check("value:", "", NULL, "we:ird:name.txt:1:key: value: more");
        check("✓", "", NULL, "sp ace/ünï.txt:1:ünïcode: ✓");
}

static void test_order_and_recursion(void **state) {
        puts_file("c.txt", "hit\n");
        puts_file("a.txt", "hit\nmiss\nhit\n");
        puts_file("b/z.txt", "hit");
        puts_file("b/a/deep.txt", "no\nno\nhit here\n");
        puts_file(".dot/x.txt", "hit\n");
        check("hit", "", NULL,
              ".dot/x.txt:1:hit|a.txt:1:hit|a.txt:3:hit|b/a/deep.txt:3:hit here|b/z.txt:1:hit|c.txt:1:hit");
        /* a file as the root */
        check("hit", "a.txt", NULL, "a.txt:1:hit|a.txt:3:hit");
        /* a file as the root ignores the glob, like deepagents */
        check("hit", "a.txt", "*.py", "a.txt:1:hit|a.txt:3:hit");
        /* a sub-directory as the root, with a trailing slash */
        check("hit", "b/", NULL, "b/a/deep.txt:3:hit here|b/z.txt:1:hit");
}

static void test_line_endings_and_numbers(void **state) {
        puts_file("crlf.txt", "one\r\ntwo target\r\nthree\r\ntarget last");
        check("target", "", NULL, "crlf.txt:2:two target|crlf.txt:4:target last");

        /* matches far apart, across read buffers: line numbers stay exact */
        size_t lines = 200000;
        char *buf = malloc(lines * 12);
        size_t len = 0;
        for (size_t i = 1; i <= lines; i++)
                len += (size_t) sprintf(buf + len, i % 50000 == 0 || i == 77777 ? "NEEDLE%05zu\n" : "hay%07zu\n", i % 100000);
        put("big.txt", buf, len);
        free(buf);
        check("NEEDLE", "big.txt", NULL,
              "big.txt:50000:NEEDLE50000|big.txt:77777:NEEDLE77777|big.txt:100000:NEEDLE00000|"
              "big.txt:150000:NEEDLE50000|big.txt:200000:NEEDLE00000");
}

static void test_long_lines(void **state) {
        /* a line longer than the largest line buffer, the hit near its end */
        size_t n = 6 * 1024 * 1024;
        char *buf = malloc(n + 64);
        memset(buf, 'x', n);
        memcpy(buf + n - 10, "NEEDLE", 6);
        memcpy(buf + n, "\nsecond NEEDLE\n", 15);
        put("long.txt", buf, n + 15);

        FsGrepResult r = grep("NEEDLE", "long.txt", NULL);
        assert_int_equal(r.n_matches, 2);
        assert_int_equal(r.matches[0].line, 1);
        assert_int_equal(r.matches[0].text_len, FS_GREP_MAX_TEXT_BYTES);
        assert_int_equal(r.matches[1].line, 2);
        assert_string_equal(fs_grep_match_text(&r, &r.matches[1]), "second NEEDLE");
        fs_grep_result_done(&r);

        /* a hit split across two windows of the long line is found */
        memset(buf, 'y', n);
        memcpy(buf + 4 * 1024 * 1024 - 3, "NEEDLE", 6);
        buf[n] = '\n';
        put("split.txt", buf, n + 1);
        r = grep("NEEDLE", "split.txt", NULL);
        assert_int_equal(r.n_matches, 1);
        fs_grep_result_done(&r);

        /* no hit in the long line, one after it; and none at all at EOF without newline */
        memset(buf, 'z', n);
        memcpy(buf + n, "\nNEEDLE", 7);
        put("after.txt", buf, n + 7);
        check("NEEDLE", "after.txt", NULL, "after.txt:2:NEEDLE");
        put("eof.txt", buf, n);
        check("NEEDLE", "eof.txt", NULL, "");
        /* a hit in a long last line without a newline is reported once */
        memcpy(buf + n - 100, "NEEDLE", 6);
        put("eof-hit.txt", buf, n);
        r = grep("NEEDLE", "eof-hit.txt", NULL);
        assert_int_equal(r.n_matches, 1);
        assert_int_equal(r.matches[0].line, 1);
        fs_grep_result_done(&r);
        free(buf);
}

static void test_binary_and_encoding(void **state) {
        put("bin.dat", "match\0match\n", 12);
        check("match", "", NULL, "");

        /* a NUL after the first 8 KiB does not make a file binary */
        char *buf = calloc(1, 9000);
        memset(buf, 'a', 8999);
        memcpy(buf + 100, "\nmatch\n", 7);
        buf[8500] = 0;
        put("late-nul.txt", buf, 9000);
        free(buf);
        check("match", "late-nul.txt", NULL, "late-nul.txt:2:match");

        /* invalid UTF-8 in a matching line comes back as U+FFFD */
        put("latin1.txt", "caf\xe9 match\n", 11);
        check("match", "latin1.txt", NULL, "latin1.txt:1:caf\xef\xbf\xbd match");
}

static void test_globs(void **state) {
        puts_file("a.py", "hit\n");
        puts_file("a.c", "hit\n");
        puts_file("inc/a.h", "hit\n");
        puts_file("src/x/b.py", "hit\n");
        puts_file("src/.gen/c.py", "hit\n");
        puts_file(".hidden.py", "hit\n");

        check("hit", "", "*.py", "a.py:1:hit|src/.gen/c.py:1:hit|src/x/b.py:1:hit");
        check("hit", "", "*.{c,h}", "a.c:1:hit|inc/a.h:1:hit");
        check("hit", "", "src/**/*.py", "src/x/b.py:1:hit");
        check("hit", "", "/*.py", "a.py:1:hit");
        check("hit", "", ".*.py", ".hidden.py:1:hit");
        check("hit", "", "nomatch", "");

        FsGrepResult r = grep("hit", "", "../*.py");
        assert_status(&r.status, FS_ERROR_INVALID_PATH);
        fs_grep_result_done(&r);
}

static void test_symlinks(void **state) {
        puts_file("real/f.txt", "hit\n");
        assert_int_equal(symlink("real", P("linkdir")), 0);
        assert_int_equal(symlink("real/f.txt", P("linkfile.txt")), 0);
        /* links met while recursing are not followed... */
        check("hit", "", NULL, "real/f.txt:1:hit");
        /* ...but a link given as the root is */
        check("hit", "linkdir", NULL, "linkdir/f.txt:1:hit");
}

static void test_max_count(void **state) {
        puts_file("m.txt", "x\nx\nx\nx\n");

        FsGrepResult r = grep_opts((FsGrepOptions) { .pattern = "x", .pattern_len = 1, .path = P(""), .max_count = 4 });
        assert_int_equal(r.n_matches, 4);
        assert_false(r.truncated);
        fs_grep_result_done(&r);

        r = grep_opts((FsGrepOptions) { .pattern = "x", .pattern_len = 1, .path = P(""), .max_count = 3 });
        assert_int_equal(r.n_matches, 3);
        assert_true(r.truncated);
        assert_int_equal(r.matches[2].line, 3);
        fs_grep_result_done(&r);

        int dummy;
        r = grep_opts((FsGrepOptions) { .pattern = "x", .pattern_len = 1, .path = P(""), .max_count = 0, .userdata = &dummy });
        assert_int_equal(r.n_matches, 0);
        assert_true(r.truncated);
        fs_grep_result_done(&r);
}

static bool cancel_now(void *userdata) {
        return true;
}

static void test_budgets(void **state) {
        for (int i = 0; i < 50; i++) {
                char name[32];
                snprintf(name, sizeof(name), "d%02d/f.txt", i);
                puts_file(name, "hit\n");
        }
        FsGrepResult r = grep_opts((FsGrepOptions) { .pattern = "hit", .pattern_len = 3, .path = P(""), .max_count = -1,
                                                     .cancelled = cancel_now });
        assert_status(&r.status, FS_OK);
        assert_true(r.truncated);
        assert_int_equal(r.n_matches, 0);
        fs_grep_result_done(&r);

        r = grep_opts((FsGrepOptions) { .pattern = "hit", .pattern_len = 3, .path = P(""), .max_count = -1,
                                        .timeout_usec = 1 });
        assert_true(r.truncated);
        assert_true(r.n_matches < 50);
        fs_grep_result_done(&r);

        r = grep("hit", "", NULL);
        assert_int_equal(r.n_matches, 50);
        assert_false(r.truncated);
        fs_grep_result_done(&r);

        /* an overlong pattern is refused */
        char *big = malloc(FS_GREP_MAX_PATTERN_BYTES + 2);
        memset(big, 'p', FS_GREP_MAX_PATTERN_BYTES + 1);
        big[FS_GREP_MAX_PATTERN_BYTES + 1] = 0;
        r = grep(big, "", NULL);
        assert_status(&r.status, FS_ERROR_TOO_LARGE);
        fs_grep_result_done(&r);
        free(big);
}

static void test_roots(void **state) {
        FsGrepResult r;

        puts_file("here.txt", "cwd hit\n");
        char old[PATH_MAX];
        assert_non_null(getcwd(old, sizeof(old)));
        assert_int_equal(chdir(test_dir), 0);
        r = grep("cwd hit", NULL, NULL);
        assert_int_equal(chdir(old), 0);
        assert_status(&r.status, FS_OK);
        assert_int_equal(r.n_matches, 1);
        assert_string_equal(fs_grep_match_path(&r, &r.matches[0]), P("here.txt"));
        fs_grep_result_done(&r);

        r = grep("x", "missing", NULL);
        assert_status(&r.status, FS_ERROR_FILE_NOT_FOUND);
        fs_grep_result_done(&r);

        r = grep_opts((FsGrepOptions) { .pattern = "x", .pattern_len = 1, .path = "rel", .max_count = -1 });
        assert_status(&r.status, FS_ERROR_INVALID_PATH);
        fs_grep_result_done(&r);

        assert_int_equal(mkfifo(P("fifo"), 0600), 0);
        r = grep("x", "fifo", NULL);
        assert_status(&r.status, FS_ERROR_NOT_A_FILE);
        fs_grep_result_done(&r);
        /* a FIFO inside the tree is skipped, not read (it would block) */
        check("cwd hit", "", NULL, "here.txt:1:cwd hit");
}

/* The same answers as GNU grep -rnF on a generated tree (sorted, since grep follows
 * directory order). */
static void test_matches_gnu_grep(void **state) {
        if (access("/bin/grep", X_OK) < 0)
                skip();
        unsigned seed = 42;
        for (int f = 0; f < 40; f++) {
                char name[64];
                Buffer b = BUFFER_NULL;
                snprintf(name, sizeof(name), "t%d/s%d/file%d.txt", f % 3, f % 5, f);
                for (int l = 0; l < 300; l++) {
                        seed = seed * 1103515245 + 12345;
                        unsigned v = (seed >> 16) % 1000;
                        assert_int_equal(buffer_printf(&b, "%s %u: value %u%s\n", v < 30 ? "needle" : "line", l, v,
                                                       v % 7 == 0 ? " needle:tail" : ""), 0);
                }
                put(name, buffer_data(&b), b.len);
                buffer_done(&b);
        }

        char cmd[3 * PATH_MAX];
        snprintf(cmd, sizeof(cmd), "cd %s && grep -rnF -e needle . | sed 's|^\\./||' | LC_ALL=C sort", test_dir);
        FILE *f = popen(cmd, "r");
        assert_non_null(f);
        Buffer expected = BUFFER_NULL;
        char line[4096];
        unsigned n_expected = 0;
        while (fgets(line, sizeof(line), f)) {
                assert_int_equal(buffer_append(&expected, line, strlen(line)), 0);
                n_expected++;
        }
        pclose(f);
        assert_true(n_expected > 100);

        FsGrepResult r = grep("needle", "", NULL);
        char *got = render(&r);
        /* to the same shape: one per line, sorted */
        char path[PATH_MAX];
        snprintf(path, sizeof(path), "%s/../ours.txt", test_dir);
        FILE *o = fopen(path, "w");
        for (char *s = got; *s; s++)
                fputc(*s == '|' ? '\n' : *s, o);
        fputc('\n', o);
        fclose(o);
        snprintf(cmd, sizeof(cmd), "LC_ALL=C sort %s; rm -f %s", path, path);
        f = popen(cmd, "r");
        Buffer ours = BUFFER_NULL;
        while (fgets(line, sizeof(line), f))
                assert_int_equal(buffer_append(&ours, line, strlen(line)), 0);
        pclose(f);
        assert_int_equal(ours.len, expected.len);
        assert_memory_equal(buffer_data(&ours), buffer_data(&expected), expected.len);
        assert_int_equal(r.n_matches, n_expected);
        buffer_done(&ours);
        buffer_done(&expected);
        free(got);
        fs_grep_result_done(&r);
}

/* The prefilter search agrees with memmem() everywhere, including where it gives up. */
static void test_search_matches_memmem(void **state) {
        unsigned seed = 7;
        size_t n = 1 << 16;
        uint8_t *hay = malloc(n);

        for (int round = 0; round < 200; round++) {
                /* small alphabets make false candidates frequent, large ones rare */
                unsigned alphabet = round % 3 == 0 ? 2 : round % 3 == 1 ? 8 : 64;
                for (size_t i = 0; i < n; i++) {
                        seed = seed * 1103515245 + 12345;
                        hay[i] = (uint8_t) ('A' + (seed >> 16) % alphabet);
                }
                size_t len = 1 + round % 9;
                seed = seed * 1103515245 + 12345;
                size_t at = (seed >> 8) % (n - len);
                uint8_t needle[16];
                memcpy(needle, hay + at, len);

                FsSearch s;
                fs_search_init(&s, needle, len);
                const uint8_t *p = hay, *end = hay + n;
                for (;;) {
                        const uint8_t *a = fs_search_find(&s, p, end);
                        const uint8_t *b = memmem(p, (size_t) (end - p), needle, len);
                        assert_ptr_equal(a, b);
                        if (!a)
                                break;
                        p = a + 1;
                }
        }
        /* the empty needle matches at once; a needle longer than the haystack never */
        FsSearch s;
        fs_search_init(&s, "", 0);
        assert_ptr_equal(fs_search_find(&s, hay, hay + 10), hay);
        fs_search_init(&s, "abcdef", 6);
        assert_null(fs_search_find(&s, hay, hay + 5));
        free(hay);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_literal, test_dir_setup, test_dir_teardown),
                cmocka_unit_test_setup_teardown(test_colons_and_names, test_dir_setup, test_dir_teardown),
                cmocka_unit_test_setup_teardown(test_order_and_recursion, test_dir_setup, test_dir_teardown),
                cmocka_unit_test_setup_teardown(test_line_endings_and_numbers, test_dir_setup, test_dir_teardown),
                cmocka_unit_test_setup_teardown(test_long_lines, test_dir_setup, test_dir_teardown),
                cmocka_unit_test_setup_teardown(test_binary_and_encoding, test_dir_setup, test_dir_teardown),
                cmocka_unit_test_setup_teardown(test_globs, test_dir_setup, test_dir_teardown),
                cmocka_unit_test_setup_teardown(test_symlinks, test_dir_setup, test_dir_teardown),
                cmocka_unit_test_setup_teardown(test_max_count, test_dir_setup, test_dir_teardown),
                cmocka_unit_test_setup_teardown(test_budgets, test_dir_setup, test_dir_teardown),
                cmocka_unit_test_setup_teardown(test_roots, test_dir_setup, test_dir_teardown),
                cmocka_unit_test_setup_teardown(test_matches_gnu_grep, test_dir_setup, test_dir_teardown),
                cmocka_unit_test(test_search_matches_memmem),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}

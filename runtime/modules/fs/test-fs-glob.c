/* SPDX-License-Identifier: MIT */
/* fs_glob() and the pattern matcher: the deepagents 0.7 cross-backend glob matrix
 * (test_glob_semantics.py), its hidden-directory, brace and symlink cases; matching
 * directories are listed too (is_dir), as deepagents' BaseSandbox lists them. */
#include "fs-pattern.h"
#include "test-fs-util.h"

/* The tree of test_glob_semantics.py (_write_hidden_tree_on_disk). */
static void make_tree(void) {
        puts_file("a.py", "a");
        puts_file("sub/b.py", "b");
        puts_file("sub/nested/c.py", "c");
        puts_file("readme.md", "docs");
        puts_file(".hidden.py", "h");
        puts_file(".hidden/x.py", "x");
        puts_file(".github/workflows/ci.yml", "name: ci");
}

/* Glob below root (relative to the scratch dir) and compare with the expected paths
 * (relative to root, sorted, comma-separated, directories with a trailing '/'; "" for none). */
static void check_glob(const char *pattern, const char *root, const char *expected) {
        FsGlobResult r = {};
        char got[4096] = "", rootpath[PATH_MAX];
        size_t prefix;

        snprintf(rootpath, sizeof(rootpath), "%s", P(root));
        assert_int_equal(fs_glob(pattern, rootpath, NULL, &r), 0);
        if (r.status.error != FS_OK)
                fail_msg("glob '%s': %s", pattern, r.status.message);
        prefix = strlen(rootpath) + 1;
        for (size_t i = 0; i < r.n_matches; i++) {
                if (i > 0)
                        strcat(got, ",");
                assert_true(strlen(r.matches[i].path) > prefix);
                strcat(got, r.matches[i].path + prefix);
                if (r.matches[i].is_dir)
                        strcat(got, "/");
        }
        if (!streq(got, expected))
                fail_msg("glob '%s' in '%s': expected [%s], got [%s]", pattern, root, expected, got);
        assert_false(r.truncated);
        fs_glob_result_done(&r);
}

static void test_matrix(void **state) {
        make_tree();
        /* (pattern, path, expected) rows of _matrix_expectations(), sorted */
        check_glob("*.py", "", ".hidden/x.py,a.py,sub/b.py,sub/nested/c.py");
        check_glob("**/*.py", "", "a.py,sub/b.py,sub/nested/c.py");
        check_glob("*.md", "", "readme.md");
        check_glob("sub/*.py", "", "sub/b.py");
        check_glob("sub/**/*.py", "", "sub/b.py,sub/nested/c.py");
        check_glob("/*.py", "", "a.py");
        check_glob("a.py/**", "", "");
        check_glob("*.py", "sub", "b.py,nested/c.py");
        check_glob("*.yml", "", ".github/workflows/ci.yml");
        check_glob("**/*.yml", "", "");
        check_glob(".github/**/*.yml", "", ".github/workflows/ci.yml");
        check_glob(".hidden.py", "", ".hidden.py");
        check_glob(".*.py", "", ".hidden.py");
        check_glob("*", "",
                   ".github/workflows/,.github/workflows/ci.yml,.hidden/x.py,a.py,readme.md,sub/,sub/b.py,sub/nested/,"
                   "sub/nested/c.py");
        /* directories by name, nested or not; no match at all */
        check_glob("nested", "", "sub/nested/");
        check_glob("sub/*", "", "sub/b.py,sub/nested/");
        check_glob("**/nested", "", "sub/nested/");
        check_glob(".github/*", "", ".github/workflows/");
        check_glob("*.none", "", "");
        check_glob("*.{py,md}", "", ".hidden/x.py,a.py,readme.md,sub/b.py,sub/nested/c.py");
        check_glob("*.{yml,yaml}", "", ".github/workflows/ci.yml");
        check_glob("?.py", "", ".hidden/x.py,a.py,sub/b.py,sub/nested/c.py");
        check_glob("[ab].py", "", "a.py,sub/b.py");
        check_glob("[!a].py", "", ".hidden/x.py,sub/b.py,sub/nested/c.py");
        check_glob("[^a].py", "", ".hidden/x.py,sub/b.py,sub/nested/c.py");
}

static void test_hidden_dirs(void **state) {
        make_tree();
        puts_file(".hidden/nested/y.py", "y");
        check_glob("*.py", "", ".hidden/nested/y.py,.hidden/x.py,a.py,sub/b.py,sub/nested/c.py");
        check_glob("**/*.py", "", "a.py,sub/b.py,sub/nested/c.py");
        check_glob("**/*.yml", "", "");
        check_glob(".*.py", "", ".hidden.py");
        check_glob(".hidden/*.py", "", ".hidden/x.py");
        check_glob(".hidden/**/*.py", "", ".hidden/nested/y.py,.hidden/x.py");
        check_glob(".github/**/*.yml", "", ".github/workflows/ci.yml");
        /* trailing slashes ask for directories (no files), empty segments collapse */
        check_glob("sub/", "", "");
        check_glob("*.py/", "", "");
        check_glob("sub//b.py", "", "sub/b.py");
        check_glob("/sub/nested/c.py", "", "sub/nested/c.py");
        check_glob("sub/**", "", "sub/b.py,sub/nested/,sub/nested/c.py");
}

static void test_braces(void **state) {
        puts_file("a.py", "x");
        puts_file("b.py", "x");
        puts_file("c.py", "x");
        puts_file("d.py", "x");
        puts_file("{probe}.py", "x");
        puts_file("{x}a.py", "x");
        puts_file("{x}b.py", "x");
        puts_file("probe.py", "x");

        check_glob("{a,{b,c}}.py", "", "a.py,b.py,c.py");
        check_glob("{probe}.py", "", "{probe}.py");
        check_glob("{x}{a,b}.py", "", "{x}a.py,{x}b.py");
        check_glob("{a,}probe.py", "", "probe.py");
        check_glob("{a,b", "", "");
        check_glob("\\{probe\\}.py", "", "{probe}.py");

        /* 2^18 expansions: refused, not expanded */
        char big[128] = "";
        for (int i = 0; i < 18; i++)
                strcat(big, "{a,}");
        strcat(big, "probe.py");
        FsGlobResult r = {};
        assert_int_equal(fs_glob(big, P(""), NULL, &r), 0);
        assert_status(&r.status, FS_ERROR_TOO_LARGE);
        fs_glob_result_done(&r);

        /* 2^4 is fine */
        big[0] = 0;
        for (int i = 0; i < 4; i++)
                strcat(big, "{a,}");
        strcat(big, "probe.py");
        check_glob(big, "", "probe.py");
}

static void test_symlinks(void **state) {
        puts_file("outside/secret.py", "secret");
        puts_file("workspace/src/safe.py", "safe");
        puts_file("workspace/src/real.py", "real");
        assert_int_equal(symlink(P("outside/secret.py"), P("workspace/src/link.py")), 0);
        assert_int_equal(symlink("real.py", P("workspace/src/inside-link.py")), 0);
        assert_int_equal(symlink(P("outside"), P("workspace/dirlink")), 0);
        assert_int_equal(symlink("src", P("workspace/srclink.py")), 0);
        mkdir_p("workspace/adir.py");

        /* escaping links are skipped, links inside count as what they point to (a link to a
         * directory is one, but is not walked), directories match like files */
        check_glob("*.py", "workspace", "adir.py/,src/inside-link.py,src/real.py,src/safe.py,srclink.py/");
}

static void test_errors_and_limits(void **state) {
        FsGlobResult r = {};

        assert_int_equal(fs_glob("../*.py", P(""), NULL, &r), 0);
        assert_status(&r.status, FS_ERROR_INVALID_PATH);
        fs_glob_result_done(&r);
        assert_int_equal(fs_glob("a/../b", P(""), NULL, &r), 0);
        assert_status(&r.status, FS_ERROR_INVALID_PATH);
        fs_glob_result_done(&r);
        /* ".." inside a name is fine */
        puts_file("foo..bar.py", "x");
        check_glob("foo..*", "", "foo..bar.py");

        assert_int_equal(fs_glob("*", P("missing"), NULL, &r), 0);
        assert_status(&r.status, FS_ERROR_FILE_NOT_FOUND);
        fs_glob_result_done(&r);
        assert_int_equal(fs_glob("*", P("foo..bar.py"), NULL, &r), 0);
        assert_status(&r.status, FS_ERROR_NOT_A_DIRECTORY);
        fs_glob_result_done(&r);
        assert_int_equal(fs_glob("*", "rel", NULL, &r), 0);
        assert_status(&r.status, FS_ERROR_INVALID_PATH);
        fs_glob_result_done(&r);

        /* the match cap */
        for (int i = 0; i < 20; i++) {
                char name[32];
                snprintf(name, sizeof(name), "many/f%02d.txt", i);
                puts_file(name, "x");
        }
        assert_int_equal(fs_glob("*.txt", P("many"), &(FsGlobOptions) { .max_matches = 5 }, &r), 0);
        assert_status(&r.status, FS_OK);
        assert_true(r.truncated);
        assert_int_equal(r.n_matches, 5);
        assert_string_equal(r.matches[0].path, P("many/f00.txt"));
        assert_int_equal(r.matches[0].size, 1);
        fs_glob_result_done(&r);
        /* exactly at the cap is complete */
        assert_int_equal(fs_glob("*.txt", P("many"), &(FsGlobOptions) { .max_matches = 20 }, &r), 0);
        assert_false(r.truncated);
        assert_int_equal(r.n_matches, 20);
        fs_glob_result_done(&r);
}

static bool always_cancelled(void *userdata) {
        (*(unsigned *) userdata)++;
        return true;
}

static void test_cancel(void **state) {
        unsigned calls = 0;
        puts_file("x/a.py", "x");
        FsGlobResult r = {};
        assert_int_equal(fs_glob("*.py", P(""), &(FsGlobOptions) { .cancelled = always_cancelled, .userdata = &calls }, &r), 0);
        assert_status(&r.status, FS_OK);
        assert_true(r.truncated);
        assert_true(calls > 0);
        assert_int_equal(r.n_matches, 0);
        fs_glob_result_done(&r);

        /* an exhausted time budget ends the walk the same way */
        assert_int_equal(fs_glob("*.py", P(""), &(FsGlobOptions) { .timeout_usec = 1 }, &r), 0);
        assert_status(&r.status, FS_OK);
        assert_true(r.truncated);
        fs_glob_result_done(&r);
}

static void locked(void *arg) {
        FsGlobResult r = {};
        child_check(fs_glob("*.py", P(""), NULL, &r) == 0);
        child_check(r.status.error == FS_OK);
        child_check(r.truncated); /* the unreadable subtree makes the result partial */
        child_check(r.n_matches == 1);
        fs_glob_result_done(&r);
}

static void test_unreadable_subtree(void **state) {
        puts_file("ok.py", "ok");
        puts_file("locked/hidden.py", "x");
        assert_int_equal(chmod(P("locked"), 0), 0);
        as_nobody(locked, NULL);
}

static void test_segment_matching(void **state) {
        assert_true(fs_pattern_match_segment("*", "abc"));
        assert_false(fs_pattern_match_segment("*", ".abc"));
        assert_true(fs_pattern_match_segment(".*", ".abc"));
        assert_false(fs_pattern_match_segment("?abc", ".abc"));
        assert_false(fs_pattern_match_segment("[.]abc", ".abc"));
        assert_true(fs_pattern_match_segment("a*b*c", "axxbyyc"));
        assert_false(fs_pattern_match_segment("a*b*c", "axxbyy"));
        assert_true(fs_pattern_match_segment("*.tar.gz", "x.tar.gz"));
        assert_true(fs_pattern_match_segment("?", "é"));      /* one character, two bytes */
        assert_true(fs_pattern_match_segment("??", "中文"));
        assert_false(fs_pattern_match_segment("?", "中文"));
        assert_true(fs_pattern_match_segment("[a-c]x", "bx"));
        assert_false(fs_pattern_match_segment("[a-c]x", "dx"));
        assert_true(fs_pattern_match_segment("[!a-c]x", "dx"));
        assert_true(fs_pattern_match_segment("[]]", "]"));
        assert_true(fs_pattern_match_segment("[!]]", "a"));
        assert_true(fs_pattern_match_segment("[", "["));      /* unterminated: literal */
        assert_true(fs_pattern_match_segment("a[b", "a[b"));
        assert_true(fs_pattern_match_segment("\\*", "*"));
        assert_false(fs_pattern_match_segment("\\*", "x"));
        assert_true(fs_pattern_match_segment("[α-ω]", "λ"));
        assert_true(fs_pattern_match_segment("**", "abc"));
        assert_true(fs_pattern_match_segment("", "") || true);
        assert_false(fs_pattern_match_segment("abc", "abcd"));
        assert_false(fs_pattern_match_segment("abcd", "abc"));
        /* a name with invalid UTF-8 still matches '*' and '?' byte by byte */
        assert_true(fs_pattern_match_segment("a?c", "a\xff" "c"));
        assert_true(fs_pattern_match_segment("*", "\xfe\xff"));
}

static void test_path_matching(void **state) {
        FsPattern *p = NULL;

        assert_int_equal(fs_pattern_compile("src/**/*.py", &p), 0);
        assert_true(fs_pattern_is_anchored(p));
        assert_true(fs_pattern_match(p, "src/a.py"));
        assert_true(fs_pattern_match(p, "src/x/y/z/a.py"));
        assert_false(fs_pattern_match(p, "src/.x/a.py"));
        assert_false(fs_pattern_match(p, "lib/src/a.py"));
        p = fs_pattern_free(p);

        assert_int_equal(fs_pattern_compile("*.py", &p), 0);
        assert_false(fs_pattern_is_anchored(p));
        assert_true(fs_pattern_match(p, "deep/.dir/a.py"));
        assert_false(fs_pattern_match(p, "deep/.a.py"));
        p = fs_pattern_free(p);

        assert_int_equal(fs_pattern_compile("**", &p), 0);
        assert_true(fs_pattern_match(p, "a/b/c"));
        assert_false(fs_pattern_match(p, "a/.b"));
        p = fs_pattern_free(p);

        assert_int_equal(fs_pattern_compile("{src,lib}/**/test_*.{c,h}", &p), 0);
        assert_true(fs_pattern_match(p, "lib/x/test_a.h"));
        assert_false(fs_pattern_match(p, "lib/x/test_a.py"));
        p = fs_pattern_free(p);

        assert_int_equal(fs_pattern_compile("../x", &p), -EINVAL);
        assert_int_equal(fs_pattern_compile("a\\..\\b", &p), -EINVAL);

        /* deep nesting is refused rather than recursed into */
        char deep[600] = "";
        for (int i = 0; i < 100; i++)
                strcat(deep, "{a");
        for (int i = 0; i < 100; i++)
                strcat(deep, "}");
        assert_int_equal(fs_pattern_compile(deep, &p), -E2BIG);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_matrix, test_dir_setup, test_dir_teardown),
                cmocka_unit_test_setup_teardown(test_hidden_dirs, test_dir_setup, test_dir_teardown),
                cmocka_unit_test_setup_teardown(test_braces, test_dir_setup, test_dir_teardown),
                cmocka_unit_test_setup_teardown(test_symlinks, test_dir_setup, test_dir_teardown),
                cmocka_unit_test_setup_teardown(test_errors_and_limits, test_dir_setup, test_dir_teardown),
                cmocka_unit_test_setup_teardown(test_cancel, test_dir_setup, test_dir_teardown),
                cmocka_unit_test_setup_teardown(test_unreadable_subtree, test_dir_setup, test_dir_teardown),
                cmocka_unit_test(test_segment_matching),
                cmocka_unit_test(test_path_matching),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}

/* SPDX-License-Identifier: MIT */
/* Unit tests of the parts of agentixctl build that need no packages or Docker: the manifest,
 * canonical host paths, relative links, store-safe names, Python sources' paths relocated. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "bundle-manifest.h"
#include "dpkg-db.h"
#include "fs-util.h"
#include "image-ref.h"
#include "python-relocate.h"
#include "store-path.h"

static char *write_temp(const char *text) {
        char *path = strdup("/tmp/agentix-bundle-test-XXXXXX");
        int fd = mkstemp(path);

        assert_true(fd >= 0);
        assert_int_equal(loop_write(fd, text, strlen(text)), 0);
        close(fd);
        return path;
}

static BundleManifest *load_ok(const char *text) {
        _cleanup_free_ char *path = write_temp(text), *error = NULL;
        BundleManifest *m = NULL;
        int r = bundle_manifest_load(path, &m, &error);

        if (r < 0)
                fail_msg("unexpected error: %s", error);
        unlink(path);
        return m;
}

/* The error must contain `needle` (line numbers included). */
static void load_fails(const char *text, const char *needle) {
        _cleanup_free_ char *path = write_temp(text), *error = NULL, *expected = NULL;
        BundleManifest *m = NULL;
        int r = bundle_manifest_load(path, &m, &error);

        unlink(path);
        assert_int_equal(r, -EINVAL);
        assert_null(m);
        assert_non_null(error);
        if (!strstr(error, needle))
                fail_msg("error '%s' does not say '%s'", error, needle);
        assert_true(strneq(error, path, strlen(path))); /* names the file */
}

static void test_manifest_full(void **state) {
        BundleManifest *m = load_ok("# a comment\n"
                                    "[Bundle]\n"
                                    "Name=my-bundle.1\n"
                                    "Version=1.2_3-rc\n"
                                    "Description=Tools for agents\n"
                                    "[Tools]\n"
                                    "Packages=bash coreutils\n"
                                    "Packages=git\n"
                                    "    python3   ca-certificates\n"
                                    "Programs=/usr/bin/jq /usr/local/bin/tool\n"
                                    "ExcludePackages=perl\n"
                                    "[Module hello]\n"
                                    "Sources=hello.c util.c\n"
                                    "CFlags=-DX=1\n"
                                    "PkgConfig=libcurl\n"
                                    "[Module prebuilt]\n"
                                    "File=build/prebuilt.so\n"
                                    "[Files]\n"
                                    "Copy=data/prompt.txt share/prompt.txt\n"
                                    "[Environment]\n"
                                    "Environment=A=1\n"
                                    "Environment=B=x=y with spaces\n");

        assert_string_equal(m->name, "my-bundle.1");
        assert_string_equal(m->version, "1.2_3-rc");
        assert_string_equal(m->description, "Tools for agents");
        assert_int_equal(strv_length(m->packages), 5);
        assert_string_equal(m->packages[3], "python3"); /* the continuation line */
        assert_string_equal(m->packages[4], "ca-certificates");
        assert_int_equal(strv_length(m->programs), 2);
        assert_true(strv_contains(m->exclude_packages, "perl"));
        assert_int_equal(m->n_modules, 2);
        assert_string_equal(m->modules[0].name, "hello");
        assert_int_equal(strv_length(m->modules[0].sources), 2);
        assert_string_equal(m->modules[0].cflags, "-DX=1");
        assert_string_equal(m->modules[0].pkg_config[0], "libcurl");
        assert_string_equal(m->modules[1].file, "build/prebuilt.so");
        assert_int_equal(m->n_copies, 1);
        assert_string_equal(m->copies[0].dest, "share/prompt.txt");
        assert_int_equal(strv_length(m->environment), 2);
        assert_string_equal(m->environment[1], "B=x=y with spaces");
        bundle_manifest_free(m);
}

static void test_manifest_errors(void **state) {
        const char *head = "[Bundle]\nName=b\nVersion=1\n";
        char buf[512];

        load_fails("[Bundle]\nVersion=1\n", "Name= is missing");
        load_fails("[Bundle]\nName=b\n", "Version= is missing");
        load_fails("[Bundle]\nName=B\nVersion=1\n", ":2: Name=B is not a valid bundle name");
        load_fails("[Bundle]\nName=-b\nVersion=1\n", ":2: Name=-b");
        load_fails("[Bundle]\nName=b\nVersion=latest\n", ":3: Version=latest is not a valid version");
        load_fails("[Bundle]\nName=b\nName=c\nVersion=1\n", ":3: Name= is given twice");
        load_fails("[Bundle]\nName=b\nVersion=1\nColour=red\n", ":4: unknown key 'Colour' in [Bundle]");
        load_fails("[Bundel]\nName=b\n", ":2: unknown section [Bundel]");
        load_fails("[Bundle]\nthis is no key\n", ":2: syntax error");
        memset(buf, 'x', 300);
        memcpy(buf, "[Tools]\nPackages=", 17);
        strcpy(buf + 300, "\n");
        load_fails(buf, ":2: line longer than 199 characters");
        snprintf(buf, sizeof(buf), "%s[Tools]\nPrograms=relative/path\n", head);
        load_fails(buf, ":5: Programs= takes absolute paths");
        snprintf(buf, sizeof(buf), "%s[Module Bad.Name]\nSources=a.c\n", head);
        load_fails(buf, ":5: [Module Bad.Name]");
        snprintf(buf, sizeof(buf), "%s[Module m]\nCFlags=-O3\n", head);
        load_fails(buf, "[Module m] needs either Sources= or File=");
        snprintf(buf, sizeof(buf), "%s[Module m]\nSources=a.c\nFile=m.so\n", head);
        load_fails(buf, "[Module m] needs either Sources= or File=");
        snprintf(buf, sizeof(buf), "%s[Files]\nCopy=a\n", head);
        load_fails(buf, ":5: Copy= takes two paths");
        snprintf(buf, sizeof(buf), "%s[Files]\nCopy=a ../../etc/passwd\n", head);
        load_fails(buf, "must be relative to /nix/runtime");
        snprintf(buf, sizeof(buf), "%s[Files]\nCopy=a /abs\n", head);
        load_fails(buf, "must be relative to /nix/runtime");
        snprintf(buf, sizeof(buf), "%s[Environment]\nEnvironment=1X=2\n", head);
        load_fails(buf, ":5: Environment= takes NAME=VALUE");
        snprintf(buf, sizeof(buf), "%s[Environment]\nEnvironment=NOVALUE\n", head);
        load_fails(buf, ":5: Environment= takes NAME=VALUE");
}

static void test_manifest_missing_file(void **state) {
        _cleanup_free_ char *error = NULL;
        BundleManifest *m = NULL;

        assert_int_equal(bundle_manifest_load("/nonexistent/agentix-bundle.conf", &m, &error), -ENOENT);
        assert_non_null(strstr(error, "/nonexistent/agentix-bundle.conf"));
}

static void test_names(void **state) {
        assert_true(bundle_name_is_valid("a"));
        assert_true(bundle_name_is_valid("a-b_c.d9"));
        assert_false(bundle_name_is_valid(""));
        assert_false(bundle_name_is_valid("A"));
        assert_false(bundle_name_is_valid("a-"));
        assert_false(bundle_name_is_valid("a/b"));
        assert_true(bundle_version_is_valid("1.0"));
        assert_true(bundle_version_is_valid("_x"));
        assert_false(bundle_version_is_valid("-1"));
        assert_false(bundle_version_is_valid("1:2"));
        assert_false(bundle_version_is_valid("latest"));
}

static void check_canonical(const DpkgDb *db, const char *in, const char *out) {
        _cleanup_free_ char *c = NULL;

        assert_int_equal(dpkg_canonical_path(db, in, &c), 0);
        assert_string_equal(c, out);
}

static void test_canonical_path(void **state) {
        DpkgDb merged = { .merged_usr = true }, split = { .merged_usr = false };

        check_canonical(&merged, "/lib/x86_64-linux-gnu/libc.so.6", "/usr/lib/x86_64-linux-gnu/libc.so.6");
        check_canonical(&merged, "/bin/bash", "/usr/bin/bash");
        check_canonical(&merged, "/sbin", "/usr/sbin");
        check_canonical(&merged, "/lib64/ld-linux-x86-64.so.2", "/usr/lib64/ld-linux-x86-64.so.2");
        check_canonical(&merged, "/library/x", "/library/x"); /* a whole component only */
        check_canonical(&merged, "/usr/bin/../lib/./x//y", "/usr/lib/x/y");
        check_canonical(&merged, "/etc/alternatives/../ssl", "/etc/ssl");
        check_canonical(&merged, "/..", "/");
        check_canonical(&split, "/lib/x", "/lib/x");
        assert_int_equal(dpkg_canonical_path(&merged, "relative", &(char *) { NULL }), -EINVAL);
}

static void check_relative(const char *from, const char *to, const char *expected) {
        _cleanup_free_ char *r = relative_path(from, to);

        assert_string_equal(r, expected);
}

static void test_relative_path(void **state) {
        check_relative("bin", "bin/python3.11", "python3.11");
        check_relative("bin", "lib/x/libz.so.1", "../lib/x/libz.so.1");
        check_relative("lib/x86_64-linux-gnu", "lib/x86_64-linux-gnu/libz.so.1.2", "libz.so.1.2");
        check_relative("share/a/b", "share/c", "../../c");
        check_relative("", "bin/x", "bin/x");
        check_relative("lib", "lib64/ld.so", "../lib64/ld.so"); /* lib is not a prefix of lib64 */
        check_relative("a/b", "a/b", ".");
}

static void test_store_safe_name(void **state) {
        _cleanup_free_ char *a = store_safe_name("1:2.39.5-0+deb12u3"), *b = store_safe_name("1.0~rc1 x");

        assert_string_equal(a, "1_2.39.5-0+deb12u3");
        assert_string_equal(b, "1.0_rc1_x");
}

static void check_ref(const char *ref, const char *repository, const char *tag) {
        _cleanup_free_ char *r = NULL, *t = NULL;

        if (!repository) {
                assert_int_equal(image_ref_split(ref, &r, &t), -EINVAL);
                return;
        }
        assert_int_equal(image_ref_split(ref, &r, &t), 0);
        assert_string_equal(r, repository);
        assert_string_equal(t, tag);
}

static void test_image_ref(void **state) {
        check_ref("example-bundle:0.1.0", "example-bundle", "0.1.0");
        check_ref("agentix-test/example", "agentix-test/example", "latest");
        check_ref("localhost:5000/team/b:v2", "localhost:5000/team/b", "v2");
        check_ref("localhost:5000/team/b", "localhost:5000/team/b", "latest");
        check_ref("Upper:1", NULL, NULL);       /* repositories are lower-case */
        check_ref("a:", NULL, NULL);            /* an empty tag */
        check_ref(":1", NULL, NULL);
        check_ref("a:-x", NULL, NULL);
        check_ref("a//b:1", NULL, NULL);
        check_ref("a/:1", NULL, NULL);
        check_ref("a b:1", NULL, NULL);
        check_ref("a:x y", NULL, NULL);
}

static const TextRewrite *rewrite_of(const StoreFile *f, const char *from) {
        for (size_t i = 0; i < f->n_text_rewrites; i++)
                if (streq(f->text_rewrites[i].from, from))
                        return &f->text_rewrites[i];
        return NULL;
}

/* Quoted /usr/share/… paths (files or directories) and /etc/… files that the closure holds are
 * rewritten to their store path; others, and paths that are no plain literals, stay. Only
 * .py files under dist-packages are read. */
static void test_python_relocate(void **state) {
        static const char source[] =
                "ZONES = '/usr/share/zoneinfo'\n"
                "DATA = \"/usr/share/matplotlib/mpl-data\"\n"
                "RC = '/etc/matplotlibrc'\n"
                "AGAIN = '/etc/matplotlibrc'\n"
                "HOSTS = '/etc/hosts'\n"                     /* the image's, not the bundle's */
                "ETCDIR = '/etc/matplotlib'\n"              /* /etc: files only */
                "MISSING = '/usr/share/nothing/here'\n"
                "FORMAT = '/usr/share/%s/x'\n"
                "PREFIX = '/usr/share/'\n"
                "BARE = /usr/share/zoneinfo\n"              /* not quoted */
                "JOINED = '/usr/share/zoneinfo' + '/UTC'\n";
        _cleanup_free_ char *py = write_temp(source), *data = write_temp("x"), *other = write_temp(source);
        StorePath *pkg = store_path_new("python-foo", "1"), *tz = store_path_new("tzdata", "1"),
                  *mpl = store_path_new("matplotlib-data", "1");
        StorePath *paths[] = { pkg, tz, mpl };
        Closure c = { .paths = paths, .n_paths = ELEMENTSOF(paths) };
        const TextRewrite *t;
        StoreFile *f, *g;

        assert_int_equal(store_path_add_file(pkg, py, "lib/python3/dist-packages/foo/__init__.py"), 1);
        assert_int_equal(store_path_add_file(pkg, other, "share/doc/foo/example.py"), 1); /* not a package's */
        assert_int_equal(store_path_add_file(tz, data, "share/zoneinfo/UTC"), 1);
        assert_int_equal(store_path_add_file(mpl, data, "share/matplotlib/mpl-data/matplotlibrc"), 1);
        assert_int_equal(store_path_add_file(mpl, data, "etc/matplotlibrc"), 1);
        assert_int_equal(store_path_add_file(mpl, data, "etc/matplotlib/x"), 1);

        assert_int_equal(relocate_python_paths(&c), 0);
        f = store_path_find(pkg, "lib/python3/dist-packages/foo/__init__.py");
        assert_non_null(f);
        assert_int_equal(f->n_text_rewrites, 3);
        t = rewrite_of(f, "/usr/share/zoneinfo");
        assert_non_null(t);
        assert_ptr_equal(t->to.path, tz);
        assert_string_equal(t->to.dest, "share/zoneinfo");
        t = rewrite_of(f, "/usr/share/matplotlib/mpl-data");
        assert_non_null(t);
        assert_ptr_equal(t->to.path, mpl);
        assert_string_equal(t->to.dest, "share/matplotlib/mpl-data");
        t = rewrite_of(f, "/etc/matplotlibrc");
        assert_non_null(t);
        assert_ptr_equal(t->to.path, mpl);
        assert_string_equal(t->to.dest, "etc/matplotlibrc");
        g = store_path_find(pkg, "share/doc/foo/example.py");
        assert_non_null(g);
        assert_int_equal(g->n_text_rewrites, 0);

        unlink(py);
        unlink(data);
        unlink(other);
        for (size_t i = 0; i < ELEMENTSOF(paths); i++)
                store_path_free(paths[i]);
        free(c.error);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_manifest_full),
                cmocka_unit_test(test_manifest_errors),
                cmocka_unit_test(test_manifest_missing_file),
                cmocka_unit_test(test_names),
                cmocka_unit_test(test_canonical_path),
                cmocka_unit_test(test_relative_path),
                cmocka_unit_test(test_store_safe_name),
                cmocka_unit_test(test_image_ref),
                cmocka_unit_test(test_python_relocate),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}

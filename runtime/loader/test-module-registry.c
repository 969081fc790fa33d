/* SPDX-License-Identifier: MIT */
/* The module registry against real shared objects (test-module.c, one per way a module can be
 * broken), copied into a temporary module directory: resolution, every load error, shapes,
 * malformed callables, failures that stay failed, built-ins winning over C modules, and the
 * cost of a resolve. Arguments: the paths of the built test modules. */

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "macro.h"
#include "module-registry.h"

#define check(expr)                                                                     \
        do {                                                                            \
                if (!(expr)) {                                                          \
                        fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #expr); \
                        abort();                                                        \
                }                                                                       \
        } while (0)

#define check_streq(a, b)                                                               \
        do {                                                                            \
                const char *_a = (a), *_b = (b);                                        \
                if (!_a || !_b || strcmp(_a, _b) != 0) {                                \
                        fprintf(stderr, "%s:%d: \"%s\" != \"%s\"\n", __FILE__, __LINE__, strna(_a), strna(_b)); \
                        abort();                                                        \
                }                                                                       \
        } while (0)

static char module_dir[] = "/tmp/test-module-registry-XXXXXX";
static char **module_paths;
static int n_module_paths;

static void copy_module_file(const char *from, const char *to) {
        _cleanup_close_ int in = -EBADF, out = -EBADF;
        char buf[65536];
        ssize_t n;

        in = open(from, O_RDONLY | O_CLOEXEC);
        check(in >= 0);
        out = open(to, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0755);
        check(out >= 0);
        while ((n = read(in, buf, sizeof(buf))) > 0)
                check(loop_write(out, buf, (size_t) n) == 0);
        check(n == 0);
}

/* Put the built module <name>.so into the module directory. */
static void install_module(const char *name) {
        _cleanup_free_ char *file = NULL, *to = NULL;

        check(asprintf(&file, "%s.so", name) > 0);
        check(asprintf(&to, "%s/%s", module_dir, file) > 0);
        for (int i = 0; i < n_module_paths; i++) {
                _cleanup_free_ char *copy = strdup(module_paths[i]);
                if (streq(basename(copy), file)) {
                        copy_module_file(module_paths[i], to);
                        return;
                }
        }
        fprintf(stderr, "test module %s not among the arguments\n", file);
        abort();
}

static void uninstall_module(const char *name) {
        _cleanup_free_ char *path = NULL;

        check(asprintf(&path, "%s/%s.so", module_dir, name) > 0);
        check(unlink(path) == 0);
}

static void resolve_fails(ModuleRegistry *reg, const char *callable, agentix_shape shape, int expected_r,
                          const char *expected_error) {
        _cleanup_free_ char *error = NULL;
        const ResolvedCallable *c = NULL;
        int r;

        r = module_registry_resolve(reg, callable, shape, &c, &error);
        if (r != expected_r) {
                fprintf(stderr, "resolve %s: got %d (%s), expected %d\n", callable, r, strna(error), expected_r);
                abort();
        }
        check(!c);
        if (expected_error && !strstr(strna(error), expected_error)) {
                fprintf(stderr, "resolve %s: error \"%s\" lacks \"%s\"\n", callable, strna(error), expected_error);
                abort();
        }
        check(error); /* there is always a message */
}

static const ResolvedCallable *resolve_ok(ModuleRegistry *reg, const char *callable, agentix_shape shape) {
        _cleanup_free_ char *error = NULL;
        const ResolvedCallable *c = NULL;
        int r;

        r = module_registry_resolve(reg, callable, shape, &c, &error);
        if (r < 0) {
                fprintf(stderr, "resolve %s failed: %d %s\n", callable, r, strna(error));
                abort();
        }
        check(c && c->module && c->function && c->signature);
        check(c->function->shape == shape);
        return c;
}

/* Bind JSON-free: positional ints only, enough for the test module's functions. */
static int call_ints(const ResolvedCallable *c, const int64_t *ints, uint32_t n) {
        msgpack_zone *zone = msgpack_zone_new(1024);
        msgpack_object items[8], args = { .type = MSGPACK_OBJECT_ARRAY, .via.array = { n, items } }, *argv;
        _cleanup_free_ char *error = NULL;
        int r;

        check(zone && n <= ELEMENTSOF(items));
        for (uint32_t i = 0; i < n; i++)
                items[i] = (msgpack_object) { .type = MSGPACK_OBJECT_POSITIVE_INTEGER, .via.u64 = (uint64_t) ints[i] };
        check(signature_bind(c->signature, c->function->name, &args, NULL, zone, &argv, &error) == 0);
        r = c->function->impl(NULL, argv, signature_n_params(c->signature));
        msgpack_zone_free(zone);
        return r;
}

static void test_good_module(ModuleRegistry *reg) {
        const ResolvedCallable *add, *c;

        /* Not there yet: not found, and not remembered as missing. */
        resolve_fails(reg, "good::add", AGENTIX_SHAPE_UNARY, -ENOENT, "No module named 'good'");
        install_module("good");

        add = resolve_ok(reg, "good::add", AGENTIX_SHAPE_UNARY);
        check_streq(add->module->name, "good");
        check_streq(add->function->name, "add");
        check(signature_n_params(add->signature) == 2);
        check_streq(signature_param_name(add->signature, 1), "b");
        check(call_ints(add, (int64_t[]) { 2 }, 1) == 3);     /* b's default */
        check(call_ints(add, (int64_t[]) { 2, 5 }, 2) == 7);

        /* The same pointer every time: the lookup and the signature are cached. */
        check(resolve_ok(reg, "good::add", AGENTIX_SHAPE_UNARY) == add);

        /* One name, two shapes. */
        c = resolve_ok(reg, "good::tick", AGENTIX_SHAPE_UNARY);
        check(c->function->impl(NULL, NULL, 0) == 1);
        c = resolve_ok(reg, "good::tick", AGENTIX_SHAPE_STREAM);
        check(c->function->impl(NULL, NULL, 0) == 2);
        resolve_fails(reg, "good::tick", AGENTIX_SHAPE_BIDI, -EPROTOTYPE,
                      "good::tick cannot be called as bidi (it is unary, stream)");
        resolve_fails(reg, "good::add", AGENTIX_SHAPE_STREAM, -EPROTOTYPE,
                      "good::add cannot be called as stream (it is unary)");
        resolve_fails(reg, "good::nope", AGENTIX_SHAPE_UNARY, -ENOENT, "module 'good' has no function 'nope'");
        resolve_fails(reg, "good::ad", AGENTIX_SHAPE_UNARY, -ENOENT, "module 'good' has no function 'ad'");
        resolve_fails(reg, "good::add", (agentix_shape) 7, -EINVAL, "unknown call shape 7");

        /* The function calls back into the program (agentix_arg_strdup): symbols resolve. */
        c = resolve_ok(reg, "good::length", AGENTIX_SHAPE_UNARY);
        msgpack_object s = { .type = MSGPACK_OBJECT_STR, .via.str = { 5, "hello" } };
        check(c->function->impl(NULL, &s, 1) == 5);

        /* init() ran exactly once, however often the module is used. */
        for (int i = 0; i < 100; i++)
                c = resolve_ok(reg, "good::init_count", AGENTIX_SHAPE_UNARY);
        check(c->function->impl(NULL, NULL, 0) == 1);
}

static void test_broken_modules(ModuleRegistry *reg) {
        static const struct {
                const char *name;
                const char *error;
        } broken[] = {
                { "badsig", "module 'badsig' failed to load: function 'broken': bad signature \"(path: string)\": "
                            "column 8: expected a type (str, bytes, int, float, bool, map, list, any or none), "
                            "found 'string'" },
                { "badabi", "module 'badabi' failed to load: module ABI 2, expected 1" },
                { "initfail", "module 'initfail' failed to load: init() failed: Cannot assign requested address" },
                { "dupname", "module 'dupname' failed to load: function 'add' is declared twice as unary" },
                { "misnamed", "module 'misnamed' failed to load: its descriptor names the module 'something_else', "
                              "not 'misnamed'" },
                { "nosymbol", "does not export the symbol agentix_module_v1" },
        };

        for (size_t i = 0; i < ELEMENTSOF(broken); i++) {
                _cleanup_free_ char *callable = NULL;

                install_module(broken[i].name);
                check(asprintf(&callable, "%s::add", broken[i].name) > 0);
                resolve_fails(reg, callable, AGENTIX_SHAPE_UNARY, -ELIBBAD, broken[i].error);

                /* Failed stays failed, with the same error: even with the file gone, which a
                 * retried dlopen() would notice. */
                uninstall_module(broken[i].name);
                resolve_fails(reg, callable, AGENTIX_SHAPE_UNARY, -ELIBBAD, broken[i].error);
                resolve_fails(reg, callable, AGENTIX_SHAPE_STREAM, -ELIBBAD, broken[i].error);
        }

        /* A file that is not a shared object at all. */
        _cleanup_free_ char *path = NULL;
        check(asprintf(&path, "%s/junk.so", module_dir) > 0);
        FILE *f = fopen(path, "we");
        check(f);
        fputs("not an ELF file\n", f);
        fclose(f);
        resolve_fails(reg, "junk::f", AGENTIX_SHAPE_UNARY, -ELIBBAD, "module 'junk' failed to load: ");
        check(unlink(path) == 0);
}

static void test_malformed_callables(ModuleRegistry *reg) {
        static const char *const bad[] = {
                "",           "good",      "good:",        "good:add",   "good::",     "::add",
                "../x::f",    "a/b::f",    "good::add::x", "good::1add", "good:: add", "go od::add",
                "good::add ", "good.so::add", "good::a-b", "/abs::f",    "x\xff::f",   "x::f\n",
        };

        for (size_t i = 0; i < ELEMENTSOF(bad); i++)
                resolve_fails(reg, bad[i], AGENTIX_SHAPE_UNARY, -EINVAL, "malformed callable");

        /* Unprintable callables are not echoed back. */
        _cleanup_free_ char *error = NULL;
        const ResolvedCallable *c;
        check(module_registry_resolve(reg, "x\x01::f", AGENTIX_SHAPE_UNARY, &c, &error) == -EINVAL);
        check(!strchr(error, '\x01'));

        /* Names longer than MODULE_REGISTRY_NAME_MAX. */
        char longname[MODULE_REGISTRY_NAME_MAX + 8];
        memset(longname, 'm', MODULE_REGISTRY_NAME_MAX + 1);
        strcpy(longname + MODULE_REGISTRY_NAME_MAX + 1, "::f");
        resolve_fails(reg, longname, AGENTIX_SHAPE_UNARY, -EINVAL, "malformed callable");

        /* A NULL ret_error is fine. */
        check(module_registry_resolve(reg, "../x::f", AGENTIX_SHAPE_UNARY, &c, NULL) == -EINVAL);
        check(module_registry_resolve(reg, "nothere::f", AGENTIX_SHAPE_UNARY, &c, NULL) == -ENOENT);
}

/* Built-in tables of this test (the worker's real ones need its call API, which unit tests do
 * not link; test-example-module checks those in a real worker). */
static int builtin_stat(agentix_call *call, const msgpack_object *argv, size_t argc) {
        return 7;
}

static const agentix_function builtin_fs_functions[] = {
        { "stat", AGENTIX_SHAPE_UNARY, "(path: str) -> map", builtin_stat, NULL },
        {},
};

static const agentix_function builtin_broken_functions[] = {
        { "f", AGENTIX_SHAPE_UNARY, "(x: nope)", builtin_stat, NULL },
        {},
};

static const agentix_module builtin_fs = {
        .abi = AGENTIX_MODULE_ABI,
        .name = "fs",
        .functions = builtin_fs_functions,
};

static const agentix_module builtin_broken = {
        .abi = AGENTIX_MODULE_ABI,
        .name = "broken",
        .functions = builtin_broken_functions,
};

static const agentix_module *const test_builtins_table[] = { &builtin_fs, &builtin_broken };

static void test_builtins(ModuleRegistry *reg) {
        const ResolvedCallable *c;

        c = resolve_ok(reg, "fs::stat", AGENTIX_SHAPE_UNARY);
        check(c->module == &builtin_fs);
        check(c->function->impl(NULL, NULL, 0) == 7);

        /* A C module named like a built-in is never loaded: fs.so has "shadow", the built-in has not. */
        install_module("fs");
        resolve_fails(reg, "fs::shadow", AGENTIX_SHAPE_UNARY, -ENOENT, "module 'fs' has no function 'shadow'");

        /* Built-ins are checked like C modules, on first use. */
        resolve_fails(reg, "broken::f", AGENTIX_SHAPE_UNARY, -ELIBBAD,
                      "module 'broken' failed to load: function 'f': bad signature \"(x: nope)\": column 5");

        /* Built-in names must be names. */
        const agentix_module bad_name = { .abi = AGENTIX_MODULE_ABI, .name = "../fs", .functions = builtin_fs_functions };
        const agentix_module *const bad[] = { &bad_name };
        ModuleRegistry *r2 = NULL;
        check(module_registry_new_with(module_dir, bad, 1, &r2) == -EINVAL);
        check(!r2);
}

static void test_pointers_stay_valid(ModuleRegistry *reg) {
        const ResolvedCallable *add = resolve_ok(reg, "good::add", AGENTIX_SHAPE_UNARY);
        char name[32];

        /* Adding modules grows the registry's array; resolved callables must not move. */
        for (int i = 0; i < 20; i++) {
                snprintf(name, sizeof(name), "m%02d::f", i);
                resolve_fails(reg, name, AGENTIX_SHAPE_UNARY, -ENOENT, "No module named");
        }
        install_module("initfail"); /* a new entry, sorted in before "good" */
        resolve_fails(reg, "initfail::f", AGENTIX_SHAPE_UNARY, -ELIBBAD, NULL);
        check(resolve_ok(reg, "good::add", AGENTIX_SHAPE_UNARY) == add);
        check(call_ints(add, (int64_t[]) { 40, 2 }, 2) == 42);
}

/* Only files that exist get an entry, and entries are capped, failed modules included. */
static void test_module_cap(void) {
        char dir[] = "/tmp/test-module-cap-XXXXXX", path[128], callable[32];
        ModuleRegistry *reg = NULL;
        unsigned n = MODULE_REGISTRY_MODULES_MAX + 3;

        check(mkdtemp(dir));
        for (unsigned i = 0; i < n; i++) {
                snprintf(path, sizeof(path), "%s/j%03u.so", dir, i);
                FILE *f = fopen(path, "we");
                check(f);
                fclose(f);
        }

        check(module_registry_new_with(dir, test_builtins_table, ELEMENTSOF(test_builtins_table), &reg) == 0);
        for (unsigned i = 0; i < n; i++) {
                /* The two built-ins hold two of the places. */
                bool fits = i < MODULE_REGISTRY_MODULES_MAX - 2;

                snprintf(callable, sizeof(callable), "j%03u::f", i);
                resolve_fails(reg, callable, AGENTIX_SHAPE_UNARY, -ELIBBAD,
                              fits ? "failed to load" : "256 modules are loaded already");
        }
        /* Those that got in are remembered as failed; the built-ins still work. */
        resolve_fails(reg, "j000::f", AGENTIX_SHAPE_UNARY, -ELIBBAD, "failed to load");
        resolve_fails(reg, "fs::nope", AGENTIX_SHAPE_UNARY, -ENOENT, "module 'fs' has no function 'nope'");
        module_registry_free(reg);

        for (unsigned i = 0; i < n; i++) {
                snprintf(path, sizeof(path), "%s/j%03u.so", dir, i);
                check(unlink(path) == 0);
        }
        check(rmdir(dir) == 0);
}

static void test_module_dir_from_environment(void) {
        ModuleRegistry *reg = NULL;

        check(setenv("AGENTIX_MODULE_DIR", module_dir, 1) == 0);
        check(module_registry_new_with(NULL, NULL, 0, &reg) == 0);
        resolve_ok(reg, "good::add", AGENTIX_SHAPE_UNARY);
        module_registry_free(reg);

        /* Without it: the compiled-in default, which has no "good" here. */
        check(unsetenv("AGENTIX_MODULE_DIR") == 0);
        check(module_registry_new_with(NULL, NULL, 0, &reg) == 0);
        resolve_fails(reg, "good::add", AGENTIX_SHAPE_UNARY, -ENOENT, "No module named 'good'");
        module_registry_free(reg);

        check(module_registry_new_with("", NULL, 0, &reg) == -EINVAL);
        check(module_registry_free(NULL) == NULL);
}

static void bench_resolve(ModuleRegistry *reg) {
        const unsigned N = 1000000;
        const ResolvedCallable *c = NULL;
        unsigned long long t0, t1;
        msgpack_zone *zone;
        msgpack_object item = { .type = MSGPACK_OBJECT_POSITIVE_INTEGER, .via.u64 = 1 };
        msgpack_object args = { .type = MSGPACK_OBJECT_ARRAY, .via.array = { 1, &item } }, *argv;

        t0 = now_usec();
        for (unsigned i = 0; i < N; i++)
                check(module_registry_resolve(reg, "good::add", AGENTIX_SHAPE_UNARY, &c, NULL) == 0);
        t1 = now_usec();
        double resolve_ns = (double) (t1 - t0) * 1000.0 / N;

        zone = msgpack_zone_new(4096);
        check(zone);
        t0 = now_usec();
        for (unsigned i = 0; i < N; i++) {
                check(signature_bind(c->signature, "add", &args, NULL, zone, &argv, NULL) == 0);
                msgpack_zone_clear(zone);
        }
        t1 = now_usec();
        double bind_ns = (double) (t1 - t0) * 1000.0 / N;
        msgpack_zone_free(zone);

        printf("resolve \"good::add\": %.0f ns per call; bind (1 positional + 1 default): %.0f ns per call "
               "(%u each)\n", resolve_ns, bind_ns, N);
        /* Generous enough for sanitizers and a busy machine; a regression to dlopen() or a
         * directory scan per call would be tens of microseconds. */
        check(resolve_ns < 5000);
}

int main(int argc, char *argv[]) {
        ModuleRegistry *reg = NULL;

        module_paths = argv + 1;
        n_module_paths = argc - 1;
        check(mkdtemp(module_dir));

        check(module_registry_new_with(module_dir, test_builtins_table, ELEMENTSOF(test_builtins_table), &reg) == 0);
        test_good_module(reg);
        test_broken_modules(reg);
        test_malformed_callables(reg);
        test_builtins(reg);
        test_pointers_stay_valid(reg);
        bench_resolve(reg);
        module_registry_free(reg);

        test_module_dir_from_environment();
        test_module_cap();

        uninstall_module("good");
        uninstall_module("fs");
        uninstall_module("initfail");
        check(rmdir(module_dir) == 0);
        printf("test-module-registry: all passed\n");
        return 0;
}

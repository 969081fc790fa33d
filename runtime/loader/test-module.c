/* SPDX-License-Identifier: MIT */
/* Modules for test-module-registry. Built once per variant (meson.build), each as <variant>.so:
 *   good      a module that loads: unary and stream functions, one name with two shapes, init()
 *   badsig    one function has a signature that does not parse
 *   badabi    its descriptor claims an ABI this agentix does not speak
 *   initfail  init() fails with -EADDRNOTAVAIL
 *   dupname   declares the same function twice for one shape
 *   misnamed  its descriptor names another module than the file
 *   nosymbol  exports no descriptor at all
 *   fs        clashes with the built-in module "fs" (must never be loaded)
 * The functions do not use agentix_call_* (the worker provides those): they return a number
 * the test can check, which is enough to prove the registry handed out the right function. */

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "agentix-module.h"

static int init_count;

/* Unary add(a, b): returns a + b so the test can check binding reached the function. */
static int f_add(agentix_call *call, const msgpack_object *argv, size_t argc) {
        if (argc != 2)
                return -EINVAL;
        return (int) (argv[0].via.i64 + argv[1].via.i64);
}

/* Uses a helper exported by the program, which proves those symbols resolve. */
static int f_length(agentix_call *call, const msgpack_object *argv, size_t argc) {
        char *s = agentix_arg_strdup(&argv[0]);
        int n;

        if (!s)
                return -errno;
        n = (int) strlen(s);
        free(s);
        return n;
}

static int f_tick_unary(agentix_call *call, const msgpack_object *argv, size_t argc) {
        return 1;
}

static int f_tick_stream(agentix_call *call, const msgpack_object *argv, size_t argc) {
        return 2;
}

static int f_init_count(agentix_call *call, const msgpack_object *argv, size_t argc) {
        return init_count;
}

__attribute__((unused)) static int module_init(void) {
        init_count++;
#ifdef TEST_MODULE_INITFAIL
        return -EADDRNOTAVAIL;
#else
        return 0;
#endif
}

static const agentix_function functions[] = {
        { "add", AGENTIX_SHAPE_UNARY, "(a: int, b: int = 1) -> int", f_add, "a + b" },
        { "length", AGENTIX_SHAPE_UNARY, "(s: str | bytes) -> int", f_length, NULL },
        { "tick", AGENTIX_SHAPE_STREAM, "()", f_tick_stream, NULL },
        { "tick", AGENTIX_SHAPE_UNARY, "() -> int", f_tick_unary, NULL },
        { "init_count", AGENTIX_SHAPE_UNARY, "() -> int", f_init_count, NULL },
#ifdef TEST_MODULE_BADSIG
        { "broken", AGENTIX_SHAPE_UNARY, "(path: string)", f_add, NULL },
#endif
#ifdef TEST_MODULE_DUPNAME
        { "add", AGENTIX_SHAPE_UNARY, "(a: int, b: int) -> int", f_add, NULL },
#endif
#ifdef TEST_MODULE_FS
        { "shadow", AGENTIX_SHAPE_UNARY, "() -> int", f_tick_unary, NULL },
#endif
        {},
};

#if defined(TEST_MODULE_GOOD)
AGENTIX_MODULE(.name = "good", .doc = "test module", .functions = functions, .init = module_init);
#elif defined(TEST_MODULE_BADSIG)
AGENTIX_MODULE(.name = "badsig", .functions = functions);
#elif defined(TEST_MODULE_INITFAIL)
AGENTIX_MODULE(.name = "initfail", .functions = functions, .init = module_init);
#elif defined(TEST_MODULE_DUPNAME)
AGENTIX_MODULE(.name = "dupname", .functions = functions);
#elif defined(TEST_MODULE_MISNAMED)
AGENTIX_MODULE(.name = "something_else", .functions = functions);
#elif defined(TEST_MODULE_FS)
AGENTIX_MODULE(.name = "fs", .functions = functions);
#elif defined(TEST_MODULE_BADABI)
/* What a module built against a future agentix-module.h would look like. */
__attribute__((visibility("default"))) const agentix_module agentix_module_v1 = {
        .abi = AGENTIX_MODULE_ABI + 1,
        .name = "badabi",
        .functions = functions,
};
#elif defined(TEST_MODULE_NOSYMBOL)
/* Only a differently named symbol: the loader must not find a descriptor. */
__attribute__((visibility("default"))) const agentix_module agentix_module_v0 = {
        .abi = AGENTIX_MODULE_ABI,
        .name = "nosymbol",
        .functions = functions,
};
#else
#error "build with one TEST_MODULE_<VARIANT> defined"
#endif

/* SPDX-License-Identifier: MIT */
#pragma once

/* Where callables come from: the built-in modules compiled into the worker (sandbox, fs) and
 * C modules (<module_dir>/<name>.so, exporting agentix_module_v1). A module is loaded on first
 * use and kept; each function's signature is parsed once and cached. Used from the worker's
 * dispatch thread only. */

#include "agentix-module.h"
#include "signature.h"

#define MODULE_REGISTRY_NAME_MAX 64         /* bytes of a module or function name */
#define MODULE_REGISTRY_FUNCTIONS_MAX 1024  /* entries of one module's function table */
#define MODULE_REGISTRY_MODULES_MAX 256     /* modules held at once (built-ins included) */

typedef struct ModuleRegistry ModuleRegistry;

typedef struct ResolvedCallable {
        const agentix_module *module;
        const agentix_function *function;
        const Signature *signature;
} ResolvedCallable;

/* A registry of the built-in modules (sandbox, fs) and the C modules in module_dir; NULL means
 * $AGENTIX_MODULE_DIR, else the compiled-in default (/nix/runtime/lib/agentix/modules).
 * Nothing is loaded until the first resolve. (module-builtins.c; links the built-in modules.) */
int module_registry_new(const char *module_dir, ModuleRegistry **ret);
/* The same with another set of built-in tables (tests, or programs without the worker's call
 * API, which the real built-ins need). -EINVAL for a built-in without a valid name. */
int module_registry_new_with(const char *module_dir, const agentix_module *const *builtins, size_t n_builtins,
                             ModuleRegistry **ret);
ModuleRegistry *module_registry_free(ModuleRegistry *r);

/* Resolve "module::function" for a call of the given shape. A module may list the same
 * function name once per shape. Returns 0 and a pointer owned by the registry, or:
 *   -EINVAL      malformed callable string        (BadRequest)
 *   -ENOENT      no such module or function       (NoSuchCallable)
 *   -EPROTOTYPE  function exists, not this shape  (BadRequest)
 *   -ELIBBAD     the module failed to load/init   (NoSuchCallable, message says why)
 * with a malloc()ed *ret_error a person can act on. */
int module_registry_resolve(ModuleRegistry *r, const char *callable, agentix_shape shape,
                            const ResolvedCallable **ret, char **ret_error);

/* Built-in module tables (runtime/modules/). */
extern const agentix_module agentix_builtin_sandbox;
extern const agentix_module agentix_builtin_fs;
extern const agentix_module agentix_builtin_runtime;
extern const agentix_module agentix_builtin_shell;
extern const agentix_module agentix_builtin_code;

/* The worker is done (no call runs any more): built-ins end what would outlive it (the code
 * module's kernels, in sessions of their own) and free what they hold. module-builtins.c. */
void module_builtins_shutdown(void);
void code_module_shutdown(void);

/* SPDX-License-Identifier: MIT */
/* The module registry: from "module::function" to the function, its shape and its parsed
 * signature.
 *
 * Modules are kept in an array sorted by name, each module's functions in an array sorted by
 * (name, shape); resolving is two binary searches over short arrays, with no allocation and no
 * system call once the module is loaded. A module enters the array only when it exists (a
 * built-in, or a file <module_dir>/<name>.so), so peers asking for made-up names cannot grow
 * it. It is loaded on first use; a module that fails to load keeps its error and is never
 * tried again (dlopen() is not cheap, and a broken module does not heal by itself). */

#include <assert.h>
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "log.h"
#include "macro.h"
#include "module-registry.h"

typedef enum ModuleState {
        MODULE_UNLOADED,
        MODULE_LOADED,
        MODULE_FAILED,
} ModuleState;

typedef struct Module {
        char *name;
        size_t name_len;
        bool builtin;
        ModuleState state;
        char *error;                  /* MODULE_FAILED: why, for every later resolve */
        void *dl;                     /* dlopen() handle; NULL for built-ins */
        const agentix_module *table;  /* built-ins: from the start; C modules: once opened */
        ResolvedCallable *callables;  /* sorted by function name, then shape */
        size_t n_callables;
} Module;

struct ModuleRegistry {
        char *module_dir;
        Module **modules; /* sorted by name; Module objects never move, so pointers into them stay valid */
        size_t n_modules;
};

/* The exported module helpers (module-api.c) are referenced by nothing in the worker itself;
 * naming them here pulls them out of the static library into every program that can load
 * modules, so that a module's references to them always resolve. */
const void *const agentix_module_api_anchor[] = {
        (const void *) agentix_arg_strdup,  (const void *) agentix_map_get,
        (const void *) agentix_pack_cstr,   (const void *) agentix_pack_kv_str,
        (const void *) agentix_pack_kv_int, (const void *) agentix_pack_kv_bool,
};

static const char *shape_name(agentix_shape shape) {
        switch (shape) {
        case AGENTIX_SHAPE_UNARY:
                return "unary";
        case AGENTIX_SHAPE_STREAM:
                return "stream";
        case AGENTIX_SHAPE_BIDI:
                return "bidi";
        default:
                return "unknown";
        }
}

static bool shape_is_valid(int shape) {
        return shape >= AGENTIX_SHAPE_UNARY && shape <= AGENTIX_SHAPE_BIDI;
}

static size_t module_name_length(const char *s) {
        size_t n = 0;

        while ((s[n] >= 'A' && s[n] <= 'Z') || (s[n] >= 'a' && s[n] <= 'z') || (s[n] >= '0' && s[n] <= '9') ||
               s[n] == '_')
                n++;
        return n;
}

static size_t function_name_length(const char *s) {
        if (!((s[0] >= 'A' && s[0] <= 'Z') || (s[0] >= 'a' && s[0] <= 'z') || s[0] == '_'))
                return 0;
        return module_name_length(s);
}

/* Resolve errors are optional for the caller, and best effort (NULL when out of memory). */
_printf_(2, 3) static void set_error(char **ret_error, const char *fmt, ...) {
        va_list ap;

        if (!ret_error)
                return;
        va_start(ap, fmt);
        if (vasprintf(ret_error, fmt, ap) < 0)
                *ret_error = NULL;
        va_end(ap);
}

/* ---- modules ------------------------------------------------------------------------------ */

/* Drop what a load produced; keeps name, state and error. */
static void module_unload(Module *m) {
        for (size_t i = 0; i < m->n_callables; i++)
                signature_free((Signature *) m->callables[i].signature);
        free(m->callables);
        m->callables = NULL;
        m->n_callables = 0;
        if (m->dl)
                (void) dlclose(m->dl);
        m->dl = NULL;
        if (!m->builtin)
                m->table = NULL;
}

static Module *module_free(Module *m) {
        if (!m)
                return NULL;
        module_unload(m);
        free(m->error);
        free(m->name);
        free(m);
        return NULL;
}

static void module_freep(Module **m) {
        module_free(*m);
}

_printf_(2, 3) static int module_fail(Module *m, const char *fmt, ...) {
        va_list ap;

        free(m->error);
        va_start(ap, fmt);
        if (vasprintf(&m->error, fmt, ap) < 0)
                m->error = NULL;
        va_end(ap);
        m->state = MODULE_FAILED;
        log_warning("Module '%s' failed to load: %s", m->name, strna(m->error));
        return -ELIBBAD;
}

static int callable_compare(const void *a, const void *b) {
        const ResolvedCallable *x = a, *y = b;
        int c = strcmp(x->function->name, y->function->name);

        return c != 0 ? c : (int) x->function->shape - (int) y->function->shape;
}

/* Check the descriptor table and parse every signature. Fills m->callables; on failure the
 * module is MODULE_FAILED with a message naming the offending function. */
static int module_validate(Module *m) {
        const agentix_module *t = m->table;
        _cleanup_free_ ResolvedCallable *callables = NULL;
        size_t n = 0;

        if (t->abi != AGENTIX_MODULE_ABI)
                return module_fail(m, "module ABI %u, expected %d (rebuild it against this agentix-module.h)",
                                   t->abi, AGENTIX_MODULE_ABI);
        if (!t->name || !streq(t->name, m->name))
                return module_fail(m, "its descriptor names the module '%s', not '%s'", strna(t->name), m->name);
        if (!t->functions)
                return module_fail(m, "its descriptor has no function table");

        while (t->functions[n].name) {
                if (n >= MODULE_REGISTRY_FUNCTIONS_MAX)
                        return module_fail(m, "more than %d functions (or the table lacks its {} terminator)",
                                           MODULE_REGISTRY_FUNCTIONS_MAX);
                n++;
        }

        callables = calloc(MAX(n, (size_t) 1), sizeof(ResolvedCallable));
        if (!callables)
                return -ENOMEM;

        /* Signatures parsed so far belong to `callables` until it is handed to the module. */
        size_t parsed = 0;
        int r = 0;
        for (size_t i = 0; i < n; i++) {
                const agentix_function *f = &t->functions[i];
                _cleanup_free_ char *error = NULL;
                size_t len = function_name_length(f->name);
                Signature *s;

                if (len == 0 || f->name[len] != 0 || len > MODULE_REGISTRY_NAME_MAX) {
                        r = module_fail(m, "function name '%.64s' is not an identifier of at most %d characters",
                                        f->name, MODULE_REGISTRY_NAME_MAX);
                        break;
                }
                if (!shape_is_valid((int) f->shape)) {
                        r = module_fail(m, "function '%s' has an unknown shape %d", f->name, (int) f->shape);
                        break;
                }
                if (!f->impl) {
                        r = module_fail(m, "function '%s' has no implementation", f->name);
                        break;
                }
                r = signature_parse(f->signature, &s, &error);
                if (r == -ENOMEM)
                        break;
                if (r < 0) {
                        r = module_fail(m, "function '%s': bad signature \"%.200s\": %s", f->name,
                                        strna(f->signature), strna(error));
                        break;
                }
                callables[parsed++] = (ResolvedCallable) { .module = t, .function = f, .signature = s };
        }
        if (r >= 0) {
                qsort(callables, n, sizeof(ResolvedCallable), callable_compare);
                for (size_t i = 1; i < n; i++)
                        if (callable_compare(&callables[i - 1], &callables[i]) == 0) {
                                r = module_fail(m, "function '%s' is declared twice as %s",
                                                callables[i].function->name,
                                                shape_name(callables[i].function->shape));
                                break;
                        }
        }
        if (r < 0) {
                for (size_t i = 0; i < parsed; i++)
                        signature_free((Signature *) callables[i].signature);
                return r;
        }

        m->callables = TAKE_PTR(callables);
        m->n_callables = n;
        return 0;
}

static int module_load(ModuleRegistry *reg, Module *m) {
        int r;

        assert(m->state == MODULE_UNLOADED);

        if (!m->builtin) {
                _cleanup_free_ char *path = NULL;

                if (asprintf(&path, "%s/%s.so", reg->module_dir, m->name) < 0)
                        return -ENOMEM;

                (void) dlerror();
                m->dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
                if (!m->dl)
                        return module_fail(m, "%s", strna(dlerror()));
                m->table = dlsym(m->dl, AGENTIX_MODULE_SYMBOL);
                if (!m->table) {
                        module_unload(m);
                        return module_fail(m, "%s does not export the symbol " AGENTIX_MODULE_SYMBOL
                                           " (define it with AGENTIX_MODULE())", path);
                }
        }

        r = module_validate(m);
        if (r < 0) {
                module_unload(m);
                return r;
        }

        if (m->table->init) {
                r = m->table->init();
                if (r < 0) {
                        /* Keep the code mapped until the registry goes: init() may have left
                         * threads or handlers behind that still point into it. */
                        for (size_t i = 0; i < m->n_callables; i++)
                                signature_free((Signature *) m->callables[i].signature);
                        free(m->callables);
                        m->callables = NULL;
                        m->n_callables = 0;
                        return module_fail(m, "init() failed: %s", strerror(-r));
                }
        }

        m->state = MODULE_LOADED;
        log_debug("Loaded module '%s' (%zu functions)", m->name, m->n_callables);
        return 0;
}

/* ---- the registry ------------------------------------------------------------------------- */

static int name_compare(const char *a, size_t a_len, const char *b, size_t b_len) {
        int c = memcmp(a, b, MIN(a_len, b_len));

        if (c != 0)
                return c;
        return a_len < b_len ? -1 : a_len > b_len;
}

/* Index of the module called name[0..len), or where it would be inserted (and *found false). */
static size_t registry_search(ModuleRegistry *reg, const char *name, size_t len, bool *found) {
        size_t lo = 0, hi = reg->n_modules;

        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                int c = name_compare(reg->modules[mid]->name, reg->modules[mid]->name_len, name, len);

                if (c == 0) {
                        *found = true;
                        return mid;
                }
                if (c < 0)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        *found = false;
        return lo;
}

static int registry_add(ModuleRegistry *reg, const char *name, size_t len, const agentix_module *builtin,
                        Module **ret) {
        _cleanup_(module_freep) Module *m = NULL;
        Module **a;
        bool found;
        size_t at;

        at = registry_search(reg, name, len, &found);
        if (found)
                return -EEXIST;
        if (reg->n_modules >= MODULE_REGISTRY_MODULES_MAX)
                return -E2BIG;

        m = calloc(1, sizeof(Module));
        if (!m)
                return -ENOMEM;
        m->name = strndup(name, len);
        if (!m->name)
                return -ENOMEM;
        m->name_len = len;
        m->builtin = !!builtin;
        m->table = builtin;

        a = reallocarray(reg->modules, reg->n_modules + 1, sizeof(Module *));
        if (!a)
                return -ENOMEM;
        reg->modules = a;
        memmove(a + at + 1, a + at, (reg->n_modules - at) * sizeof(Module *));
        a[at] = m;
        reg->n_modules++;

        *ret = TAKE_PTR(m);
        return 0;
}

int module_registry_new_with(const char *module_dir, const agentix_module *const *builtins, size_t n_builtins,
                             ModuleRegistry **ret) {
        ModuleRegistry *reg;
        Module *m;
        int r;

        if (!ret || (n_builtins > 0 && !builtins) || n_builtins > MODULE_REGISTRY_MODULES_MAX / 2)
                return -EINVAL;
        if (!module_dir) {
                module_dir = secure_getenv("AGENTIX_MODULE_DIR");
                if (strempty(module_dir))
                        module_dir = AGENTIX_MODULE_DIR_DEFAULT;
        }
        if (strempty(module_dir) || strlen(module_dir) > PATH_MAX - MODULE_REGISTRY_NAME_MAX - 8)
                return -EINVAL;

        reg = calloc(1, sizeof(ModuleRegistry));
        if (!reg)
                return -ENOMEM;
        reg->module_dir = strdup(module_dir);
        if (!reg->module_dir) {
                module_registry_free(reg);
                return -ENOMEM;
        }

        /* Built-ins are present from the start, so a C module of the same name is never opened.
         * They are validated on first use, like C modules. */
        for (size_t i = 0; i < n_builtins; i++) {
                const char *name = builtins[i] ? builtins[i]->name : NULL;
                size_t len = name ? module_name_length(name) : 0;

                if (len == 0 || name[len] != 0 || len > MODULE_REGISTRY_NAME_MAX) {
                        module_registry_free(reg);
                        return -EINVAL;
                }
                r = registry_add(reg, name, len, builtins[i], &m);
                if (r < 0) {
                        module_registry_free(reg);
                        return r;
                }
        }

        *ret = reg;
        return 0;
}

ModuleRegistry *module_registry_free(ModuleRegistry *reg) {
        if (!reg)
                return NULL;
        for (size_t i = 0; i < reg->n_modules; i++)
                module_free(reg->modules[i]);
        free(reg->modules);
        free(reg->module_dir);
        free(reg);
        return NULL;
}

/* Find a module by name, adding an entry for <module_dir>/<name>.so if that file exists. */
static int registry_get_module(ModuleRegistry *reg, const char *name, size_t len, Module **ret) {
        _cleanup_free_ char *path = NULL;
        struct stat st;
        bool found;
        size_t at;

        at = registry_search(reg, name, len, &found);
        if (found) {
                *ret = reg->modules[at];
                return 0;
        }

        /* Missing modules are not remembered: that would let a peer fill memory with names. */
        if (asprintf(&path, "%s/%.*s.so", reg->module_dir, (int) len, name) < 0)
                return -ENOMEM;
        if (stat(path, &st) < 0)
                return errno == ENOENT || errno == ENOTDIR ? -ENOENT : negative_errno();

        return registry_add(reg, name, len, NULL, ret);
}

/* module "::" function, each a plain name of at most MODULE_REGISTRY_NAME_MAX bytes: nothing
 * that could make a path. */
static bool split_callable(const char *callable, size_t *ret_module_len, const char **ret_function) {
        size_t module_len = module_name_length(callable), function_len;
        const char *function;

        if (module_len == 0 || module_len > MODULE_REGISTRY_NAME_MAX || !strneq(callable + module_len, "::", 2))
                return false;
        function = callable + module_len + 2;
        function_len = function_name_length(function);
        if (function_len == 0 || function_len > MODULE_REGISTRY_NAME_MAX || function[function_len] != 0)
                return false;

        *ret_module_len = module_len;
        *ret_function = function;
        return true;
}

/* First callable of module m named `function`, or NULL. */
static const ResolvedCallable *module_find(const Module *m, const char *function) {
        size_t lo = 0, hi = m->n_callables;

        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;

                if (strcmp(m->callables[mid].function->name, function) < 0)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        if (lo < m->n_callables && streq(m->callables[lo].function->name, function))
                return &m->callables[lo];
        return NULL;
}

int module_registry_resolve(ModuleRegistry *reg, const char *callable, agentix_shape shape,
                            const ResolvedCallable **ret, char **ret_error) {
        const ResolvedCallable *c, *end;
        const char *function;
        size_t module_len;
        Module *m;
        int r;

        if (!reg || !callable || !ret)
                return -EINVAL;

        if (!split_callable(callable, &module_len, &function)) {
                /* Echo the callable only when it is harmless to print (errors travel as msgpack str). */
                bool printable = true;
                for (const char *p = callable; *p && printable; p++)
                        printable = *p >= 0x20 && *p < 0x7f;
                if (printable)
                        set_error(ret_error, "malformed callable \"%.*s%s\": expected \"module::function\" "
                                  "made of letters, digits and '_'", 80, callable, strlen(callable) > 80 ? "..." : "");
                else
                        set_error(ret_error, "malformed callable: expected \"module::function\" made of letters, "
                                  "digits and '_'");
                return -EINVAL;
        }
        if (!shape_is_valid((int) shape)) {
                set_error(ret_error, "unknown call shape %d", (int) shape);
                return -EINVAL;
        }

        r = registry_get_module(reg, callable, module_len, &m);
        if (r == -ENOENT) {
                set_error(ret_error, "No module named '%.*s'", (int) module_len, callable);
                return -ENOENT;
        }
        if (r == -ENOMEM) {
                set_error(ret_error, "Out of memory looking up module '%.*s'", (int) module_len, callable);
                return r;
        }
        if (r == -E2BIG) {
                set_error(ret_error, "module '%.*s' cannot be loaded: %d modules are loaded already",
                          (int) module_len, callable, MODULE_REGISTRY_MODULES_MAX);
                return -ELIBBAD;
        }
        if (r < 0) {
                /* Not remembered either: the directory may become readable. */
                set_error(ret_error, "module '%.*s' cannot be loaded: %s/%.*s.so: %s", (int) module_len, callable,
                          reg->module_dir, (int) module_len, callable, strerror(-r));
                return -ELIBBAD;
        }

        if (m->state == MODULE_UNLOADED) {
                r = module_load(reg, m);
                if (r == -ENOMEM) {
                        /* Not the module's fault: try again next time. */
                        set_error(ret_error, "Out of memory loading module '%s'", m->name);
                        return r;
                }
        }
        if (m->state == MODULE_FAILED) {
                set_error(ret_error, "module '%s' failed to load: %s", m->name, strna(m->error));
                return -ELIBBAD;
        }

        c = module_find(m, function);
        if (!c) {
                set_error(ret_error, "module '%s' has no function '%s'", m->name, function);
                return -ENOENT;
        }
        end = m->callables + m->n_callables;
        for (const ResolvedCallable *i = c; i < end && streq(i->function->name, function); i++)
                if (i->function->shape == shape) {
                        *ret = i;
                        return 0;
                }

        if (ret_error) {
                char shapes[32] = "";
                for (const ResolvedCallable *i = c; i < end && streq(i->function->name, function); i++) {
                        strcat(shapes, i == c ? "" : ", ");
                        strcat(shapes, shape_name(i->function->shape));
                }
                set_error(ret_error, "%s cannot be called as %s (it is %s)", callable, shape_name(shape), shapes);
        }
        return -EPROTOTYPE;
}

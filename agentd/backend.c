/* SPDX-License-Identifier: MIT */
#include <dlfcn.h>
#include <stdarg.h>

#include "backend.h"
#include "log.h"
#include "macro.h"
#include "strv.h"

static void backend_free(Backend *b) {
        if (!b)
                return;
        if (b->state)
                b->ops->free(b->state);
        /* Never dlclose(): a backend may have left callbacks with libraries it loaded. */
        free(b->name);
        free(b->path);
        free(b->error);
        strv_free(b->walk_events);
        free(b);
}

static int backend_fail(Backend *b, const char *fmt, ...) _printf_(2, 3);
static int backend_fail(Backend *b, const char *fmt, ...) {
        va_list ap;

        va_start(ap, fmt);
        if (vasprintf(&b->error, fmt, ap) < 0)
                b->error = NULL;
        va_end(ap);
        log_error("Backend %s: %s", b->name, b->error ?: "out of memory");
        return 0;
}

static int load_one(Backend *b) {
        const AgentdBackendOps *ops;
        char *error = NULL;
        int r;

        b->dl = dlopen(b->path, RTLD_NOW | RTLD_LOCAL);
        if (!b->dl)
                return backend_fail(b, "cannot load %s: %s", b->path, dlerror());
        ops = dlsym(b->dl, AGENTD_BACKEND_SYMBOL);
        if (!ops)
                return backend_fail(b, "%s exports no %s (see agentd-backend(3))", b->path, AGENTD_BACKEND_SYMBOL);
        if (ops->abi != AGENTD_BACKEND_ABI)
                return backend_fail(b, "%s was built for backend ABI %u; this agentd speaks %u: rebuild it", b->path, ops->abi,
                            AGENTD_BACKEND_ABI);
        if (!ops->name || !streq(ops->name, b->name))
                return backend_fail(b, "%s calls itself '%s', not '%s'", b->path, ops->name ?: "", b->name);
        if (!ops->new || !ops->free || !ops->create || !ops->cancel || !ops->remove)
                return backend_fail(b, "%s lacks one of new, free, create, cancel, remove", b->path);
        r = ops->new(&b->state, &error);
        if (r < 0) {
                b->state = NULL;
                backend_fail(b, "%s", error ?: strerror(-r));
                free(error);
                return 0;
        }
        b->ops = ops;
        log_info("Backend %s loaded from %s.", b->name, b->path);
        return 0;
}

int backends_load(char *const *names, const char *dir, Backend ***ret, size_t *ret_n) {
        Backend **l = NULL;
        size_t n = 0;

        for (char *const *name = names; name && *name; name++) {
                Backend *b, **nl;

                if (backends_find(l, n, *name))
                        continue;
                b = calloc(1, sizeof(*b));
                nl = b ? realloc(l, (n + 1) * sizeof(*l)) : NULL;
                if (!nl) {
                        free(b);
                        backends_free(l, n);
                        return -ENOMEM;
                }
                l = nl;
                l[n++] = b;
                b->name = strdup(*name);
                if (!b->name || asprintf(&b->path, "%s/%s.so", dir, *name) < 0) {
                        b->path = NULL;
                        backends_free(l, n);
                        return -ENOMEM;
                }
                load_one(b);
        }
        *ret = l;
        *ret_n = n;
        return 0;
}

void backends_free(Backend **l, size_t n) {
        for (size_t i = 0; i < n; i++)
                backend_free(l[i]);
        free(l);
}

Backend *backends_find(Backend **l, size_t n, const char *name) {
        for (size_t i = 0; i < n; i++)
                if (streq(l[i]->name, name))
                        return l[i];
        return NULL;
}

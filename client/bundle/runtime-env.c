/* SPDX-License-Identifier: MIT */
#include <limits.h>

#include "runtime-env.h"

/* NAME=<dir>:<dir>… with each dir (NULL-terminated list, up to two) inside sp. */
static int assign_dirs(char ***env, const char *name, const StorePath *sp, const char *const *dirs) {
        char *a;

        if (asprintf(&a, "%s=" STORE_DIR "/%s/%s%s%s%s%s", name, sp->basename, dirs[0], dirs[1] ? ":" STORE_DIR "/" : "",
                     dirs[1] ? sp->basename : "", dirs[1] ? "/" : "", dirs[1] ?: "") < 0)
                return -ENOMEM;
        return strv_consume(env, a);
}

static int env_for_source(Closure *c, char ***env, const char *source, const char *name, const char *const *dirs) {
        StorePath *sp = closure_find_source(c, source);

        return sp ? assign_dirs(env, name, sp, dirs) : 0;
}

/* glibc reads locales and iconv modules from paths compiled into it (/usr/lib/locale,
 * /usr/lib/<triplet>/gconv): in the store, from the store. */
static int glibc_environment(Closure *c, char ***env) {
        StorePath *sp = closure_find_source(c, "glibc");
        int r = 0;

        if (!sp)
                return 0;
        if (store_path_find(sp, "lib/locale/C.utf8/LC_CTYPE"))
                r = assign_dirs(env, "LOCPATH", sp, (const char *const[]) { "lib/locale", NULL });
        for (size_t i = 0; r >= 0 && i < sp->n_files; i++) {
                const char *d = sp->files[i].dest;
                size_t n = strlen(d);
                char *a;

                if (n < 20 || !streq(d + n - 20, "/gconv/gconv-modules") || strncmp(d, "lib/", 4) != 0)
                        continue;
                if (asprintf(&a, "GCONV_PATH=" STORE_DIR "/%s/%.*s", sp->basename, (int) (n - 14), d) < 0)
                        return -ENOMEM;
                r = strv_consume(env, a);
                break;
        }
        return r;
}

/* NAME=<dir>:<dir>… for each store path that has files under `dir` (Python's dist-packages,
 * Jupyter's data): relocated packages keep their files in their own store paths, where an
 * interpreter does not look unless told. Nothing when no store path has any. */
static int search_path(Closure *c, char ***env, const char *name, const char *dir) {
        _cleanup_free_ char *value = NULL;
        size_t n = strlen(dir), len = 0;
        FILE *f = open_memstream(&value, &len);

        if (!f)
                return -ENOMEM;
        for (size_t i = 0; i < c->n_paths; i++) {
                const StorePath *sp = c->paths[i];

                for (size_t k = 0; k < sp->n_files; k++)
                        if (strncmp(sp->files[k].dest, dir, n) == 0 && sp->files[k].dest[n] == '/') {
                                fprintf(f, "%s" STORE_DIR "/%s/%s", len ? ":" : "", sp->basename, dir);
                                fflush(f);
                                break;
                        }
        }
        if (fclose(f) != 0)
                return -ENOMEM;
        if (len == 0)
                return 0;
        char *a;
        if (asprintf(&a, "%s=%s", name, value) < 0)
                return -ENOMEM;
        return strv_consume(env, a);
}

/* The environment agentix-server gives everything it runs (/nix/runtime/etc/environment):
 * the bundle's programs first on PATH, and where relocated programs find their data. */
int runtime_environment(Closure *c, char *const *extra, char ***ret) {
        _cleanup_strv_free_ char **env = NULL;
        static const struct {
                const char *source, *name, *dirs[3];
        } rules[] = {
                { "git", "GIT_EXEC_PATH", { "lib/git-core" } },
                { "git", "GIT_TEMPLATE_DIR", { "share/git-core/templates" } },
                { "ca-certificates", "SSL_CERT_FILE", { "etc/ssl/certs/ca-certificates.crt" } },
                { "ncurses", "TERMINFO_DIRS", { "share/terminfo", "lib/terminfo" } },
                /* Time zones: glibc, Python's zoneinfo, and Debian's pytz (which asks for it). */
                { "tzdata", "TZDIR", { "share/zoneinfo" } },
                { "tzdata", "PYTHONTZPATH", { "share/zoneinfo" } },
                { "tzdata", "PYTZ_TZDATADIR", { "share/zoneinfo" } },
        };
        int r;

        r = strv_extend(&env, "PATH=/nix/runtime/bin:${PATH}");
        for (size_t i = 0; r >= 0 && i < ELEMENTSOF(rules); i++)
                r = env_for_source(c, &env, rules[i].source, rules[i].name, rules[i].dirs);
        if (r >= 0)
                r = glibc_environment(c, &env);
        if (r >= 0)
                r = search_path(c, &env, "PYTHONPATH", "lib/python3/dist-packages");
        if (r >= 0)
                r = search_path(c, &env, "JUPYTER_PATH", "share/jupyter");
        for (char *const *e = extra; r >= 0 && e && *e; e++)
                r = strv_extend(&env, *e);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(env);
        return 0;
}

/* SPDX-License-Identifier: MIT */
#include <limits.h>

#include "runtime-env.h"

static int env_for_source(Closure *c, char ***env, const char *source, const char *fmt_dir_list) {
        StorePath *sp = closure_find_source(c, source);
        _cleanup_free_ char *expanded = NULL;
        const char *eq;
        char prefix[PATH_MAX];

        if (!sp)
                return 0;
        snprintf(prefix, sizeof(prefix), STORE_DIR "/%s", sp->basename);
        /* fmt_dir_list: "NAME=%s/dir:%s/other" with every %s the store path. */
        eq = strchr(fmt_dir_list, '=');
        if (!eq)
                return -EINVAL;
        {
                size_t n = 0;
                for (const char *p = fmt_dir_list; (p = strstr(p, "%s")); p += 2)
                        n++;
                expanded = malloc(strlen(fmt_dir_list) + n * strlen(prefix) + 1);
                if (!expanded)
                        return -ENOMEM;
                char *o = expanded;
                for (const char *p = fmt_dir_list; *p;) {
                        if (strneq(p, "%s", 2)) {
                                o = stpcpy(o, prefix);
                                p += 2;
                        } else
                                *o++ = *p++;
                }
                *o = 0;
        }
        return strv_consume(env, TAKE_PTR(expanded));
}

/* glibc reads locales and iconv modules from paths compiled into it (/usr/lib/locale,
 * /usr/lib/<triplet>/gconv): in the store, from the store. */
static int glibc_environment(Closure *c, char ***env) {
        StorePath *sp = closure_find_source(c, "glibc");
        int r = 0;

        if (!sp)
                return 0;
        if (store_path_find(sp, "lib/locale/C.utf8/LC_CTYPE"))
                r = env_for_source(c, env, "glibc", "LOCPATH=%s/lib/locale");
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

/* The environment agentix-server gives everything it runs (/nix/runtime/etc/environment):
 * the bundle's programs first on PATH, and where relocated programs find their data. */
int runtime_environment(Closure *c, char *const *extra, char ***ret) {
        _cleanup_strv_free_ char **env = NULL;
        static const struct {
                const char *source, *assignment;
        } rules[] = {
                { "git", "GIT_EXEC_PATH=%s/lib/git-core" },
                { "git", "GIT_TEMPLATE_DIR=%s/share/git-core/templates" },
                { "ca-certificates", "SSL_CERT_FILE=%s/etc/ssl/certs/ca-certificates.crt" },
                { "ncurses", "TERMINFO_DIRS=%s/share/terminfo:%s/lib/terminfo" },
        };
        int r;

        r = strv_extend(&env, "PATH=/nix/runtime/bin:${PATH}");
        for (size_t i = 0; r >= 0 && i < ELEMENTSOF(rules); i++)
                r = env_for_source(c, &env, rules[i].source, rules[i].assignment);
        if (r >= 0)
                r = glibc_environment(c, &env);
        for (char *const *e = extra; r >= 0 && e && *e; e++)
                r = strv_extend(&env, *e);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(env);
        return 0;
}

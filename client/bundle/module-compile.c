/* SPDX-License-Identifier: MIT */
#include <unistd.h>

#include "host-command.h"
#include "module-compile.h"

static int pkg_config(const char *what, char **pkgs, char **ret, char **ret_error) {
        _cleanup_strv_free_ char **argv = NULL;
        int r;

        if (strv_extend(&argv, "pkg-config") < 0 || strv_extend(&argv, what) < 0)
                return -ENOMEM;
        for (char **p = pkgs; p && *p; p++)
                if (strv_extend(&argv, *p) < 0)
                        return -ENOMEM;
        r = spawn_capture(argv, ret, NULL);
        if (r == -ENOENT)
                return message_set_first(ret_error, r, "pkg-config is not installed (apt-get install pkg-config)");
        if (r != 0) {
                (*ret)[strcspn(*ret, "\n")] = 0;
                return message_set_first(ret_error, -ENOPKG, "pkg-config %s: %s", what, *ret);
        }
        (*ret)[strcspn(*ret, "\n")] = 0;
        return 0;
}

int module_compile(const BundleModule *mod, const char *base_dir, const char *include_dir, const char *out,
                   char **ret_error) {
        _cleanup_strv_free_ char **argv = NULL, **pkgs = NULL;
        _cleanup_free_ char *cflags = NULL, *libs = NULL, *output = NULL, *prefix_map = NULL, *inc = NULL;
        const char *cc = getenv("CC");
        int r;

        if (strv_extend(&pkgs, "msgpack") < 0)
                return -ENOMEM;
        for (char **p = mod->pkg_config; p && *p; p++)
                if (strv_extend(&pkgs, *p) < 0)
                        return -ENOMEM;
        r = pkg_config("--cflags", pkgs, &cflags, ret_error);
        if (r < 0)
                return r;
        if (mod->pkg_config) {
                r = pkg_config("--libs", mod->pkg_config, &libs, ret_error);
                if (r < 0)
                        return r;
        }
        if (asprintf(&prefix_map, "-ffile-prefix-map=%s=.", base_dir) < 0 ||
            asprintf(&inc, "-I%s", include_dir) < 0)
                return -ENOMEM;
        r = strv_extend(&argv, strempty(cc) ? "cc" : cc);
        for (const char *const *f = (const char *const[]) { "-shared", "-fPIC", "-O2", "-g0", "-std=gnu11", "-Wall",
                                                          "-fvisibility=hidden", NULL };
             r >= 0 && *f; f++)
                r = strv_extend(&argv, *f);
        if (r >= 0)
                r = strv_extend(&argv, prefix_map);
        if (r >= 0)
                r = strv_extend(&argv, inc);
        if (r >= 0)
                r = strv_split_extend(&argv, cflags);
        if (r >= 0 && mod->cflags)
                r = strv_split_extend(&argv, mod->cflags);
        if (r >= 0)
                r = strv_extend(&argv, "-o");
        if (r >= 0)
                r = strv_extend(&argv, out);
        for (char **s = mod->sources; r >= 0 && s && *s; s++) {
                char *path;
                if (asprintf(&path, "%s%s%s", (*s)[0] == '/' ? "" : base_dir, (*s)[0] == '/' ? "" : "/", *s) < 0)
                        return -ENOMEM;
                if (access(path, R_OK) < 0) {
                        r = message_set_first(ret_error, -ENOENT, "[Module %s]: source %s: %m", mod->name, path);
                        free(path);
                        return r;
                }
                r = strv_consume(&argv, path);
        }
        if (r >= 0 && libs)
                r = strv_split_extend(&argv, libs);
        if (r < 0)
                return r;
        r = spawn_capture(argv, &output, NULL);
        if (r == -ENOENT)
                return message_set_first(ret_error, r, "[Module %s]: the C compiler %s is not installed (apt-get install gcc)", mod->name,
                                  argv[0]);
        if (r != 0) {
                /* The compiler's first error line; its full output above it. */
                char *line = output ? strstr(output, "error") : NULL;
                if (output)
                        fputs(output, stderr);
                if (line) {
                        while (line > output && line[-1] != '\n')
                                line--;
                        line[strcspn(line, "\n")] = 0;
                }
                return message_set_first(ret_error, -EINVAL, "[Module %s] does not compile: %s", mod->name, line ?: "see above");
        }
        return 0;
}

/* SPDX-License-Identifier: MIT */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <jansson.h>

#include "exec-env.h"
#include "kernelspec.h"
#include "macro.h"
#include "strv.h"

static void kernelspec_done(KernelSpec *s) {
        free(s->name);
        free(s->dir);
        strv_free(s->argv);
        strv_free(s->env);
        free(s->language);
        free(s->display_name);
}

void kernelspecs_done(KernelSpecs *k) {
        for (size_t i = 0; i < k->n; i++)
                kernelspec_done(&k->specs[i]);
        free(k->specs);
        *k = (KernelSpecs) {};
}

static bool have(const KernelSpecs *k, const char *name) {
        for (size_t i = 0; i < k->n; i++)
                if (streq(k->specs[i].name, name))
                        return true;
        return false;
}

/* kernel.json of dir/name into *ret: 0 done, 1 skip it (not readable, not a kernelspec). */
static int load_one(const char *dir, const char *name, KernelSpec *ret) {
        _cleanup_free_ char *path = NULL;
        KernelSpec s = {};
        json_t *j, *argv, *env, *v;
        const char *key;
        size_t i;
        int r = 0;

        if (asprintf(&s.dir, "%s/%s", dir, name) < 0 || asprintf(&path, "%s/kernel.json", s.dir) < 0) {
                free(s.dir);
                return -ENOMEM;
        }
        j = json_load_file(path, 0, NULL);
        argv = json_object_get(j, "argv");
        if (!json_is_array(argv) || json_array_size(argv) == 0) {
                json_decref(j);
                free(s.dir);
                return 1;
        }
        s.name = strdup(name);
        s.language = strdup(json_string_value(json_object_get(j, "language")) ?: "");
        s.display_name = strdup(json_string_value(json_object_get(j, "display_name")) ?: name);
        s.interrupt_message = streq(json_string_value(json_object_get(j, "interrupt_mode")) ?: "", "message");
        if (!s.name || !s.language || !s.display_name)
                r = -ENOMEM;
        json_array_foreach(argv, i, v)
                if (r == 0)
                        r = json_is_string(v) ? strv_extend(&s.argv, json_string_value(v)) : 1;
        env = json_object_get(j, "env");
        json_object_foreach(env, key, v) {
                char *a;

                if (r != 0 || !json_is_string(v))
                        continue;
                if (asprintf(&a, "%s=%s", key, json_string_value(v)) < 0)
                        r = -ENOMEM;
                else
                        r = strv_consume(&s.env, a);
        }
        json_decref(j);
        if (r != 0) {
                kernelspec_done(&s);
                return r;
        }
        *ret = s;
        return 0;
}

static int scan(KernelSpecs *k, const char *base) {
        _cleanup_free_ char *dir = NULL;
        DIR *d;
        struct dirent *de;
        int r = 0;

        if (!base || base[0] != '/')
                return 0;
        if (asprintf(&dir, "%s/kernels", base) < 0)
                return -ENOMEM;
        d = opendir(dir);
        if (!d)
                return 0;
        while (r >= 0 && (de = readdir(d))) {
                KernelSpec s, *grown;

                if (de->d_name[0] == '.' || have(k, de->d_name))
                        continue;
                r = load_one(dir, de->d_name, &s);
                if (r != 0)
                        continue; /* 1: not a kernel; <0 ends the loop */
                grown = realloc(k->specs, (k->n + 1) * sizeof(KernelSpec));
                if (!grown) {
                        kernelspec_done(&s);
                        r = -ENOMEM;
                        break;
                }
                k->specs = grown;
                k->specs[k->n++] = s;
        }
        closedir(d);
        return r < 0 ? r : 0;
}

int kernelspecs_find(char *const *env, KernelSpecs *ret) {
        extern char **environ;
        _cleanup_free_ char *user = NULL;
        _cleanup_strv_free_ char **path = NULL;
        KernelSpecs k = {};
        const char *jp, *home;
        int r = 0;

        env = env ?: environ;
        jp = env_get(env, "JUPYTER_PATH");
        home = env_get(env, "HOME");
        /* JUPYTER_PATH is ':'-separated; strv_split_extend splits on blanks, so swap first. */
        if (jp) {
                _cleanup_free_ char *copy = strdup(jp);

                if (!copy)
                        return -ENOMEM;
                for (char *p = copy; *p; p++)
                        if (*p == ':')
                                *p = ' ';
                r = strv_split_extend(&path, copy);
        }
        if (r >= 0 && home && asprintf(&user, "%s/.local/share/jupyter", home) < 0)
                r = -ENOMEM;
        for (char **p = path; r >= 0 && p && *p; p++)
                r = scan(&k, *p);
        if (r >= 0)
                r = scan(&k, user);
        if (r >= 0)
                r = scan(&k, "/nix/runtime/share/jupyter");
        if (r >= 0)
                r = scan(&k, "/usr/local/share/jupyter");
        if (r >= 0)
                r = scan(&k, "/usr/share/jupyter");
        if (r < 0) {
                kernelspecs_done(&k);
                return r;
        }
        *ret = k;
        return 0;
}

const KernelSpec *kernelspecs_pick(const KernelSpecs *k, const char *want) {
        const KernelSpec *first = NULL;
        size_t n = strlen(want);

        for (size_t i = 0; i < k->n; i++)
                if (streq(k->specs[i].name, want))
                        return &k->specs[i];
        for (size_t i = 0; i < k->n; i++) {
                const KernelSpec *s = &k->specs[i];

                if (strcasecmp(s->language, want) != 0)
                        continue;
                if (strncasecmp(s->name, want, n) == 0 && s->name[n] >= '0' && s->name[n] <= '9')
                        return s;
                first = first ?: s;
        }
        return first;
}

char *kernelspecs_describe(const KernelSpecs *k) {
        _cleanup_free_ char *out = NULL;
        size_t size = 0;
        FILE *f;

        if (k->n == 0)
                return strdup("none");
        f = open_memstream(&out, &size);
        if (!f)
                return NULL;
        for (size_t i = 0; i < k->n; i++)
                fprintf(f, "%s%s (%s)", i ? ", " : "", k->specs[i].name,
                        k->specs[i].language[0] ? k->specs[i].language : "no language");
        if (fclose(f) != 0)
                return NULL;
        return TAKE_PTR(out);
}

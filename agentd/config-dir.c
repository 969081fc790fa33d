/* SPDX-License-Identifier: MIT */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config-dir.h"
#include "macro.h"
#include "strv.h"

static int list_dir(const char *dir, const char *suffix, struct dirent ***ret) {
        struct dirent **list = NULL, *d;
        size_t want = strlen(suffix);
        int n, k = 0;

        n = scandir(dir, &list, NULL, alphasort);
        if (n < 0)
                return -errno;
        for (int i = 0; i < n; i++) {
                size_t len = strlen((d = list[i])->d_name);

                if (d->d_name[0] != '.' && len > want && streq(d->d_name + len - want, suffix))
                        list[k++] = d;
                else
                        free(d);
        }
        *ret = list;
        return k;
}

int config_dir_list(const char *dir, const char *suffix, int max, char ***ret_paths, int *ret_n, char **ret_error) {
        _cleanup_strv_free_ char **paths = calloc(1, sizeof(char *));
        struct dirent **list = NULL;
        int n, r = 0;

        if (!paths)
                return -ENOMEM;
        n = list_dir(dir, suffix, &list);
        if (n == -ENOENT || n == -ENOTDIR)
                n = 0;
        else if (n < 0) {
                if (asprintf(ret_error, "%s: %s", dir, strerror(-n)) < 0)
                        *ret_error = NULL;
                return n;
        } else if (n > max) {
                if (asprintf(ret_error, "%s: more than %d files of *%s", dir, max, suffix) < 0)
                        *ret_error = NULL;
                r = -E2BIG;
        }
        for (int i = 0; i < n; i++) {
                char *path;

                if (r >= 0 && (asprintf(&path, "%s/%s", dir, list[i]->d_name) < 0 || strv_consume(&paths, path) < 0))
                        r = -ENOMEM;
                free(list[i]);
        }
        free(list);
        if (r < 0)
                return r;
        *ret_paths = TAKE_PTR(paths);
        *ret_n = n;
        return 0;
}

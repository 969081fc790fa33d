/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"
#include "parse-util.h"

#define ENV_MAX 4096

int parse_seconds(const char *s, double *ret) {
        char *end;
        double v;

        errno = 0;
        v = strtod(s, &end);
        if (errno != 0 || end == s || *end != 0 || !isfinite(v) || v < 0 || v > 1e9)
                return -EINVAL;
        *ret = v;
        return 0;
}

int parse_int64(const char *s, int64_t min, int64_t *ret) {
        char *end;
        long long v;

        errno = 0;
        v = strtoll(s, &end, 10);
        if (errno != 0 || end == s || *end != 0 || v < min)
                return -EINVAL;
        *ret = v;
        return 0;
}

int env_append(char ***env, size_t *n, const char *assignment) {
        char **a;

        if (assignment[0] == 0 || assignment[0] == '=')
                return -EINVAL;
        if (*n >= ENV_MAX)
                return -E2BIG;
        a = reallocarray(*env, *n + 2, sizeof(char *));
        if (!a)
                return -ENOMEM;
        a[(*n)++] = (char *) assignment;
        a[*n] = NULL;
        *env = a;
        return 0;
}

/* SPDX-License-Identifier: MIT */
#include "strv.h"

char **strv_free(char **l) {
        if (!l)
                return NULL;
        for (char **i = l; *i; i++)
                free(*i);
        free(l);
        return NULL;
}

size_t strv_length(char *const *l) {
        size_t n = 0;

        for (; l && l[n]; n++)
                ;
        return n;
}

int strv_consume(char ***l, char *s) {
        size_t n = strv_length(*l);
        char **t;

        if (!s)
                return -ENOMEM;
        t = realloc(*l, (n + 2) * sizeof(char *));
        if (!t) {
                free(s);
                return -ENOMEM;
        }
        t[n] = s;
        t[n + 1] = NULL;
        *l = t;
        return 0;
}

int strv_consume_n(char ***l, size_t *n, char *s) {
        char **t = *l;

        if (!s)
                return -ENOMEM;
        /* Room for n + 2 pointers; capacities are powers of two, so grow when n + 1 is one. */
        if (!t || ((*n + 1) & *n) == 0) {
                size_t cap = 2;

                while (cap < *n + 2)
                        cap *= 2;
                t = realloc(*l, cap * sizeof(char *));
                if (!t) {
                        free(s);
                        return -ENOMEM;
                }
        }
        t[*n] = s;
        t[*n + 1] = NULL;
        *l = t;
        (*n)++;
        return 0;
}

int strv_extend(char ***l, const char *s) {
        return strv_consume(l, strdup(s));
}

bool strv_contains(char *const *l, const char *s) {
        for (; l && *l; l++)
                if (streq(*l, s))
                        return true;
        return false;
}

char *strv_join(char *const *l, const char *separator) {
        size_t size = 1, sep = strlen(separator);
        char *s, *p;

        for (char *const *e = l; e && *e; e++)
                size += strlen(*e) + sep;
        s = p = malloc(size);
        if (!s)
                return NULL;
        *p = '\0';
        for (char *const *e = l; e && *e; e++) {
                if (e != l)
                        p = stpcpy(p, separator);
                p = stpcpy(p, *e);
        }
        return s;
}

int strv_split_extend(char ***l, const char *s) {
        while (*s) {
                size_t n;
                int r;

                s += strspn(s, " \t");
                n = strcspn(s, " \t");
                if (n == 0)
                        break;
                r = strv_consume(l, strndup(s, n));
                if (r < 0)
                        return r;
                s += n;
        }
        return 0;
}

int strv_copy(char *const *l, char ***ret) {
        char **c;

        *ret = NULL;
        if (!l)
                return 0;
        c = calloc(strv_length(l) + 1, sizeof(char *));
        if (!c)
                return -ENOMEM;
        for (size_t i = 0; l[i]; i++)
                if (!(c[i] = strdup(l[i]))) {
                        strv_free(c);
                        return -ENOMEM;
                }
        *ret = c;
        return 0;
}

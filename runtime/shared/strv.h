/* SPDX-License-Identifier: MIT */
#pragma once

/* NULL-terminated arrays of malloc'ed strings (environments, argument and name lists). */

#include <stdbool.h>
#include <stddef.h>

#include "macro.h"

char **strv_free(char **l);
static inline void strv_freep(char ***l) {
        strv_free(*l);
}
#define _cleanup_strv_free_ _cleanup_(strv_freep)

size_t strv_length(char *const *l);
/* Append s, taking it (freed on failure too); *l may be NULL. */
int strv_consume(char ***l, char *s);
/* Append s as element *n (the caller keeps the count: no walk to the end), growing the array
 * by powers of two, so that appending many costs linear time even where realloc copies. */
int strv_consume_n(char ***l, size_t *n, char *s);
/* Append a copy of s. */
int strv_extend(char ***l, const char *s);
/* A copy of l in *ret (NULL for NULL). 0 or -ENOMEM. */
int strv_copy(char *const *l, char ***ret);
bool strv_contains(char *const *l, const char *s);
static inline bool strv_isempty(char *const *l) {
        return !l || !*l;
}
/* The elements with separator between them (malloc'ed; "" for none), or NULL: out of memory. */
char *strv_join(char *const *l, const char *separator);
/* Split s on blanks (spaces and tabs) and append each word. */
int strv_split_extend(char ***l, const char *s);

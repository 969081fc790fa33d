/* SPDX-License-Identifier: MIT */
#pragma once

/* The environment of a command: the worker's environment with the caller's `env` map merged
 * over it. A nil value removes the variable. */

#include <stdbool.h>
#include <stddef.h>

#include "strv.h"

typedef struct EnvOverride {
        const char *key;   /* not NUL-terminated; non-empty, no '=' and no NUL (see env_key_is_valid) */
        size_t key_len;
        const char *value; /* not NUL-terminated; NULL: unset the variable */
        size_t value_len;
} EnvOverride;

bool env_key_is_valid(const char *key, size_t len);
bool env_value_is_valid(const char *value, size_t len);

/* Build a NULL-terminated "KEY=value" array from `base` (NULL-terminated, e.g. environ) with the
 * overrides applied in order (a later override of the same key wins). New variables come after
 * the inherited ones. Free the result with strv_free(). */
int env_merge(char *const *base, const EnvOverride *overrides, size_t n_overrides, char ***ret);

/* Look up `key` in a NULL-terminated "KEY=value" array; NULL when absent. */
const char *env_get(char *const *env, const char *key);


/* SPDX-License-Identifier: MIT */
#pragma once

/* Option values of the commands: numbers, durations, KEY=VALUE lists. Each returns 0 or
 * -EINVAL (-ENOMEM, -E2BIG for env_append). */

#include <stddef.h>
#include <stdint.h>

/* Seconds, fractions allowed: 0 ≤ s ≤ 1e9. */
int parse_seconds(const char *s, double *ret);
/* A decimal integer ≥ min. */
int parse_int64(const char *s, int64_t min, int64_t *ret);

/* Append "KEY=VALUE" or "KEY" (KEY non-empty, no NUL) to a NULL-terminated malloc()ed array of
 * borrowed strings (at most 4096 entries). */
int env_append(char ***env, size_t *n, const char *assignment);

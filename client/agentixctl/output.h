/* SPDX-License-Identifier: MIT */
#pragma once

/* Output for scripts and people: JSON values one per line (--json), and writes that survive
 * non-blocking descriptors. */

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

/* Print j (consumed) as one line of compact JSON on stdout. Returns an exit status. */
int print_json(json_t *j);
/* With extra json_dumps() flags (JSON_REAL_PRECISION(n) for measured values). */
int print_json_flags(json_t *j, size_t flags);

/* Write everything, waiting (poll) when fd is non-blocking and full. 0 or a negative errno. */
int write_all(int fd, const void *data, size_t size);

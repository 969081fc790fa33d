/* SPDX-License-Identifier: MIT */
#pragma once

/* What `stats` shows, for `status` too (stats.c). */

#include <jansson.h>

#include "agentix.h"

/* agentd's numbers as JSON (the keys of Sandbox.GetStats; unknown ones left out). */
json_t *stats_json(const agentix_stats *s);
/* "CPU: …", "Memory: …", "Processes: …", "Network: …", "Block I/O: …" lines. */
void stats_print_lines(const agentix_stats *s);

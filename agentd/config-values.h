/* SPDX-License-Identifier: MIT */
#pragma once

/* The values of agentd's key files (agentd.conf, pools.d/ *.pool), read as systemd reads its
 * own: time spans, sizes, counts, booleans, and the names of backends and runtimes. Each
 * returns a negative errno for a value it does not take; the caller names the key. */

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#define AGENTD_UNLIMITED UINT64_MAX

/* "90s", "30min", "1d 12h", a bare number of seconds, "infinity" (AGENTD_UNLIMITED). */
int parse_timespan_usec(const char *s, uint64_t *ret);
int parse_timespan_sec(const char *s, uint64_t *ret);
/* "512M", "2G", "1073741824", "infinity" → bytes (K, M, G, T: powers of 1024). */
int parse_size(const char *s, uint64_t *ret);
/* A number from min to max, or "infinity" (AGENTD_UNLIMITED); -ERANGE outside. */
int parse_count(const char *s, uint64_t min, uint64_t max, uint64_t *ret);
/* yes/no, true/false, on/off, 1/0: 1 or 0. */
int parse_boolean(const char *s);
/* A number of CPUs from 0.01 to 4096. */
int parse_cpus(const char *s, double *ret);
/* Lowercase letters, digits, '-' and '_', at most 64. */
bool backend_name_ok(const char *s);
/* As dockerd's daemon.json spells runtimes: runc, runsc, io.containerd.runc.v2. */
bool runtime_name_ok(const char *s);

/* KEY=VALUE lines as the parsers above read them back (infinity; sizes in G or M when whole). */
void config_put_count(FILE *out, const char *key, uint64_t v);
void config_put_size(FILE *out, const char *key, uint64_t v);

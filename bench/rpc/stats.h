/* SPDX-License-Identifier: MIT */
#pragma once

/* Latency statistics shared by the benchmark programs, so they report the same way. */

#include <stddef.h>

/* Sort ascending, for percentile(). */
void stats_sort(double *v, size_t n);
/* Nearest-rank percentile of a sorted array (NAN when empty). */
double percentile(const double *v, size_t n, double p);
/* The 1-minute load average: how busy the machine was during a run. */
double load1(void);

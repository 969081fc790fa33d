/* SPDX-License-Identifier: MIT */
#include <math.h>
#include <stdlib.h>

#include "stats.h"

static int cmp_double(const void *a, const void *b) {
        double x = *(const double *) a, y = *(const double *) b;
        return x < y ? -1 : x > y;
}

void stats_sort(double *v, size_t n) {
        qsort(v, n, sizeof(double), cmp_double);
}

double percentile(const double *v, size_t n, double p) {
        size_t k;

        if (n == 0)
                return NAN;
        k = (size_t) ceil(p / 100.0 * (double) n);
        return v[k == 0 ? 0 : k - 1];
}

double load1(void) {
        double l[1];
        return getloadavg(l, 1) == 1 ? l[0] : NAN;
}

/* SPDX-License-Identifier: MIT */
#include <stdio.h>
#include <string.h>

#include "format-util.h"
#include "macro.h"

const char *format_bytes(uint64_t n, char buf[static FORMAT_BYTES_MAX]) {
        static const char *const units[] = { "KiB", "MiB", "GiB", "TiB", "PiB", "EiB" };
        double v = (double) n;
        size_t u = 0;

        if (n < 1024) {
                snprintf(buf, FORMAT_BYTES_MAX, "%u B", (unsigned) n);
                return buf;
        }
        v /= 1024;
        while (v >= 1024 && u + 1 < ELEMENTSOF(units)) {
                v /= 1024;
                u++;
        }
        snprintf(buf, FORMAT_BYTES_MAX, "%.1f %s", v, units[u]);
        return buf;
}

const char *format_timestamp(const char *iso, char buf[static FORMAT_TIME_MAX]) {
        /* YYYY-MM-DDTHH:MM… → YYYY-MM-DD HH:MM (UTC, as the server reports it). */
        if (!iso || strlen(iso) < 16 || iso[4] != '-' || iso[10] != 'T') {
                snprintf(buf, FORMAT_TIME_MAX, "%s", strna(iso));
                return buf;
        }
        snprintf(buf, FORMAT_TIME_MAX, "%.10s %.5s", iso, iso + 11);
        return buf;
}

/* SPDX-License-Identifier: MIT */
#include <stdio.h>
#include <string.h>
#include <time.h>

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

const char *format_mode(bool is_dir, int mode, char buf[static FORMAT_MODE_MAX]) {
        /* For user, group and other: the read/write letters, then x, or the special bit. */
        static const struct {
                int special;
                char with_x, without_x;
        } third[3] = { { 04000, 's', 'S' }, { 02000, 's', 'S' }, { 01000, 't', 'T' } };

        buf[0] = is_dir ? 'd' : '-';
        for (unsigned who = 0; who < 3; who++) {
                int shift = 6 - 3 * (int) who;
                char *p = buf + 1 + 3 * who;

                if (mode < 0) {
                        memcpy(p, "???", 3);
                        continue;
                }
                p[0] = mode & (04 << shift) ? 'r' : '-';
                p[1] = mode & (02 << shift) ? 'w' : '-';
                if (mode & third[who].special)
                        p[2] = mode & (01 << shift) ? third[who].with_x : third[who].without_x;
                else
                        p[2] = mode & (01 << shift) ? 'x' : '-';
        }
        buf[10] = '\0';
        return buf;
}

const char *format_epoch_usec(uint64_t usec, char buf[static FORMAT_TIME_MAX]) {
        time_t t = (time_t) (usec / 1000000);
        struct tm tm;

        if (usec == 0 || !localtime_r(&t, &tm) || strftime(buf, FORMAT_TIME_MAX, "%Y-%m-%d %H:%M:%S", &tm) == 0)
                snprintf(buf, FORMAT_TIME_MAX, "-");
        return buf;
}

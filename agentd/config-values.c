/* SPDX-License-Identifier: MIT */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>

#include "config-values.h"
#include "macro.h"

int parse_timespan_usec(const char *s, uint64_t *ret) {
        static const struct { const char *suffix; uint64_t usec; } units[] = {
                { "us", 1 }, { "ms", 1000 }, { "s", 1000000 }, { "sec", 1000000 }, { "m", 60000000 },
                { "min", 60000000 }, { "h", 3600000000ULL }, { "hr", 3600000000ULL }, { "d", 86400000000ULL },
                { "w", 604800000000ULL },
        };
        uint64_t total = 0;
        bool any = false;

        if (streq(s, "infinity")) {
                *ret = AGENTD_UNLIMITED;
                return 0;
        }
        for (const char *p = s;;) {
                unsigned long long n;
                uint64_t unit = 1000000; /* a bare number is seconds */
                size_t len;
                char *end;

                p += strspn(p, " \t");
                if (!*p)
                        break;
                if (!isdigit((unsigned char) *p))
                        return -EINVAL;
                errno = 0;
                n = strtoull(p, &end, 10);
                if (errno)
                        return -ERANGE;
                p = end;
                len = strspn(p, "abcdefghijklmnopqrstuvwxyz");
                if (len > 0) {
                        size_t i;
                        for (i = 0; i < ELEMENTSOF(units); i++)
                                if (strlen(units[i].suffix) == len && strneq(p, units[i].suffix, len))
                                        break;
                        if (i == ELEMENTSOF(units))
                                return -EINVAL;
                        unit = units[i].usec;
                        p += len;
                }
                if (n > (UINT64_MAX - 1 - total) / unit)
                        return -ERANGE;
                total += n * unit;
                any = true;
        }
        if (!any)
                return -EINVAL;
        *ret = total;
        return 0;
}

/* "2h", "90s", "1d 12h", "infinity" → seconds. */
int parse_timespan_sec(const char *s, uint64_t *ret) {
        uint64_t usec;
        int r = parse_timespan_usec(s, &usec);

        if (r < 0)
                return r;
        *ret = usec == AGENTD_UNLIMITED ? AGENTD_UNLIMITED : usec / 1000000;
        return 0;
}

/* "infinity" (1, *ret AGENTD_UNLIMITED), or the decimal number s starts with (0, *end after it). */
static int parse_leading_number(const char *s, uint64_t *ret, char **end) {
        unsigned long long n;

        if (streq(s, "infinity")) {
                *ret = AGENTD_UNLIMITED;
                return 1;
        }
        if (!isdigit((unsigned char) *s))
                return -EINVAL;
        errno = 0;
        n = strtoull(s, end, 10);
        if (errno)
                return -ERANGE;
        *ret = n;
        return 0;
}

/* "512M", "2G", "1073741824", "infinity" → bytes (K, M, G, T: powers of 1024). */
int parse_size(const char *s, uint64_t *ret) {
        unsigned shift = 0;
        uint64_t n;
        char *end;
        int r;

        r = parse_leading_number(s, &n, &end);
        if (r != 0) {
                *ret = n;
                return r < 0 ? r : 0;
        }
        if (*end) {
                const char *p = strchr("KMGT", *end);
                if (!p || !(end[1] == 0 || (end[1] == 'i' && end[2] == 'B' && !end[3]) || (end[1] == 'B' && !end[2])))
                        return -EINVAL;
                shift = 10 * (unsigned) (p - "KMGT" + 1);
        }
        if (n > (UINT64_MAX - 1) >> shift)
                return -ERANGE;
        *ret = n << shift;
        return 0;
}

int parse_count(const char *s, uint64_t min, uint64_t max, uint64_t *ret) {
        uint64_t n;
        char *end;
        int r;

        r = parse_leading_number(s, &n, &end);
        if (r < 0)
                return r;
        if (r == 0 && (*end || n < min || n > max))
                return -ERANGE;
        *ret = n;
        return 0;
}

/* yes/no, true/false, on/off, 1/0, as systemd reads them. */
int parse_boolean(const char *s) {
        static const char *const yes[] = { "1", "yes", "y", "true", "t", "on" };
        static const char *const no[] = { "0", "no", "n", "false", "f", "off" };

        for (size_t i = 0; i < ELEMENTSOF(yes); i++) {
                if (strcasecmp(s, yes[i]) == 0)
                        return 1;
                if (strcasecmp(s, no[i]) == 0)
                        return 0;
        }
        return -EINVAL;
}

bool backend_name_ok(const char *s) {
        if (strempty(s) || strlen(s) > 64)
                return false;
        for (const char *p = s; *p; p++)
                if (!(islower((unsigned char) *p) || isdigit((unsigned char) *p) || *p == '-' || *p == '_'))
                        return false;
        return true;
}

/* An OCI runtime's name as dockerd's daemon.json spells them: runc, runsc, io.containerd.runc.v2. */
bool runtime_name_ok(const char *s) {
        size_t n = strlen(s);

        return n > 0 && n <= 64 && strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_") == n;
}

int parse_cpus(const char *s, double *ret) {
        char *end;
        double d = strtod(s, &end);

        if (end == s || *end || !isfinite(d) || d < 0.01 || d > 4096)
                return -EINVAL;
        *ret = d;
        return 0;
}

void config_put_count(FILE *out, const char *key, uint64_t v) {
        if (v == AGENTD_UNLIMITED)
                fprintf(out, "%s=infinity\n", key);
        else
                fprintf(out, "%s=%llu\n", key, (unsigned long long) v);
}

void config_put_size(FILE *out, const char *key, uint64_t v) {
        if (v == AGENTD_UNLIMITED)
                fprintf(out, "%s=infinity\n", key);
        else if (v % (1ULL << 30) == 0)
                fprintf(out, "%s=%lluG\n", key, (unsigned long long) (v >> 30));
        else if (v % (1ULL << 20) == 0)
                fprintf(out, "%s=%lluM\n", key, (unsigned long long) (v >> 20));
        else
                fprintf(out, "%s=%llu\n", key, (unsigned long long) v);
}

/* SPDX-License-Identifier: MIT */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

static int max_level = LOG_INFO;
static const char *log_prefix = NULL;

void log_set_max_level(int level) {
        max_level = level;
}

int log_get_max_level(void) {
        return max_level;
}

void log_set_prefix(const char *prefix) {
        log_prefix = prefix;
}

void log_parse_env(void) {
        static const struct {
                const char *name;
                int level;
        } table[] = {
                { "debug", LOG_DEBUG }, { "info", LOG_INFO },   { "notice", LOG_NOTICE },
                { "warning", LOG_WARNING }, { "err", LOG_ERR }, { "error", LOG_ERR },
        };
        const char *e = getenv("AGENTIX_LOG_LEVEL");

        if (!e)
                return;
        for (size_t i = 0; i < ELEMENTSOF(table); i++)
                if (streq(e, table[i].name)) {
                        max_level = table[i].level;
                        return;
                }
}

int log_internal(int level, int error, const char *file, int line, const char *fmt, ...) {
        char buf[2048];
        va_list ap;

        /* Make %m print the errno we were handed. */
        errno = error;
        va_start(ap, fmt);
        vsnprintf(buf, sizeof(buf), fmt, ap);
        va_end(ap);

        if (max_level >= LOG_DEBUG)
                fprintf(stderr, "%s%s%s:%d: %s\n", log_prefix ?: "", log_prefix ? ": " : "", file, line, buf);
        else
                fprintf(stderr, "%s%s%s\n", log_prefix ?: "", log_prefix ? ": " : "", buf);

        return -(error ?: 1);
}

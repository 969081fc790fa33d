/* SPDX-License-Identifier: MIT */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "log.h"

/* log_journal_send() is in log-journal.c, which only the programs that may run under systemd
 * link (agentd, its backends, agentix-server); without it, messages go to stderr. The worker
 * runs only inside sandboxes, and so never loads libsystemd (about 0.6 MiB of its resident
 * size with the libraries that come with it). */
#pragma weak log_journal_send

static int max_level = LOG_INFO;
static const char *log_prefix = NULL;
static int stderr_is_journal = -1; /* not looked yet */

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

/* systemd sets $JOURNAL_STREAM to the device and inode of the stream it connected to stderr;
 * a program that finds its stderr is that stream may log to the journal directly (with fields),
 * and one whose stderr was redirected since must not. */
bool log_stderr_is_journal(void) {
        unsigned long long dev, ino;
        const char *e;
        struct stat st;

        if (stderr_is_journal >= 0)
                return stderr_is_journal;
        e = getenv("JOURNAL_STREAM");
        stderr_is_journal = e && sscanf(e, "%llu:%llu", &dev, &ino) == 2 && fstat(STDERR_FILENO, &st) >= 0 &&
                            (unsigned long long) st.st_dev == dev && (unsigned long long) st.st_ino == ino;
        return stderr_is_journal;
}

int log_internalv_fields(int level, int error, const char *file, int line, const char *const *fields,
                         const char *fmt, va_list ap) {
        char buf[2048];

        /* Make %m print the errno we were handed. */
        errno = error;
        vsnprintf(buf, sizeof(buf), fmt, ap);

        if (log_journal_send && log_stderr_is_journal() &&
            log_journal_send(level, error, file, line, fields, log_prefix, buf) >= 0)
                return -(error ?: 1);
        if (max_level >= LOG_DEBUG)
                fprintf(stderr, "%s%s%s:%d: %s\n", log_prefix ?: "", log_prefix ? ": " : "", file, line, buf);
        else
                fprintf(stderr, "%s%s%s\n", log_prefix ?: "", log_prefix ? ": " : "", buf);

        return -(error ?: 1);
}

int log_internal_fields(int level, int error, const char *file, int line, const char *const *fields,
                        const char *fmt, ...) {
        va_list ap;
        int r;

        va_start(ap, fmt);
        r = log_internalv_fields(level, error, file, line, fields, fmt, ap);
        va_end(ap);
        return r;
}

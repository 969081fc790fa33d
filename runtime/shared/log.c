/* SPDX-License-Identifier: MIT */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
/* CODE_FILE= and CODE_LINE= are the caller's, not this file's. */
#define SD_JOURNAL_SUPPRESS_LOCATION
#include <systemd/sd-journal.h>

#include "log.h"

#define LOG_MAX_FIELDS 8

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

static int log_to_journal(int level, int error, const char *file, int line, const char *const *fields,
                          const char *message) {
        char priority[32], code_file[256], code_line[32], errno_field[32], identifier[64];
        _cleanup_free_ char *message_field = NULL;
        struct iovec iov[6 + LOG_MAX_FIELDS];
        size_t n = 0;

        if (asprintf(&message_field, "MESSAGE=%s", message) < 0)
                return -ENOMEM;
        snprintf(priority, sizeof(priority), "PRIORITY=%d", level);
        snprintf(code_file, sizeof(code_file), "CODE_FILE=%s", file);
        snprintf(code_line, sizeof(code_line), "CODE_LINE=%d", line);
        iov[n++] = (struct iovec) { message_field, strlen(message_field) };
        iov[n++] = (struct iovec) { priority, strlen(priority) };
        iov[n++] = (struct iovec) { code_file, strlen(code_file) };
        iov[n++] = (struct iovec) { code_line, strlen(code_line) };
        if (log_prefix) {
                snprintf(identifier, sizeof(identifier), "SYSLOG_IDENTIFIER=%s", log_prefix);
                iov[n++] = (struct iovec) { identifier, strlen(identifier) };
        }
        if (error > 0) {
                snprintf(errno_field, sizeof(errno_field), "ERRNO=%d", error);
                iov[n++] = (struct iovec) { errno_field, strlen(errno_field) };
        }
        for (size_t i = 0; fields && fields[i] && i < LOG_MAX_FIELDS; i++)
                iov[n++] = (struct iovec) { (char *) fields[i], strlen(fields[i]) };
        return sd_journal_sendv(iov, n);
}

int log_internalv_fields(int level, int error, const char *file, int line, const char *const *fields,
                         const char *fmt, va_list ap) {
        char buf[2048];

        /* Make %m print the errno we were handed. */
        errno = error;
        vsnprintf(buf, sizeof(buf), fmt, ap);

        if (log_stderr_is_journal() && log_to_journal(level, error, file, line, fields, buf) >= 0)
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

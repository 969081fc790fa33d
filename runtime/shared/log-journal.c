/* SPDX-License-Identifier: MIT */
/* Log messages as journal entries with fields (see log_stderr_is_journal()). Linked only into
 * programs that may run under systemd; log.c falls back to stderr without it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
/* CODE_FILE= and CODE_LINE= are the caller's, not this file's. */
#define SD_JOURNAL_SUPPRESS_LOCATION
#include <systemd/sd-journal.h>

#include "log.h"
#include "macro.h"

#define LOG_MAX_FIELDS 8

int log_journal_send(int level, int error, const char *file, int line, const char *const *fields,
                     const char *prefix, const char *message) {
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
        if (prefix) {
                snprintf(identifier, sizeof(identifier), "SYSLOG_IDENTIFIER=%s", prefix);
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

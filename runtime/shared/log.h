/* SPDX-License-Identifier: MIT */
#pragma once

/* Minimal systemd-style logging to stderr. log_*_errno() returns the negative errno it was
 * given, so call sites can write `return log_error_errno(r, "Failed to …: %m");` — %m prints
 * strerror of that errno, not of whatever errno happens to hold. */

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <syslog.h>

#include "macro.h"

void log_set_max_level(int level);
int log_get_max_level(void);
void log_set_prefix(const char *prefix);
void log_parse_env(void); /* AGENTIX_LOG_LEVEL=debug|info|notice|warning|err */

/* fields: NULL, or up to 8 extra "KEY=value" journal fields, NULL-terminated. Where stderr is
 * the journal's stream (a systemd service) a message goes to the journal with them (and
 * PRIORITY, CODE_FILE, CODE_LINE, ERRNO, SYSLOG_IDENTIFIER); elsewhere it is one stderr line. */
int log_internal_fields(int level, int error, const char *file, int line, const char *const *fields,
                        const char *fmt, ...) _printf_(6, 7);
int log_internalv_fields(int level, int error, const char *file, int line, const char *const *fields,
                         const char *fmt, va_list ap) _printf_(6, 0);
#define log_internal(level, error, file, line, ...) log_internal_fields(level, error, file, line, NULL, __VA_ARGS__)
bool log_stderr_is_journal(void);
/* One message as a journal entry (log-journal.c, libagentix_log_journal_dep): programs that do
 * not link it log to stderr only. */
int log_journal_send(int level, int error, const char *file, int line, const char *const *fields,
                     const char *prefix, const char *message);

#define log_full_errno(level, error, ...)                                               \
        ({                                                                              \
                int _l_ = (level), _e_ = (error);                                       \
                _e_ = _e_ < 0 ? -_e_ : _e_;                                             \
                _l_ <= log_get_max_level() ? log_internal(_l_, _e_, __FILE__, __LINE__, __VA_ARGS__) \
                                           : -(_e_ ?: 1);                               \
        })

#define log_debug(...) (void) log_full_errno(LOG_DEBUG, 0, __VA_ARGS__)
#define log_info(...) (void) log_full_errno(LOG_INFO, 0, __VA_ARGS__)
#define log_notice(...) (void) log_full_errno(LOG_NOTICE, 0, __VA_ARGS__)
#define log_warning(...) (void) log_full_errno(LOG_WARNING, 0, __VA_ARGS__)
#define log_error(...) (void) log_full_errno(LOG_ERR, 0, __VA_ARGS__)

#define log_debug_errno(e, ...) log_full_errno(LOG_DEBUG, e, __VA_ARGS__)
#define log_info_errno(e, ...) log_full_errno(LOG_INFO, e, __VA_ARGS__)
#define log_warning_errno(e, ...) log_full_errno(LOG_WARNING, e, __VA_ARGS__)
#define log_error_errno(e, ...) log_full_errno(LOG_ERR, e, __VA_ARGS__)

#define log_oom() log_error_errno(ENOMEM, "Out of memory.")

/* SPDX-License-Identifier: MIT */
#pragma once

/* Reporting a failure: one line on stderr, `agentixctl: <what failed>: <why>`, and the exit
 * status that goes with it. Library errors are boiled down to their message's first line (a
 * traceback or the server's "Error: " prefix is never shown). */

#include "agentix.h"
#include "macro.h"

/* Print "agentixctl: <fmt>" and return `status`. */
int fail(int status, const char *fmt, ...) _printf_(2, 3);
/* Same, with %m standing for strerror(err) (err negative or positive). */
int fail_errno(int status, int err, const char *fmt, ...) _printf_(3, 4);
/* "agentixctl: <fmt>: <why e failed>", returning the status for e's kind. */
int fail_agentix(const agentix_error *e, const char *fmt, ...) _printf_(2, 3);

/* The exit status for a libagentix error. */
int exit_status_from_error(const agentix_error *e);
/* The reason an error gives, for a person: its message's first line without "Error: ", with
 * the remote type in front when that helps ("ValueError: …"). Written to buf. */
const char *error_reason(const agentix_error *e, char *buf, size_t size);

/* getopt_long() returned ':' or '?' (optstring starts with "+:" and opterr is 0): report the
 * option and return EXIT_USAGE. */
int fail_option(const char *verb, int c, char *const argv[]);
/* A usage error in `verb`: "agentixctl: <verb>: <fmt> (see 'agentixctl <verb> --help')". */
int fail_usage(const char *verb, const char *fmt, ...) _printf_(2, 3);

/* The option cases every command shares (see COMMON_LONG_OPTIONS in agentixctl.h). */
#define COMMON_OPTION_CASES(verb, help_fn, argv)        \
        case 'h':                                       \
                help_fn();                              \
                return EXIT_OK;                         \
        case ARG_JSON:                                  \
                arg_json = true;                        \
                break;                                  \
        case 'q':                                       \
                arg_quiet = true;                       \
                break;                                  \
        case ':':                                       \
        case '?':                                       \
                return fail_option(verb, c, argv)

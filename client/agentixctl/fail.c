/* SPDX-License-Identifier: MIT */
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "agentixctl.h"
#include "fail.h"

static int vfail(int status, int err, const char *fmt, va_list ap) {
        char line[4096];

        errno = err < 0 ? -err : err;
        vsnprintf(line, sizeof(line), fmt, ap);
        /* One line, whatever the message holds. */
        line[strcspn(line, "\r\n")] = 0;
        fflush(stdout);
        fprintf(stderr, "agentixctl: %s\n", line);
        return status;
}

int fail(int status, const char *fmt, ...) {
        va_list ap;

        va_start(ap, fmt);
        vfail(status, 0, fmt, ap);
        va_end(ap);
        return status;
}

int fail_errno(int status, int err, const char *fmt, ...) {
        va_list ap;

        va_start(ap, fmt);
        vfail(status, err, fmt, ap);
        va_end(ap);
        return status;
}

int exit_status_from_error(const agentix_error *e) {
        switch (e->kind) {
        case AGENTIX_E_NONE:
                return EXIT_OK;
        case AGENTIX_E_UNAUTHORIZED:
                return EXIT_NOPERM;
        case AGENTIX_E_CONNECTION:
                return EXIT_UNAVAILABLE;
        case AGENTIX_E_TIMEOUT:
        case AGENTIX_E_DEADLINE_EXCEEDED:
                return EXIT_TIMEOUT;
        case AGENTIX_E_PROTOCOL:
                return EXIT_PROTOCOL;
        case AGENTIX_E_INVALID:
                return e->code == -ENOMEM ? EXIT_SOFTWARE : EXIT_USAGE;
        case AGENTIX_E_SANDBOX:
                /* agentd's errors: whose fault, and what to do. */
                if (e->type && streq(e->type, "NotOwner"))
                        return EXIT_NOPERM;
                if (e->type && streq(e->type, "InvalidConfig"))
                        return EXIT_USAGE;
                if (e->type && streq(e->type, "BackendUnavailable"))
                        return EXIT_UNAVAILABLE;
                return EXIT_FAILED;
        default:
                return EXIT_FAILED;
        }
}

const char *error_reason(const agentix_error *e, char *buf, size_t size) {
        const char *m = e->message, *type = e->type;
        size_t n;

        if (strempty(m))
                m = NULL;
        if (m && strneq(m, "Error: ", 7))
                m = m + 7;

        /* A module's own exception reads best with its type in front, as Python prints it. fs
         * errors carry their code as the type, and their message says it already. */
        bool with_type = !strempty(type) && m &&
                (e->kind == AGENTIX_E_REMOTE || e->kind == AGENTIX_E_ARGUMENT || e->kind == AGENTIX_E_WORKER_DIED);

        if (m)
                n = (size_t) snprintf(buf, size, "%s%s%s", with_type ? type : "", with_type ? ": " : "", m);
        else if (!strempty(type))
                n = (size_t) snprintf(buf, size, "%s", type);
        else if (e->code < 0)
                n = (size_t) snprintf(buf, size, "%s", strerror(-e->code));
        else
                n = (size_t) snprintf(buf, size, "%s", agentix_error_kind_name(e->kind));
        (void) n;
        buf[strcspn(buf, "\r\n")] = 0;
        return buf;
}

int fail_agentix(const agentix_error *e, const char *fmt, ...) {
        char what[2048], why[2048];
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(what, sizeof(what), fmt, ap);
        va_end(ap);
        return fail(exit_status_from_error(e), "%s: %s", what, error_reason(e, why, sizeof(why)));
}

int fail_option(const char *verb, int c, char *const argv[]) {
        char opt[3] = { '-', (char) optopt, 0 }, name[256];
        const char *last = optind > 0 ? argv[optind - 1] : NULL;

        /* A long option is best named as written (without its =value), a short one by optopt
         * (it may sit in a cluster like -qx). */
        if (last && strneq(last, "--", 2))
                snprintf(name, sizeof(name), "%.*s", (int) strcspn(last, "="), last);
        else
                snprintf(name, sizeof(name), "%s", optopt > 0 && optopt < 128 ? opt : strna(last));

        if (c == ':')
                return fail_usage(verb, "option '%s' needs an argument", name);
        return fail_usage(verb, "unknown option '%s'", name);
}

int fail_usage(const char *verb, const char *fmt, ...) {
        char what[2048];
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(what, sizeof(what), fmt, ap);
        va_end(ap);
        if (verb)
                return fail(EXIT_USAGE, "%s: %s (see 'agentixctl %s --help')", verb, what, verb);
        return fail(EXIT_USAGE, "%s (see 'agentixctl --help')", what);
}

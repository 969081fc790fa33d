/* SPDX-License-Identifier: MIT */
/* agentixctl usage: what a user holds against their quotas (Manager.GetUsage). */
#include <errno.h>
#include <getopt.h>
#include <pwd.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>

#include "agentixctl.h"
#include "fail.h"
#include "format-util.h"
#include "macro.h"
#include "output.h"

static void usage_help(void) {
        printf("Usage: agentixctl usage [OPTIONS]\n"
               "\n"
               "Show what you hold against your quotas (agentd.conf [Quotas], and your own\n"
               "agentd.conf.d/users/NAME.conf): sandboxes, their CPUs and memory, snapshots.\n"
               "\n"
               "  -h --help               Show this help\n"
               "     --uid=UID            Another user's (root only)\n"
               "     --json               One JSON object: agentd's keys as they are\n"
               "\n"
               "See agentixctl(1).\n");
}

static void line_count(const char *what, uint64_t have, uint64_t max) {
        if (have == AGENTIX_STATS_UNKNOWN)
                printf("%-10s -\n", what);
        else if (max == AGENTIX_STATS_UNKNOWN)
                printf("%-10s %llu (no quota)\n", what, (unsigned long long) have);
        else
                printf("%-10s %llu of %llu\n", what, (unsigned long long) have, (unsigned long long) max);
}

/* "alice (1000)", or the number alone for a uid no passwd entry names. */
#define USER_NAME_MAX 64

static const char *user_name(uid_t uid, char buf[static USER_NAME_MAX]) {
        struct passwd pw, *found = NULL;
        char scratch[1024];

        if (getpwuid_r(uid, &pw, scratch, sizeof(scratch), &found) == 0 && found)
                snprintf(buf, USER_NAME_MAX, "%.40s (%u)", found->pw_name, (unsigned) uid);
        else
                snprintf(buf, USER_NAME_MAX, "%u", (unsigned) uid);
        return buf;
}

int verb_usage(int argc, char *argv[]) {
        enum { ARG_UID = ARG_COMMON_END + 1 };
        static const struct option options[] = { COMMON_LONG_OPTIONS, { "uid", required_argument, NULL, ARG_UID }, {} };
        agentix_error e = AGENTIX_ERROR_NULL;
        agentix_manager *m = NULL;
        int64_t uid = AGENTIX_CALLER;
        char a[FORMAT_BYTES_MAX], b[FORMAT_BYTES_MAX], name[USER_NAME_MAX];
        agentix_usage u;
        int c, r, status;
        char *end;

        while ((c = getopt_long(argc, argv, "+:" COMMON_OPTIONS, options, NULL)) >= 0)
                switch (c) {
                        COMMON_OPTION_CASES("usage", usage_help, argv);
                case ARG_UID:
                        errno = 0;
                        uid = (int64_t) strtoll(optarg, &end, 10);
                        if (errno || *end || !*optarg || uid < 0 || uid > UINT32_MAX - 1)
                                return fail_usage("usage", "--uid=%s: a uid", optarg);
                        break;
                }
        if (optind < argc)
                return fail_usage("usage", "unexpected argument '%s'", argv[optind]);
        status = ctl_manager_open(&m);
        if (status != EXIT_OK)
                return status;
        r = agentix_usage_get(m, uid, &u, &e);
        agentix_manager_free(m);
        if (r < 0) {
                status = fail_agentix(&e, "cannot read the usage");
                agentix_error_done(&e);
                return status;
        }
        if (arg_json) {
                json_t *j = json_pack("{s:I, s:I, s:f, s:I}", "uid", (json_int_t) u.uid, "sandboxes", (json_int_t) u.sandboxes,
                                      "cpus", u.cpus, "memory", (json_int_t) u.memory);

                if (j && u.snapshots != AGENTIX_STATS_UNKNOWN)
                        (void) json_object_set_new(j, "snapshots", json_integer((json_int_t) u.snapshots));
                if (j && u.max_sandboxes != AGENTIX_STATS_UNKNOWN)
                        (void) json_object_set_new(j, "max_sandboxes", json_integer((json_int_t) u.max_sandboxes));
                if (j && u.max_cpus > 0)
                        (void) json_object_set_new(j, "max_cpus", json_real(u.max_cpus));
                if (j && u.max_memory != AGENTIX_STATS_UNKNOWN)
                        (void) json_object_set_new(j, "max_memory", json_integer((json_int_t) u.max_memory));
                if (j && u.max_snapshots != AGENTIX_STATS_UNKNOWN)
                        (void) json_object_set_new(j, "max_snapshots", json_integer((json_int_t) u.max_snapshots));
                return print_json(j) < 0 ? EXIT_IOERR : EXIT_OK;
        }
        printf("%-10s %s\n", "User:", user_name(u.uid, name));
        line_count("Sandboxes:", u.sandboxes, u.max_sandboxes);
        if (u.max_cpus > 0)
                printf("%-10s %g of %g\n", "CPUs:", u.cpus, u.max_cpus);
        else
                printf("%-10s %g (no quota)\n", "CPUs:", u.cpus);
        if (u.max_memory == AGENTIX_STATS_UNKNOWN)
                printf("%-10s %s (no quota)\n", "Memory:", format_bytes(u.memory, a));
        else
                printf("%-10s %s of %s\n", "Memory:", format_bytes(u.memory, a), format_bytes(u.max_memory, b));
        line_count("Snapshots:", u.snapshots, u.max_snapshots);
        return EXIT_OK;
}

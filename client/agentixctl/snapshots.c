/* SPDX-License-Identifier: MIT */
/* agentixctl snapshot, snapshots, snapshot-delete: a sandbox's filesystem as an image a create
 * can name, through agentd. */
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>

#include "agentixctl.h"
#include "fail.h"
#include "format-util.h"
#include "output.h"

static void snapshot_help(void) {
        printf("Usage: agentixctl snapshot [OPTIONS] ID\n"
               "\n"
               "Commit a sandbox's filesystem (not the bundle at /nix, not its token) as an image;\n"
               "print its name. 'agentixctl create --image=NAME' starts sandboxes from it. The\n"
               "sandbox is paused while the image is taken. Owner or root only.\n"
               "\n"
               "  -h --help               Show this help\n"
               "     --tag=REPOSITORY[:TAG]\n"
               "                          The image's name (default agentix-snapshot/ID:N, N one\n"
               "                          more than the sandbox's last)\n"
               "\n"
               "See agentixctl(1).\n");
}

#define ARG_TAG ARG_COMMON_END

int verb_snapshot(int argc, char *argv[]) {
        static const struct option options[] = { COMMON_LONG_OPTIONS, { "tag", required_argument, NULL, ARG_TAG }, {} };
        _cleanup_free_ char *image = NULL;
        agentix_error e = AGENTIX_ERROR_NULL;
        agentix_manager *m = NULL;
        const char *tag = NULL;
        int c, r, status;

        while ((c = getopt_long(argc, argv, "+:" COMMON_OPTIONS, options, NULL)) >= 0)
                switch (c) {
                        COMMON_OPTION_CASES("snapshot", snapshot_help, argv);
                case ARG_TAG:
                        if (!optarg[0])
                                return fail_usage("snapshot", "--tag= needs an image name");
                        tag = optarg;
                        break;
                }
        if (optind + 1 != argc)
                return fail_usage("snapshot", "takes one sandbox id");
        status = ctl_manager_open(&m);
        if (status != EXIT_OK)
                return status;
        r = agentix_sandbox_snapshot(m, argv[optind], tag, &image, &e);
        agentix_manager_free(m);
        if (r < 0) {
                status = fail_agentix(&e, "cannot snapshot sandbox %s", argv[optind]);
                agentix_error_done(&e);
                return status;
        }
        if (arg_json)
                (void) print_json(json_pack("{s:s}", "image", image));
        else
                puts(image);
        return EXIT_OK;
}

static void snapshots_help(void) {
        printf("Usage: agentixctl snapshots [OPTIONS]\n"
               "\n"
               "List your snapshots (root: everyone's): image, the sandbox it was taken of, owner,\n"
               "when, size.\n"
               "\n"
               "  -h --help               Show this help\n"
               "     --json               One JSON object per snapshot, per line\n"
               "  -q --quiet              Only the image names\n"
               "\n"
               "See agentixctl(1).\n");
}

int verb_snapshots(int argc, char *argv[]) {
        static const struct option options[] = { COMMON_LONG_OPTIONS, {} };
        agentix_snapshot_info *l = NULL;
        agentix_error e = AGENTIX_ERROR_NULL;
        agentix_manager *m = NULL;
        size_t n = 0;
        int c, r, status;

        while ((c = getopt_long(argc, argv, "+:" COMMON_OPTIONS, options, NULL)) >= 0)
                switch (c) {
                        COMMON_OPTION_CASES("snapshots", snapshots_help, argv);
                }
        if (optind < argc)
                return fail_usage("snapshots", "unexpected argument '%s'", argv[optind]);
        status = ctl_manager_open(&m);
        if (status != EXIT_OK)
                return status;
        r = agentix_snapshot_list(m, &l, &n, &e);
        agentix_manager_free(m);
        if (r < 0) {
                status = fail_agentix(&e, "cannot list the snapshots");
                agentix_error_done(&e);
                return status;
        }
        if (!arg_json && !arg_quiet)
                printf("%-44s %-16s %6s %-19s %10s\n", "IMAGE", "SANDBOX", "OWNER", "CREATED", "SIZE");
        for (size_t i = 0; i < n; i++) {
                char created[FORMAT_TIME_MAX], size[FORMAT_BYTES_MAX];

                if (arg_json)
                        (void) print_json(json_pack("{s:s, s:s, s:I, s:I, s:I}", "image", l[i].image, "sandbox",
                                                    l[i].sandbox_id, "owner", (json_int_t) l[i].owner, "created_at",
                                                    (json_int_t) l[i].created_at, "size", (json_int_t) l[i].size));
                else if (arg_quiet)
                        puts(l[i].image);
                else
                        printf("%-44s %-16s %6u %-19s %10s\n", l[i].image, l[i].sandbox_id, (unsigned) l[i].owner,
                               format_epoch_usec(l[i].created_at * 1000000, created), format_bytes(l[i].size, size));
        }
        agentix_snapshot_list_free(l, n);
        return EXIT_OK;
}

static void snapshot_delete_help(void) {
        printf("Usage: agentixctl snapshot-delete [OPTIONS] IMAGE...\n"
               "\n"
               "Remove snapshots (not while a sandbox runs from one). Owner or root only.\n"
               "\n"
               "  -h --help               Show this help\n"
               "\n"
               "See agentixctl(1).\n");
}

int verb_snapshot_delete(int argc, char *argv[]) {
        static const struct option options[] = { COMMON_LONG_OPTIONS, {} };
        agentix_manager *m = NULL;
        int c, status, worst = EXIT_OK;

        while ((c = getopt_long(argc, argv, "+:" COMMON_OPTIONS, options, NULL)) >= 0)
                switch (c) {
                        COMMON_OPTION_CASES("snapshot-delete", snapshot_delete_help, argv);
                }
        if (optind >= argc)
                return fail_usage("snapshot-delete", "takes one or more image names");
        status = ctl_manager_open(&m);
        if (status != EXIT_OK)
                return status;
        for (int i = optind; i < argc; i++) {
                agentix_error e = AGENTIX_ERROR_NULL;

                if (agentix_snapshot_delete(m, argv[i], &e) < 0) {
                        status = fail_agentix(&e, "cannot delete snapshot %s", argv[i]);
                        agentix_error_done(&e);
                        if (worst == EXIT_OK)
                                worst = status;
                }
        }
        agentix_manager_free(m);
        return worst;
}

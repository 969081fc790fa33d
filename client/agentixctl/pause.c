/* SPDX-License-Identifier: MIT */
/* agentixctl pause, resume: freeze and thaw a sandbox's processes through agentd. */
#include <getopt.h>
#include <stdio.h>

#include "agentixctl.h"
#include "fail.h"

static void pause_help(void) {
        printf("Usage: agentixctl pause [OPTIONS] ID...\n"
               "\n"
               "Freeze every process of the sandboxes: their state becomes paused, their runtime\n"
               "answers nothing (calls wait) until 'agentixctl resume'. Their time to live keeps\n"
               "running. Owner or root only.\n"
               "\n"
               "  -h --help               Show this help\n"
               "\n"
               "See agentixctl(1).\n");
}

static void resume_help(void) {
        printf("Usage: agentixctl resume [OPTIONS] ID...\n"
               "\n"
               "Thaw the processes of paused sandboxes: calls that waited go on. Owner or root only.\n"
               "\n"
               "  -h --help               Show this help\n"
               "\n"
               "See agentixctl(1).\n");
}

static int pause_or_resume(int argc, char *argv[], bool pause) {
        static const struct option options[] = { COMMON_LONG_OPTIONS, {} };
        const char *verb = pause ? "pause" : "resume";
        agentix_manager *m = NULL;
        int c, status, worst = EXIT_OK;

        while ((c = getopt_long(argc, argv, "+:" COMMON_OPTIONS, options, NULL)) >= 0)
                switch (c) {
                        COMMON_OPTION_CASES(verb, (pause ? pause_help : resume_help), argv);
                }
        if (optind >= argc)
                return fail_usage(verb, "takes one or more sandbox ids");
        status = ctl_manager_open(&m);
        if (status != EXIT_OK)
                return status;
        for (int i = optind; i < argc; i++) {
                agentix_error e = AGENTIX_ERROR_NULL;
                int r = pause ? agentix_sandbox_pause(m, argv[i], &e) : agentix_sandbox_resume(m, argv[i], &e);

                if (r < 0) {
                        status = fail_agentix(&e, "cannot %s sandbox %s", verb, argv[i]);
                        agentix_error_done(&e);
                        if (worst == EXIT_OK)
                                worst = status;
                }
        }
        agentix_manager_free(m);
        return worst;
}

int verb_pause(int argc, char *argv[]) {
        return pause_or_resume(argc, argv, true);
}

int verb_resume(int argc, char *argv[]) {
        return pause_or_resume(argc, argv, false);
}

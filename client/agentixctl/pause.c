/* SPDX-License-Identifier: MIT */
/* agentixctl pause, resume, hibernate: freeze and thaw a sandbox's processes, or save them to
 * disk and run them again, through agentd. */
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
               "Thaw the processes of paused sandboxes: calls that waited go on. Run hibernated\n"
               "sandboxes again from their checkpoint. Owner or root only.\n"
               "\n"
               "  -h --help               Show this help\n"
               "\n"
               "See agentixctl(1).\n");
}

static void hibernate_help(void) {
        printf("Usage: agentixctl hibernate [OPTIONS] ID...\n"
               "\n"
               "Save every process of the sandboxes, their memory and files to disk and stop them:\n"
               "their state becomes hibernated and they hold no memory until 'agentixctl resume'\n"
               "runs them again as they were. gVisor (runtime=runsc) sandboxes only; an open TCP\n"
               "connection into or out of a sandbox refuses it (the sandbox runs on). Owner or root.\n"
               "\n"
               "  -h --help               Show this help\n"
               "\n"
               "See agentixctl(1).\n");
}

typedef enum Act {
        ACT_PAUSE,
        ACT_RESUME,
        ACT_HIBERNATE,
} Act;

static int act(int argc, char *argv[], Act what) {
        static const struct option options[] = { COMMON_LONG_OPTIONS, {} };
        static const char *const verbs[] = { [ACT_PAUSE] = "pause", [ACT_RESUME] = "resume", [ACT_HIBERNATE] = "hibernate" };
        static void (*const helps[])(void) = { [ACT_PAUSE] = pause_help, [ACT_RESUME] = resume_help,
                                               [ACT_HIBERNATE] = hibernate_help };
        const char *verb = verbs[what];
        agentix_manager *m = NULL;
        int c, status, worst = EXIT_OK;

        while ((c = getopt_long(argc, argv, "+:" COMMON_OPTIONS, options, NULL)) >= 0)
                switch (c) {
                        COMMON_OPTION_CASES(verb, helps[what], argv);
                }
        if (optind >= argc)
                return fail_usage(verb, "takes one or more sandbox ids");
        status = ctl_manager_open(&m);
        if (status != EXIT_OK)
                return status;
        for (int i = optind; i < argc; i++) {
                agentix_error e = AGENTIX_ERROR_NULL;
                int r = what == ACT_PAUSE  ? agentix_sandbox_pause(m, argv[i], &e) :
                        what == ACT_RESUME ? agentix_sandbox_resume(m, argv[i], &e) :
                                             agentix_sandbox_hibernate(m, argv[i], &e);

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
        return act(argc, argv, ACT_PAUSE);
}

int verb_resume(int argc, char *argv[]) {
        return act(argc, argv, ACT_RESUME);
}

int verb_hibernate(int argc, char *argv[]) {
        return act(argc, argv, ACT_HIBERNATE);
}

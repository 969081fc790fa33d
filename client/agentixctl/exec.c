/* SPDX-License-Identifier: MIT */
/* agentixctl exec: run one command in the sandbox, like docker exec. */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "agentixctl.h"
#include "exec-session.h"
#include "fail.h"
#include "shell-quote.h"
#include "parse-util.h"

#define MAX_ENV 4096

static void help(void) {
        printf("Usage: agentixctl exec [OPTIONS] [--] CMD [ARG...]\n"
               "\n"
               "Run CMD with its arguments in the sandbox (through sh -c, each word quoted), with\n"
               "its output streamed to ours as it comes; exit with its exit status (128+N when\n"
               "killed by signal N, 124 on --timeout).\n"
               "\n"
               "  -h --help               Show this help\n"
               "     --cwd=DIR            Working directory in the sandbox (absolute)\n"
               "  -e --env=KEY=VALUE      Set a variable (KEY alone unsets it); repeatable\n"
               "     --timeout=SECONDS    Kill the command after this long (default: never)\n"
               "     --max-output=BYTES   Stop passing output on after this many bytes\n"
               "                          (default: no limit; 10485760 with --json)\n"
               "  -i --interactive        Forward our stdin to the command\n"
               "  -t --tty                Run the command on a terminal (PTY) in the sandbox\n"
               "     --json               Print {exit_code, stdout, stderr, timed_out, truncated}\n"
               "                          at the end instead of streaming\n"
               "  -q --quiet              Do not report timeouts or cut output on stderr\n"
               "\n"
               "See agentixctl(1).\n");
}

enum {
        ARG_CWD = ARG_COMMON_END,
        ARG_TIMEOUT,
        ARG_MAX_OUTPUT,
};

int verb_exec(int argc, char *argv[]) {
        static const struct option options[] = {
                COMMON_LONG_OPTIONS,
                { "cwd", required_argument, NULL, ARG_CWD },
                { "env", required_argument, NULL, 'e' },
                { "timeout", required_argument, NULL, ARG_TIMEOUT },
                { "max-output", required_argument, NULL, ARG_MAX_OUTPUT },
                { "interactive", no_argument, NULL, 'i' },
                { "tty", no_argument, NULL, 't' },
                {}
        };
        _cleanup_free_ char **env = NULL;
        _cleanup_free_ char *command = NULL;
        size_t n_env = 0;
        ExecSpec spec = { .max_output = -1 };
        bool max_output_set = false;
        int c, r;

        while ((c = getopt_long(argc, argv, "+:" COMMON_OPTIONS "e:it", options, NULL)) >= 0) {
                switch (c) {
                        COMMON_OPTION_CASES("exec", help, argv);
                case ARG_CWD:
                        spec.cwd = optarg;
                        break;
                case 'e':
                        r = env_append(&env, &n_env, optarg);
                        if (r < 0)
                                return fail_usage("exec", "invalid --env '%s': expected KEY=VALUE or KEY", optarg);
                        break;
                case ARG_TIMEOUT:
                        if (parse_seconds(optarg, &spec.timeout_sec) < 0)
                                return fail_usage("exec", "invalid --timeout '%s': expected seconds", optarg);
                        break;
                case ARG_MAX_OUTPUT:
                        if (parse_int64(optarg, 0, &spec.max_output) < 0)
                                return fail_usage("exec", "invalid --max-output '%s': expected bytes", optarg);
                        max_output_set = true;
                        break;
                case 'i':
                        spec.interactive = true;
                        break;
                case 't':
                        spec.tty = true;
                        break;
                }
        }
        if (optind >= argc)
                return fail_usage("exec", "no command given");
        if (spec.cwd && spec.cwd[0] != '/')
                return fail_usage("exec", "--cwd must be an absolute path: %s", spec.cwd);
        if (arg_json && !max_output_set)
                spec.max_output = 10 * 1024 * 1024;

        command = shell_quote_argv(argv + optind, (size_t) (argc - optind));
        if (!command)
                return fail(EXIT_SOFTWARE, "out of memory");
        spec.command = command;
        spec.env = env;

        return exec_session_run("exec", &spec);
}

/* SPDX-License-Identifier: MIT */
/* agentixctl shell: an interactive login shell in the sandbox on a PTY. */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "agentixctl.h"
#include "exec-session.h"
#include "fail.h"
#include "parse-util.h"
#include "shell-attach.h"
#include "shell-quote.h"

static void help(void) {
        printf("Usage: agentixctl shell [OPTIONS]\n"
               "       agentixctl shell --session=NAME [--cwd=DIR] [-e KEY=VALUE]... [--close]\n"
               "\n"
               "Start an interactive login shell in the sandbox ($SHELL there, else the shell that\n"
               "runs commands, /bin/sh) on a terminal: our terminal goes to raw mode, keys\n"
               "(Ctrl-C too) go to the sandbox, window size changes follow. Exit with the shell's\n"
               "status.\n"
               "\n"
               "With --session, use the persistent shell session NAME in the sandbox (shell::),\n"
               "opened now if it is not open: what commands change there (directory, variables,\n"
               "jobs) stays for the next, whoever runs them. On a terminal, a line at a time;\n"
               "Ctrl-C interrupts the command, Ctrl-D detaches and the session goes on. Otherwise\n"
               "standard input is one run, and its exit status is ours.\n"
               "\n"
               "  -h --help               Show this help\n"
               "     --cwd=DIR            Working directory in the sandbox (absolute)\n"
               "  -e --env=KEY=VALUE      Set a variable (KEY alone unsets it); repeatable\n"
               "     --shell=PROGRAM      The shell to start instead (a path or a name in $PATH)\n"
               "     --session=NAME       A persistent session by that name (letters, digits, _.-)\n"
               "     --close              With --session: end that session and its commands\n"
               "  -q --quiet              Say nothing of our own on stderr\n"
               "\n"
               "See agentixctl(1).\n");
}

enum {
        ARG_CWD = ARG_COMMON_END,
        ARG_SHELL,
        ARG_SESSION,
        ARG_CLOSE,
};

int verb_shell(int argc, char *argv[]) {
        static const struct option options[] = {
                COMMON_LONG_OPTIONS,
                { "cwd", required_argument, NULL, ARG_CWD },
                { "env", required_argument, NULL, 'e' },
                { "shell", required_argument, NULL, ARG_SHELL },
                { "session", required_argument, NULL, ARG_SESSION },
                { "close", no_argument, NULL, ARG_CLOSE },
                {}
        };
        _cleanup_free_ char **env = NULL;
        _cleanup_free_ char *command = NULL, *quoted = NULL;
        const char *program = NULL, *session = NULL;
        bool close_session = false;
        size_t n_env = 0;
        ExecSpec spec = { .max_output = -1, .interactive = true, .tty = true };
        int c;

        while ((c = getopt_long(argc, argv, "+:" COMMON_OPTIONS "e:", options, NULL)) >= 0) {
                switch (c) {
                        COMMON_OPTION_CASES("shell", help, argv);
                case ARG_CWD:
                        spec.cwd = optarg;
                        break;
                case 'e':
                        if (env_append(&env, &n_env, optarg) < 0)
                                return fail_usage("shell", "invalid --env '%s': expected KEY=VALUE or KEY", optarg);
                        break;
                case ARG_SHELL:
                        program = optarg;
                        break;
                case ARG_SESSION:
                        session = optarg;
                        break;
                case ARG_CLOSE:
                        close_session = true;
                        break;
                }
        }
        if (optind < argc)
                return fail_usage("shell", "unexpected argument '%s' (use 'agentixctl exec -it -- CMD' to run a command)",
                                  argv[optind]);
        if (spec.cwd && spec.cwd[0] != '/')
                return fail_usage("shell", "--cwd must be an absolute path: %s", spec.cwd);
        if (arg_json)
                return fail_usage("shell", "--json makes no sense for an interactive shell");
        if (close_session && !session)
                return fail_usage("shell", "--close needs --session=NAME");
        if (session) {
                agentix_client *client = NULL;
                int status;

                if (program)
                        return fail_usage("shell", "--shell does not go with --session (a session runs bash)");
                if (session[0] == 0 || strlen(session) > 64 ||
                    strspn(session, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-") != strlen(session))
                        return fail_usage("shell", "--session=%s: a name is 1 to 64 letters, digits, '_', '.' or '-'",
                                          session);
                status = ctl_connect(NULL, 0, &client);
                if (status != EXIT_OK)
                        return status;
                status = close_session ? shell_close(client, session)
                                       : shell_attach(client, session, &(ShellAttachOptions) { .cwd = spec.cwd, .env = env });
                agentix_client_unref(client);
                return status;
        }

        /* `sh -c` runs this: $0 is the shell the server started, the fallback that exists on
         * every image the server runs on (bundles without /bin/sh bring their own). */
        if (program) {
                quoted = shell_quote(program);
                if (!quoted)
                        return fail(EXIT_SOFTWARE, "out of memory");
        }
        if (asprintf(&command, "exec %s -l", quoted ?: "\"${SHELL:-$0}\"") < 0)
                return fail(EXIT_SOFTWARE, "out of memory");
        spec.command = command;
        spec.env = env;

        return exec_session_run("shell", &spec);
}

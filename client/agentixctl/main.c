/* SPDX-License-Identifier: MIT */
/* agentixctl: the command line of agentix. Global options, then one command; this file parses
 * the former and dispatches to the latter (one file per command group). */
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "agentixctl.h"
#include "fail.h"
#include "parse-util.h"

const char *arg_url = NULL;
char *arg_token = NULL;
agentix_transport arg_transport = AGENTIX_TRANSPORT_AUTO;
uint64_t arg_connect_timeout_usec = 0;
bool arg_json = false;
bool arg_quiet = false;
const char *arg_sandbox = NULL;
bool arg_user_bus = false;

static int verb_help(int argc, char *argv[]);

typedef struct Verb {
        const char *name;
        int (*run)(int argc, char *argv[]);
} Verb;

/* Each command connects itself, when and where it needs to: the sandbox commands to agentd,
 * the others to a runtime (--url, or --sandbox through agentd). */
static const Verb verbs[] = {
        { "create", verb_create },
        { "list", verb_list },
        { "pools", verb_pools },
        { "status", verb_status },
        { "stats", verb_stats },
        { "usage", verb_usage },
        { "logs", verb_logs },
        { "pause", verb_pause },
        { "port", verb_port },
        { "resume", verb_resume },
        { "hibernate", verb_hibernate },
        { "snapshot", verb_snapshot },
        { "snapshots", verb_snapshots },
        { "snapshot-delete", verb_snapshot_delete },
        { "delete", verb_delete },
        { "run", verb_run },
        { "exec", verb_exec },
        { "shell", verb_shell },
        { "code", verb_code },
        { "call", verb_call },
        { "cp", verb_cp },
        { "read", verb_read },
        { "write", verb_write },
        { "edit", verb_edit },
        { "ls", verb_ls },
        { "grep", verb_grep },
        { "glob", verb_glob },
        { "watch", verb_watch },
        { "build", verb_build },
        { "help", verb_help },
};

static void help(void) {
        printf("Usage: agentixctl [OPTIONS] COMMAND [ARGS...]\n"
               "\n"
               "Run commands, call functions and move files in an agentix sandbox.\n"
               "\n"
               "Commands:\n"
               "  exec [--cwd=DIR] [-e|--env=K=V]... [--timeout=S] [--max-output=BYTES]\n"
               "       [-i|--interactive] [-t|--tty] [--] CMD [ARG...]\n"
               "                          Run a command, streaming its output; exit with its status\n"
               "  shell [--cwd=DIR] [-e|--env=K=V]... [--shell=PROGRAM]\n"
               "                          Interactive login shell on a terminal\n"
               "  shell --session=NAME [--close]\n"
               "                          A persistent shell session: state kept between commands\n"
               "  code [--context=ID] [--language=LANG] [--timeout=S]\n"
               "       [--output-dir=DIR|--no-images] [-c|--code=CODE | FILE | -]\n"
               "                          Run code in a stateful code context (a Jupyter kernel)\n"
               "  code --new-context | --contexts | --interrupt=ID | --restart=ID\n"
               "       | --delete-context=ID\n"
               "                          Start, list, interrupt, restart, end code contexts\n"
               "  call [--stream|--bidi] [--deadline=S] MODULE::FUNCTION [ARGS] [KWARGS]\n"
               "                          Call a function with JSON arguments, print JSON\n"
               "  cp [-p|--parents] [--batch-size=BYTES] [--jobs=N] SRC DST\n"
               "                          Copy files or directories; :PATH is in the sandbox\n"
               "  read [--offset=N] [--limit=N] PATH\n"
               "                          Print a file's lines, numbered\n"
               "  write [-f|--overwrite] PATH [FILE]\n"
               "                          Write a file from FILE or stdin\n"
               "  edit [-a|--replace-all] PATH OLD NEW\n"
               "                          Replace text in a file\n"
               "  ls [PATH]               List a directory\n"
               "  grep [--glob=PATTERN] [-m|--max-count=N] PATTERN [PATH]\n"
               "                          Search files for literal text\n"
               "  glob PATTERN [PATH]     Find files by name pattern\n"
               "  watch [--no-recursive] [-n|--count=N] PATH\n"
               "                          Print changes below PATH as they happen\n"
               "  create --image=IMAGE --bundle=BUNDLE [--cpus=N] [--memory=BYTES] [--pids=N]\n"
               "       [-e|--env=K=V]... [--label=K=V]... [--ttl=S] [--workdir=DIR]\n"
               "       [--network=NET] [--runtime=NAME] [--read-only] [--user=USER[:GROUP]]\n"
               "       [--egress=CIDR]... [--no-egress] [--platform=P] [--setup=CMD]\n"
               "                          Create a sandbox through agentd; print its id\n"
               "  list                    List the sandboxes agentd shows you\n"
               "  pools                   List agentd's warm pools: ready and size\n"
               "  status ID               Show a sandbox's properties and what it uses\n"
               "  stats [--no-stream] [ID...]\n"
               "                          What sandboxes use: CPU, memory, processes, network, I/O\n"
               "  usage [--uid=UID]       What you hold against your quotas\n"
               "  logs [-n|--lines=N] ID  Print what its runtime wrote (the last N lines)\n"
               "  port [--link] ID PORT   Print the address of a port in the sandbox, and its token\n"
               "  pause ID...             Freeze a sandbox's processes (calls wait)\n"
               "  resume ID...            Thaw them, or run hibernated ones again\n"
               "  hibernate ID...         Save a sandbox's processes and memory to disk, stop it\n"
               "  snapshot [--tag=NAME] ID\n"
               "                          Commit its filesystem as an image; print its name\n"
               "  snapshots               List your snapshots\n"
               "  snapshot-delete IMAGE...\n"
               "                          Remove snapshots\n"
               "  delete ID...            Delete sandboxes\n"
               "  run [CREATE OPTIONS] [--] CMD [ARG...]\n"
               "                          Create a sandbox, run CMD in it, delete it (also on\n"
               "                          failure or Ctrl-C); exit with CMD's status\n"
               "  build [-f|--file=FILE] [-o|--output=FILE] [--platform=OS/ARCH]\n"
               "        [--cache-dir=DIR] [--runtime-dir=DIR] [DIR]\n"
               "                          Build the bundle image DIR/agentix-bundle.conf declares\n"
               "  build --gc [--cache-dir=DIR]\n"
               "                          Remove from the cache what no bundle's last build uses\n"
               "  help [COMMAND]          Show this help, or a command's\n"
               "\n"
               "Options:\n"
               "  -h --help               Show this help ('agentixctl COMMAND --help' for a command's)\n"
               "     --version            Show the version\n"
               "  -s --sandbox=ID         The sandbox to reach through agentd (default\n"
               "                          $AGENTIX_SANDBOX); or:\n"
               "     --url=URL            The sandbox's runtime server, http://HOST:PORT or\n"
               "                          https://HOST:PORT (default $AGENTIX_URL)\n"
               "     --ca-file=FILE       The CA an https:// runtime's certificate must chain to\n"
               "                          (default $AGENTIX_CA_FILE; with --sandbox, agentd's)\n"
               "     --token=TOKEN        Its access token (default $AGENTIX_TOKEN)\n"
               "     --token-file=FILE    Read the token from FILE (first line)\n"
               "     --transport=auto|websocket|polling\n"
               "                          How to connect (default auto: WebSocket, else polling)\n"
               "     --timeout=SECONDS    Give up connecting after this long (default 10)\n"
               "     --user               Talk to agentd on the session bus, not the system bus\n"
               "     --json               Print results as JSON, one value per line\n"
               "  -q --quiet              No progress bars or notes on stderr\n"
               "\n"
               "Exit status: 0 success; exec and shell: the command's status; 1 the operation\n"
               "failed; 64 usage error; 69 cannot connect; 70 internal error; 74 local file error;\n"
               "75 timeout; 76 protocol error; 77 token refused.\n"
               "\n"
               "See agentixctl(1).\n");
}

static const Verb *verb_find(const char *name) {
        for (size_t i = 0; i < ELEMENTSOF(verbs); i++)
                if (streq(verbs[i].name, name))
                        return &verbs[i];
        return NULL;
}

static int verb_help(int argc, char *argv[]) {
        const Verb *v;

        if (argc < 2) {
                help();
                return EXIT_OK;
        }
        v = verb_find(argv[1]);
        if (!v || v->run == verb_help)
                return fail_usage(NULL, "unknown command '%s'", argv[1]);
        optind = 0;
        return v->run(2, (char *[]) { argv[1], (char *) "--help", NULL });
}

static bool stdout_reader_is_gone(void) {
        struct pollfd p = { .fd = STDOUT_FILENO, .events = POLLOUT };

        /* The write end of a pipe without readers polls as POLLERR. */
        return poll(&p, 1, 0) > 0 && (p.revents & POLLERR);
}

static int read_token_file(const char *path) {
        _cleanup_fclose_ FILE *f = NULL;
        _cleanup_free_ char *line = NULL;
        size_t size = 0;
        ssize_t n;

        f = fopen(path, "re");
        if (!f)
                return fail_errno(EXIT_IOERR, errno, "cannot read the token file '%s': %m", path);
        n = getline(&line, &size, f);
        if (n < 0 && ferror(f))
                return fail_errno(EXIT_IOERR, errno, "cannot read the token file '%s': %m", path);
        if (n <= 0)
                return fail(EXIT_IOERR, "the token file '%s' is empty", path);
        line[strcspn(line, "\r\n")] = 0;
        free(arg_token);
        arg_token = TAKE_PTR(line);
        return EXIT_OK;
}

enum {
        ARG_VERSION = ARG_COMMON_END,
        ARG_URL,
        ARG_TOKEN,
        ARG_TOKEN_FILE,
        ARG_CA_FILE,
        ARG_TRANSPORT,
        ARG_TIMEOUT,
        ARG_USER,
};

static int parse_argv(int argc, char *argv[]) {
        static const struct option options[] = {
                COMMON_LONG_OPTIONS,
                { "version", no_argument, NULL, ARG_VERSION },
                { "url", required_argument, NULL, ARG_URL },
                { "token", required_argument, NULL, ARG_TOKEN },
                { "token-file", required_argument, NULL, ARG_TOKEN_FILE },
                { "ca-file", required_argument, NULL, ARG_CA_FILE },
                { "transport", required_argument, NULL, ARG_TRANSPORT },
                { "timeout", required_argument, NULL, ARG_TIMEOUT },
                { "sandbox", required_argument, NULL, 's' },
                { "user", no_argument, NULL, ARG_USER },
                {}
        };
        const char *token = getenv("AGENTIX_TOKEN"), *token_file = NULL;
        double timeout;
        int c, status;

        arg_url = getenv("AGENTIX_URL");
        if (strempty(arg_url))
                arg_url = NULL;
        arg_sandbox = getenv("AGENTIX_SANDBOX");
        if (strempty(arg_sandbox))
                arg_sandbox = NULL;

        while ((c = getopt_long(argc, argv, "+:" COMMON_OPTIONS "s:", options, NULL)) >= 0) {
                switch (c) {
                        COMMON_OPTION_CASES(NULL, help, argv);
                case ARG_VERSION:
                        printf("agentixctl %s\n", AGENTIX_VERSION);
                        return EXIT_OK;
                case ARG_URL:
                        arg_url = optarg;
                        arg_sandbox = NULL;
                        break;
                case 's':
                        arg_sandbox = optarg;
                        break;
                case ARG_USER:
                        arg_user_bus = true;
                        break;
                case ARG_TOKEN:
                        token = optarg;
                        token_file = NULL;
                        break;
                case ARG_TOKEN_FILE:
                        token_file = optarg;
                        break;
                case ARG_CA_FILE:
                        /* libagentix reads it (agentix_options.ca_pem). */
                        if (setenv("AGENTIX_CA_FILE", optarg, 1) < 0)
                                return fail_errno(EXIT_SOFTWARE, -errno, "cannot set the CA file: %m");
                        break;
                case ARG_TRANSPORT:
                        if (streq(optarg, "auto"))
                                arg_transport = AGENTIX_TRANSPORT_AUTO;
                        else if (streq(optarg, "websocket"))
                                arg_transport = AGENTIX_TRANSPORT_WEBSOCKET;
                        else if (streq(optarg, "polling"))
                                arg_transport = AGENTIX_TRANSPORT_POLLING;
                        else
                                return fail_usage(NULL, "invalid --transport '%s': expected auto, websocket or polling",
                                                  optarg);
                        break;
                case ARG_TIMEOUT:
                        if (parse_seconds(optarg, &timeout) < 0 || timeout <= 0)
                                return fail_usage(NULL, "invalid --timeout '%s': expected seconds > 0", optarg);
                        arg_connect_timeout_usec = (uint64_t) (timeout * 1e6);
                        break;
                }
        }

        if (token_file) {
                status = read_token_file(token_file);
                if (status != EXIT_OK)
                        return status;
        } else if (!strempty(token)) {
                arg_token = strdup(token);
                if (!arg_token)
                        return fail(EXIT_SOFTWARE, "out of memory");
        }
        return -1; /* go on */
}

int main(int argc, char *argv[]) {
        const Verb *v;
        int status;

        /* getopt_long() errors are ours to phrase. */
        opterr = 0;
        /* A reader that went away shows up as EPIPE where we write. */
        signal(SIGPIPE, SIG_IGN);

        status = parse_argv(argc, argv);
        if (status >= 0)
                goto finish;
        if (optind >= argc) {
                status = fail_usage(NULL, "no command given");
                goto finish;
        }

        v = verb_find(argv[optind]);
        if (!v) {
                status = fail_usage(NULL, "unknown command '%s'", argv[optind]);
                goto finish;
        }
        argc -= optind;
        argv += optind;
        optind = 0; /* re-initialise getopt for the command's own options */
        status = v->run(argc, argv);

finish:
        /* Output that could not be written is a failure, even when everything else went well. */
        if (fflush(stdout) != 0 || ferror(stdout)) {
                int err = errno;

                /* A reader that stopped early (`agentixctl ls | head -1`) is no error to report:
                 * exit as if SIGPIPE had killed us, as a shell pipeline expects. stdio may have
                 * met the EPIPE long before (errno is stale by now): ask the pipe itself. */
                if (stdout_reader_is_gone())
                        status = status == EXIT_OK ? 128 + SIGPIPE : status;
                else if (status == EXIT_OK)
                        status = fail_errno(EXIT_IOERR, err, "cannot write the output: %m");
        }
        free(arg_token);
        return status;
}

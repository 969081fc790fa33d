/* SPDX-License-Identifier: MIT */
/* agentixctl create, list, status, delete, run: sandboxes through agentd (libagentix's
 * agentix_sandbox_* on D-Bus). */
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <time.h>

#include "agentixctl.h"
#include "fail.h"
#include "format-util.h"
#include "output.h"
#include "stats.h"
#include "parse-util.h"

#define MAX_PAIRS 4096

typedef struct CreateArgs {
        agentix_sandbox_config config;
        char **env, **labels, **egress;
        size_t n_env, n_labels, n_egress;
        bool no_egress;
} CreateArgs;

static void create_args_done(CreateArgs *a) {
        free(a->env);
        free(a->labels);
        free(a->egress);
}

#define CREATE_OPTIONS_HELP                                                                        \
        "     --image=IMAGE        The task image (required)\n"                                   \
        "     --bundle=BUNDLE      The bundle image, from agentixctl build (required)\n"          \
        "     --cpus=N             CPUs (default: agentd's, 1)\n"                                 \
        "     --memory=BYTES       Memory, with K, M, G or T (default: agentd's, 2G; at\n"   \
        "                          most the host's memory unless agentd.conf allows more)\n" \
        "     --pids=N             Processes (default: agentd's, 1024)\n"                        \
        "  -e --env=KEY=VALUE      Set a variable in the sandbox; repeatable\n"                   \
        "     --label=KEY=VALUE    A label on its container; repeatable\n"                        \
        "     --ttl=SECONDS        Delete it after this long (default: agentd's, a day)\n"        \
        "     --workdir=DIR        Its working directory\n"                                       \
        "     --network=NET        The network: isolated (agentd's, the default), none, or\n"  \
        "                          a Docker network agentd allows\n"                          \
        "     --runtime=NAME       The OCI runtime: runc, or runsc for gVisor (default:\n"   \
        "                          agentd's)\n"                                              \
        "     --read-only          A read-only root; /tmp and the workdir stay writable\n"   \
        "     --user=USER[:GROUP]  Run the runtime and its commands as this user\n"           \
        "     --egress=CIDR        Reach only these addresses (and DNS); repeatable\n"      \
        "     --no-egress          No network at all (the runtime still answers)\n"         \
        "     --platform=OS/ARCH   Run the image for this platform\n"                             \
        "     --setup=CMD          A command to run in it before it is handed over\n"

enum {
        ARG_IMAGE = ARG_COMMON_END,
        ARG_BUNDLE,
        ARG_CPUS,
        ARG_MEMORY,
        ARG_PIDS,
        ARG_LABEL,
        ARG_TTL,
        ARG_WORKDIR,
        ARG_NETWORK,
        ARG_PLATFORM,
        ARG_SETUP,
        ARG_RUNTIME,
        ARG_READ_ONLY,
        ARG_USER,
        ARG_EGRESS,
        ARG_NO_EGRESS,
};

#define CREATE_LONG_OPTIONS                                                     \
        { "image", required_argument, NULL, ARG_IMAGE },                        \
        { "bundle", required_argument, NULL, ARG_BUNDLE },                      \
        { "cpus", required_argument, NULL, ARG_CPUS },                          \
        { "memory", required_argument, NULL, ARG_MEMORY },                      \
        { "pids", required_argument, NULL, ARG_PIDS },                          \
        { "env", required_argument, NULL, 'e' },                                \
        { "label", required_argument, NULL, ARG_LABEL },                        \
        { "ttl", required_argument, NULL, ARG_TTL },                            \
        { "workdir", required_argument, NULL, ARG_WORKDIR },                    \
        { "network", required_argument, NULL, ARG_NETWORK },                    \
        { "platform", required_argument, NULL, ARG_PLATFORM },                  \
        { "setup", required_argument, NULL, ARG_SETUP },                        \
        { "runtime", required_argument, NULL, ARG_RUNTIME },                    \
        { "read-only", no_argument, NULL, ARG_READ_ONLY },                      \
        { "user", required_argument, NULL, ARG_USER },                          \
        { "egress", required_argument, NULL, ARG_EGRESS },                      \
        { "no-egress", no_argument, NULL, ARG_NO_EGRESS }

/* "512M", "2G", "1048576". */
static int parse_bytes(const char *s, uint64_t *ret) {
        char *end;
        double v;
        uint64_t mult = 1;

        errno = 0;
        v = strtod(s, &end);
        if (errno || end == s || v < 0)
                return -EINVAL;
        if (*end && end[1] && !(end[1] == 'i' && end[2] == 'B' && !end[3]) && !(end[1] == 'B' && !end[2]))
                return -EINVAL;
        switch (*end) {
        case 0: break;
        case 'k': case 'K': mult = 1ULL << 10; break;
        case 'm': case 'M': mult = 1ULL << 20; break;
        case 'g': case 'G': mult = 1ULL << 30; break;
        case 't': case 'T': mult = 1ULL << 40; break;
        default: return -EINVAL;
        }
        if (v * mult >= 18446744073709551615.0)
                return -ERANGE;
        *ret = (uint64_t) (v * mult);
        return 0;
}

/* One of the create options: 1 taken, 0 not one, or an exit status > 1 … as -status. */
static int create_option(const char *verb, int c, CreateArgs *a) {
        agentix_sandbox_config *cf = &a->config;
        int64_t n;
        double d;

        switch (c) {
        case ARG_IMAGE:
                cf->image = optarg;
                return 1;
        case ARG_BUNDLE:
                cf->bundle = optarg;
                return 1;
        case ARG_CPUS:
                if (parse_seconds(optarg, &d) < 0 || d <= 0)
                        return -fail_usage(verb, "invalid --cpus '%s': expected a number > 0", optarg);
                cf->cpus = d;
                return 1;
        case ARG_MEMORY:
                if (parse_bytes(optarg, &cf->memory) < 0 || cf->memory == 0)
                        return -fail_usage(verb, "invalid --memory '%s': expected bytes, with K, M, G or T", optarg);
                return 1;
        case ARG_PIDS:
                if (parse_int64(optarg, 1, &n) < 0)
                        return -fail_usage(verb, "invalid --pids '%s': expected a number > 0", optarg);
                cf->pids = (uint64_t) n;
                return 1;
        case 'e':
        case ARG_LABEL:
                if (!strchr(optarg, '='))
                        return -fail_usage(verb, "invalid --%s '%s': expected KEY=VALUE", c == 'e' ? "env" : "label",
                                           optarg);
                if (env_append(c == 'e' ? &a->env : &a->labels, c == 'e' ? &a->n_env : &a->n_labels, optarg) < 0)
                        return -fail(EXIT_SOFTWARE, "out of memory");
                return 1;
        case ARG_TTL:
                if (parse_seconds(optarg, &d) < 0 || d < 1)
                        return -fail_usage(verb, "invalid --ttl '%s': expected seconds >= 1", optarg);
                cf->ttl_sec = (uint64_t) d;
                return 1;
        case ARG_WORKDIR:
                cf->workdir = optarg;
                return 1;
        case ARG_NETWORK:
                cf->network = optarg;
                return 1;
        case ARG_PLATFORM:
                cf->platform = optarg;
                return 1;
        case ARG_SETUP:
                cf->setup = optarg;
                return 1;
        case ARG_RUNTIME:
                cf->runtime = optarg;
                return 1;
        case ARG_READ_ONLY:
                cf->read_only = true;
                return 1;
        case ARG_USER:
                cf->user = optarg;
                return 1;
        case ARG_EGRESS:
                if (env_append(&a->egress, &a->n_egress, optarg) < 0)
                        return -fail_usage(verb, "invalid --egress '%s': expected a CIDR (ADDRESS[/PREFIX])", optarg);
                return 1;
        case ARG_NO_EGRESS:
                a->no_egress = true;
                return 1;
        default:
                return 0;
        }
}

static int check_create_args(const char *verb, CreateArgs *a) {
        if (!a->config.image)
                return fail_usage(verb, "--image=IMAGE is required (the task image)");
        if (!a->config.bundle)
                return fail_usage(verb, "--bundle=BUNDLE is required (a bundle image from agentixctl build)");
        if (a->no_egress && a->n_egress > 0)
                return fail_usage(verb, "--no-egress and --egress=CIDR exclude each other");
        if (a->no_egress && !(a->egress = calloc(1, sizeof(char *))))
                return fail(EXIT_SOFTWARE, "out of memory");
        a->config.env = (const char *const *) a->env;
        a->config.labels = (const char *const *) a->labels;
        a->config.egress = (const char *const *) a->egress;
        return EXIT_OK;
}

static int create_sandbox(agentix_manager *m, const agentix_sandbox_config *c, char **ret_id) {
        agentix_error e = AGENTIX_ERROR_NULL;
        int r = agentix_sandbox_create(m, c, ret_id, &e), status = EXIT_OK;

        if (r < 0)
                status = fail_agentix(&e, "cannot create the sandbox");
        agentix_error_done(&e);
        return status;
}

static int delete_sandbox(agentix_manager *m, const char *id) {
        agentix_error e = AGENTIX_ERROR_NULL;
        int r = agentix_sandbox_delete(m, id, &e), status = EXIT_OK;

        if (r < 0)
                status = fail_agentix(&e, "cannot delete sandbox %s", id);
        agentix_error_done(&e);
        return status;
}

/* ---- create ------------------------------------------------------------------------------ */

static void create_help(void) {
        printf("Usage: agentixctl create [OPTIONS]\n"
               "\n"
               "Create a sandbox through agentd and print its id once its runtime answers. Reach it\n"
               "with 'agentixctl --sandbox=ID exec ...'; delete it with 'agentixctl delete ID'.\n"
               "\n"
               "  -h --help               Show this help\n"
               CREATE_OPTIONS_HELP
               "     --json               Print {id, path, runtime_url, state}\n"
               "  -q --quiet              Accepted for symmetry\n"
               "\n"
               "See agentixctl(1) and org.agentix.Agentd1(5).\n");
}

static json_t *info_json(const agentix_sandbox_info *i) {
        return json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:I, s:I, s:I, s:s}", "id", i->id, "path",
                              strna(i->path), "state", strna(i->state), "image", strna(i->image), "bundle",
                              strna(i->bundle), "platform", i->platform ?: "", "backend", strna(i->backend),
                              "runtime_url", i->runtime_url ?: "", "container_id", i->container_id ?: "", "owner",
                              (json_int_t) i->owner, "created_at_usec", (json_int_t) i->created_at_usec,
                              "expires_at_usec", (json_int_t) i->expires_at_usec, "pool", i->pool ?: "");
}

static void print_info_json(const agentix_sandbox_info *i) {
        (void) print_json(info_json(i));
}

int verb_create(int argc, char *argv[]) {
        static const struct option options[] = { COMMON_LONG_OPTIONS, CREATE_LONG_OPTIONS, {} };
        _cleanup_(create_args_done) CreateArgs a = {};
        _cleanup_free_ char *id = NULL;
        agentix_manager *m = NULL;
        int c, k, status;

        while ((c = getopt_long(argc, argv, "+:" COMMON_OPTIONS "e:", options, NULL)) >= 0) {
                switch (c) {
                        COMMON_OPTION_CASES("create", create_help, argv);
                default:
                        k = create_option("create", c, &a);
                        if (k < 0)
                                return -k;
                }
        }
        if (optind < argc)
                return fail_usage("create", "unexpected argument '%s'", argv[optind]);
        status = check_create_args("create", &a);
        if (status != EXIT_OK)
                return status;
        status = ctl_manager_open(&m);
        if (status != EXIT_OK)
                return status;
        status = create_sandbox(m, &a.config, &id);
        if (status == EXIT_OK && (arg_json || !arg_quiet)) {
                agentix_sandbox_info info = {};
                agentix_error e = AGENTIX_ERROR_NULL;
                if (agentix_sandbox_get(m, id, &info, &e) >= 0) {
                        if (arg_json)
                                print_info_json(&info);
                        else {
                                puts(id);
                                /* Standard output stays the id alone: $(agentixctl create ...) */
                                if (!strempty(info.pool))
                                        fprintf(stderr, "From warm pool %s.\n", info.pool);
                        }
                } else
                        status = fail_agentix(&e, "cannot look at sandbox %s", id);
                agentix_sandbox_info_done(&info);
                agentix_error_done(&e);
        } else if (status == EXIT_OK)
                puts(id);
        agentix_manager_free(m);
        return status;
}

/* ---- list, status ------------------------------------------------------------------------ */

static void list_help(void) {
        printf("Usage: agentixctl list [OPTIONS]\n"
               "\n"
               "List the sandboxes agentd shows you: id, state, image, bundle, expiry, runtime.\n"
               "\n"
               "  -h --help               Show this help\n"
               "     --json               One JSON object per sandbox, per line\n"
               "  -q --quiet              Only the ids\n"
               "\n"
               "See agentixctl(1).\n");
}

int verb_list(int argc, char *argv[]) {
        static const struct option options[] = { COMMON_LONG_OPTIONS, {} };
        agentix_sandbox_info *l = NULL;
        agentix_error e = AGENTIX_ERROR_NULL;
        agentix_manager *m = NULL;
        size_t n = 0;
        int c, r, status;

        while ((c = getopt_long(argc, argv, "+:" COMMON_OPTIONS, options, NULL)) >= 0)
                switch (c) {
                        COMMON_OPTION_CASES("list", list_help, argv);
                }
        if (optind < argc)
                return fail_usage("list", "unexpected argument '%s'", argv[optind]);
        status = ctl_manager_open(&m);
        if (status != EXIT_OK)
                return status;
        r = agentix_sandbox_list(m, &l, &n, &e);
        agentix_manager_free(m);
        if (r < 0) {
                status = fail_agentix(&e, "cannot list the sandboxes");
                agentix_error_done(&e);
                return status;
        }
        if (!arg_json && !arg_quiet)
                printf("%-16s %-9s %-28s %-28s %-19s %s\n", "ID", "STATE", "IMAGE", "BUNDLE", "EXPIRES", "RUNTIME");
        for (size_t i = 0; i < n; i++) {
                char expires[FORMAT_TIME_MAX];

                if (arg_json) {
                        print_info_json(&l[i]);
                        continue;
                }
                if (arg_quiet) {
                        puts(l[i].id);
                        continue;
                }
                format_epoch_usec(l[i].expires_at_usec, expires);
                printf("%-16s %-9s %-28s %-28s %-19s %s\n", l[i].id, strna(l[i].state), strna(l[i].image),
                       strna(l[i].bundle), expires, strempty(l[i].runtime_url) ? "-" : l[i].runtime_url);
        }
        agentix_sandbox_list_free(l, n);
        return EXIT_OK;
}

static void status_help(void) {
        printf("Usage: agentixctl status [OPTIONS] ID\n"
               "\n"
               "Show a sandbox's properties, and what it uses when it runs (as agentixctl stats).\n"
               "\n"
               "  -h --help               Show this help\n"
               "     --json               One JSON object\n"
               "  -q --quiet              Only its state\n"
               "\n"
               "See agentixctl(1).\n");
}

int verb_status(int argc, char *argv[]) {
        static const struct option options[] = { COMMON_LONG_OPTIONS, {} };
        agentix_stats st = {};
        bool has_stats;
        agentix_sandbox_info i = {};
        agentix_error e = AGENTIX_ERROR_NULL;
        agentix_manager *m = NULL;
        char created[FORMAT_TIME_MAX], expires[FORMAT_TIME_MAX];
        int c, r, status;

        while ((c = getopt_long(argc, argv, "+:" COMMON_OPTIONS, options, NULL)) >= 0)
                switch (c) {
                        COMMON_OPTION_CASES("status", status_help, argv);
                }
        if (optind + 1 != argc)
                return fail_usage("status", "takes one sandbox id");
        status = ctl_manager_open(&m);
        if (status != EXIT_OK)
                return status;
        r = agentix_sandbox_get(m, argv[optind], &i, &e);
        if (r < 0) {
                agentix_manager_free(m);
                status = fail_agentix(&e, "cannot look at sandbox %s", argv[optind]);
                agentix_error_done(&e);
                return status;
        }
        /* What it uses, when it runs (a stopped one uses nothing: no lines then). */
        has_stats = (streq_ptr(i.state, "running") || streq_ptr(i.state, "paused")) &&
                    agentix_sandbox_stats(m, argv[optind], &st, &e) >= 0;
        agentix_error_done(&e);
        agentix_manager_free(m);
        if (arg_json) {
                json_t *j = info_json(&i);

                if (j && has_stats)
                        (void) json_object_set_new(j, "stats", stats_json(&st));
                (void) print_json(j);
        }
        else if (arg_quiet)
                puts(strna(i.state));
        else {
                format_epoch_usec(i.created_at_usec, created);
                format_epoch_usec(i.expires_at_usec, expires);
                printf("Id: %s\nState: %s\nImage: %s\nBundle: %s\nPlatform: %s\nBackend: %s\nOwner: %u\n"
                       "Created: %s\nExpires: %s\nRuntime: %s\nContainer: %s\nPool: %s\nObject: %s\n",
                       i.id, strna(i.state), strna(i.image), strna(i.bundle), strempty(i.platform) ? "-" : i.platform,
                       strna(i.backend), (unsigned) i.owner, created, expires,
                       strempty(i.runtime_url) ? "-" : i.runtime_url, strempty(i.container_id) ? "-" : i.container_id,
                       strempty(i.pool) ? "-" : i.pool, strna(i.path));
                if (has_stats)
                        stats_print_lines(&st);
        }
        agentix_sandbox_info_done(&i);
        return EXIT_OK;
}

/* ---- logs -------------------------------------------------------------------------------- */

static void logs_help(void) {
        printf("Usage: agentixctl logs [OPTIONS] ID\n"
               "\n"
               "Print what a sandbox's runtime wrote: its container's log (standard output and\n"
               "error, in order). Owner or root only.\n"
               "\n"
               "  -h --help               Show this help\n"
               "  -n --lines=N            The last N lines (1 to 100000, default 100)\n"
               "\n"
               "See agentixctl(1).\n");
}

int verb_logs(int argc, char *argv[]) {
        static const struct option options[] = { COMMON_LONG_OPTIONS, { "lines", required_argument, NULL, 'n' }, {} };
        _cleanup_free_ char *text = NULL;
        agentix_error e = AGENTIX_ERROR_NULL;
        agentix_manager *m = NULL;
        unsigned long long lines = 100;
        int c, r, status;
        char *end;

        while ((c = getopt_long(argc, argv, "+:" COMMON_OPTIONS "n:", options, NULL)) >= 0)
                switch (c) {
                        COMMON_OPTION_CASES("logs", logs_help, argv);
                case 'n':
                        errno = 0;
                        lines = strtoull(optarg, &end, 10);
                        if (errno || *end || lines < 1 || lines > 100000)
                                return fail_usage("logs", "--lines=%s: a number of lines from 1 to 100000", optarg);
                        break;
                }
        if (optind + 1 != argc)
                return fail_usage("logs", "takes one sandbox id");
        status = ctl_manager_open(&m);
        if (status != EXIT_OK)
                return status;
        r = agentix_sandbox_logs(m, argv[optind], lines, &text, &e);
        agentix_manager_free(m);
        if (r < 0) {
                status = fail_agentix(&e, "cannot read the log of sandbox %s", argv[optind]);
                agentix_error_done(&e);
                return status;
        }
        fputs(text, stdout);
        return EXIT_OK;
}

/* ---- pools ------------------------------------------------------------------------------- */

static void pools_help(void) {
        printf("Usage: agentixctl pools [OPTIONS]\n"
               "\n"
               "List agentd's warm pools (pools.d/NAME.pool): how many sandboxes each keeps ready\n"
               "for the creates that match it.\n"
               "\n"
               "  -h --help               Show this help\n"
               "     --json               One JSON object per pool, per line\n"
               "  -q --quiet              Only the names\n"
               "\n"
               "See agentixctl(1) and agentd.conf(5).\n");
}

int verb_pools(int argc, char *argv[]) {
        static const struct option options[] = { COMMON_LONG_OPTIONS, {} };
        agentix_pool_info *l = NULL;
        agentix_error e = AGENTIX_ERROR_NULL;
        agentix_manager *m = NULL;
        size_t n = 0;
        int c, r, status;

        while ((c = getopt_long(argc, argv, "+:" COMMON_OPTIONS, options, NULL)) >= 0)
                switch (c) {
                        COMMON_OPTION_CASES("pools", pools_help, argv);
                }
        if (optind < argc)
                return fail_usage("pools", "unexpected argument '%s'", argv[optind]);
        status = ctl_manager_open(&m);
        if (status != EXIT_OK)
                return status;
        r = agentix_pool_list(m, &l, &n, &e);
        agentix_manager_free(m);
        if (r < 0) {
                status = fail_agentix(&e, "cannot list the pools");
                agentix_error_done(&e);
                return status;
        }
        if (!arg_json && !arg_quiet)
                printf("%-24s %6s %6s  %s\n", "POOL", "READY", "SIZE", "PROBLEM");
        for (size_t i = 0; i < n; i++) {
                if (arg_json)
                        (void) print_json(json_pack("{s:s, s:I, s:I, s:s?}", "name", l[i].name, "ready",
                                                    (json_int_t) l[i].ready, "size", (json_int_t) l[i].size, "error",
                                                    l[i].error));
                else if (arg_quiet)
                        puts(l[i].name);
                else
                        printf("%-24s %6u %6u  %s\n", l[i].name, l[i].ready, l[i].size, l[i].error ?: "-");
        }
        agentix_pool_list_free(l, n);
        return EXIT_OK;
}

/* ---- delete ------------------------------------------------------------------------------ */

static void delete_help(void) {
        printf("Usage: agentixctl delete [OPTIONS] ID...\n"
               "\n"
               "Delete sandboxes: their containers are removed with their volumes. Returns once\n"
               "they are gone.\n"
               "\n"
               "  -h --help               Show this help\n"
               "     --json               Accepted for symmetry\n"
               "  -q --quiet              Accepted for symmetry\n"
               "\n"
               "See agentixctl(1).\n");
}

int verb_delete(int argc, char *argv[]) {
        static const struct option options[] = { COMMON_LONG_OPTIONS, {} };
        agentix_manager *m = NULL;
        int c, status, worst = EXIT_OK;

        while ((c = getopt_long(argc, argv, "+:" COMMON_OPTIONS, options, NULL)) >= 0)
                switch (c) {
                        COMMON_OPTION_CASES("delete", delete_help, argv);
                }
        if (optind >= argc)
                return fail_usage("delete", "takes one or more sandbox ids");
        status = ctl_manager_open(&m);
        if (status != EXIT_OK)
                return status;
        for (int i = optind; i < argc; i++) {
                status = delete_sandbox(m, argv[i]);
                if (worst == EXIT_OK)
                        worst = status;
        }
        agentix_manager_free(m);
        return worst;
}

/* ---- run --------------------------------------------------------------------------------- */

static void run_help(void) {
        printf("Usage: agentixctl run [OPTIONS] [--] CMD [ARG...]\n"
               "\n"
               "Create a sandbox, run CMD in it as 'agentixctl exec' does, and delete the sandbox,\n"
               "whatever happens: when CMD fails, on Ctrl-C, and even when agentixctl is killed\n"
               "(agentd deletes a sandbox bound to its caller when the caller leaves the bus).\n"
               "Exits with CMD's exit status.\n"
               "\n"
               "  -h --help               Show this help\n"
               CREATE_OPTIONS_HELP
               "  -i --interactive        Forward our stdin to the command\n"
               "  -t --tty                Run the command on a terminal (PTY) in the sandbox\n"
               "     --json               Print the command's result as exec --json does\n"
               "  -q --quiet              No notes on stderr\n"
               "\n"
               "See agentixctl(1).\n");
}

int verb_run(int argc, char *argv[]) {
        static const struct option options[] = {
                COMMON_LONG_OPTIONS, CREATE_LONG_OPTIONS,
                { "interactive", no_argument, NULL, 'i' },
                { "tty", no_argument, NULL, 't' },
                {}
        };
        _cleanup_(create_args_done) CreateArgs a = {};
        _cleanup_free_ char *id = NULL;
        _cleanup_free_ char **exec_argv = NULL;
        agentix_manager *m = NULL;
        bool interactive = false, tty = false;
        int c, k, n = 0, status, del;

        while ((c = getopt_long(argc, argv, "+:" COMMON_OPTIONS "e:it", options, NULL)) >= 0) {
                switch (c) {
                        COMMON_OPTION_CASES("run", run_help, argv);
                case 'i':
                        interactive = true;
                        break;
                case 't':
                        tty = true;
                        break;
                default:
                        k = create_option("run", c, &a);
                        if (k < 0)
                                return -k;
                }
        }
        if (optind >= argc)
                return fail_usage("run", "no command given");
        status = check_create_args("run", &a);
        if (status != EXIT_OK)
                return status;

        status = ctl_manager_open(&m);
        if (status != EXIT_OK)
                return status;
        /* Bound to this bus connection: if we die, agentd deletes the sandbox. */
        a.config.bind_to_caller = true;
        status = create_sandbox(m, &a.config, &id);
        if (status != EXIT_OK) {
                agentix_manager_free(m);
                return status;
        }
        if (!arg_quiet && !arg_json)
                fprintf(stderr, "agentixctl: sandbox %s\n", id);

        exec_argv = calloc(argc - optind + 6, sizeof(char *));
        if (!exec_argv) {
                (void) delete_sandbox(m, id);
                agentix_manager_free(m);
                return fail(EXIT_SOFTWARE, "out of memory");
        }
        exec_argv[n++] = (char *) "exec";
        if (interactive)
                exec_argv[n++] = (char *) "-i";
        if (tty)
                exec_argv[n++] = (char *) "-t";
        exec_argv[n++] = (char *) "--";
        for (int i = optind; i < argc; i++)
                exec_argv[n++] = argv[i];
        arg_sandbox = id;
        arg_url = NULL;
        optind = 0;
        status = verb_exec(n, exec_argv);

        del = delete_sandbox(m, id);
        agentix_manager_free(m);
        return status != EXIT_OK ? status : del;
}

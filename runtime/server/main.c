/* SPDX-License-Identifier: MIT */
#include <arpa/inet.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>

#include "checkpoint-hold.h"
#include "conformance.h"
#include "environment-file.h"
#include "eio-server.h"
#include "frame.h"
#include "e2b-code-interpreter.h"
#include "e2b-envd-entry.h"
#include "e2b-envd-files.h"
#include "e2b-envd-filesystem.h"
#include "e2b-envd-process.h"
#include "http-proxy.h"
#include "http-server.h"
#include "log.h"
#include "pids-limit.h"
#include "process-tree.h"
#include "rpc.h"
#include "sio-server.h"
#include "tls-install.h"
#include "tls.h"
#include "worker-link.h"

#define MIB (1024u * 1024u)
/* What agentixctl build writes into a bundle. */
#define ENVIRONMENT_FILE_DEFAULT "/nix/runtime/etc/environment"

typedef struct Options {
        const char *hosts[4];
        size_t n_hosts;
        const char *port;
        const char *module_dir;
        const char *seccomp_profile;
        bool no_seccomp;
        bool conformance;
        size_t max_message;
        size_t max_payload; /* 0: derived */
        unsigned ping_interval_ms;
        unsigned ping_timeout_ms;
        unsigned connect_timeout_ms;
        unsigned max_calls;
        unsigned max_connections;
        unsigned max_results;
        unsigned orphan_timeout_s;
        unsigned max_processes; /* 0: no bound of our own */
        const char *environment_file; /* NULL: the bundle's, if there is one; "": none */
        bool insecure_no_token;
        const char *tls_cert, *tls_key;
        bool checkpoint; /* $AGENTIX_CHECKPOINT=1: close connections by reset */
} Options;

typedef struct Server {
        sd_event *event;
        Options *opts;
        HttpServer *http;
        Proxy *proxy;            /* /proxy/PORT/ */
        EioServer *eio;          /* /socket.io/ */
        EioServer *eio_echo;     /* /engine.io/ (conformance) */
        SioServer *sio;
        Rpc *rpc;
        CodeInterpreterApi *code_api; /* /execute, /contexts: E2B's code interpreter */
        EnvdFilesystemApi *envd_fs;   /* /filesystem.Filesystem/…: E2B's envd */
        EnvdProcessApi *envd_process; /* /process.Process/…: E2B's envd */
        WorkerLink *worker;
        PidsLimit *pids_limit;
        TlsInstall *tls_install;
        CheckpointHold *hold;    /* POST /runtime/hold */
        sd_event_source *shutdown_timer;
        uint64_t shutdown_deadline;
        bool shutting_down;
} Server;

static const char *current_token(void *userdata) {
        Server *srv = userdata;

        return srv->rpc ? rpc_token(srv->rpc) : NULL;
}

static void help(void) {
        printf("Usage: agentix-server [OPTIONS]\n"
               "\n"
               "Serve remote calls inside a sandbox over Socket.IO (namespace /rpc).\n"
               "\n"
               "  -h --help                   Show this help\n"
               "     --version                Show the version\n"
               "     --host=HOST              Address to listen on; repeatable ($AGENTIX_BIND_HOST,\n"
               "                              default 0.0.0.0 with $AGENTIX_TOKEN, else 127.0.0.1;\n"
               "                              127.0.0.1 and ::1 with --conformance)\n"
               "     --port=PORT              Port to listen on ($AGENTIX_BIND_PORT, default 8000;\n"
               "                              3000 with --conformance)\n"
               "     --module-dir=DIR         Directory of C modules ($AGENTIX_MODULE_DIR, default\n"
               "                              %s)\n"
               "     --seccomp-profile=FILE   Worker seccomp profile in Docker's JSON format\n"
               "                              (default: the built-in profile)\n"
               "     --no-seccomp             Run the worker without a seccomp filter (debugging)\n"
               "     --max-message=BYTES      Largest message accepted (default 268435456)\n"
               "     --max-calls=N            Calls running at once (default 1024)\n"
               "     --max-connections=N      Client connections at once (default 1024)\n"
               "     --max-results=N          Unacknowledged results kept for resume (default 4096)\n"
               "     --ping-interval=MS       Engine.IO ping interval (default 25000)\n"
               "     --ping-timeout=MS        Engine.IO ping timeout (default 60000)\n"
               "     --max-payload=BYTES      Engine.IO maxPayload (default: --max-message)\n"
               "     --connect-timeout=MS     Time a client has to join a namespace (default 45000)\n"
               "     --orphan-timeout=SEC     Cancel a running call no client has resumed for this\n"
               "                              long after its connection dropped (default 300;\n"
               "                              0: never)\n"
               "     --max-processes=N        Bound the worker and every process it starts to N,\n"
               "                              with a pids cgroup of their own (default: none; in\n"
               "                              a container its pids limit protects the host)\n"
               "     --environment-file=FILE  NAME=VALUE lines (${NAME} expands) to set before\n"
               "                              anything runs (default %s\n"
               "                              when it exists; empty: none)\n"
               "     --tls-cert=FILE          Serve HTTPS and WSS with this certificate (PEM, then\n"
               "                              any intermediates)\n"
               "     --tls-key=FILE           ... and its private key (PEM, unencrypted)\n"
               "     --insecure-no-token      Listen on addresses other than loopback without\n"
               "                              $AGENTIX_TOKEN: anyone who reaches the port runs\n"
               "                              commands (without it, no token means 127.0.0.1 only)\n"
               "     --conformance            Act as the Engine.IO/Socket.IO reference test server\n"
               "\n"
               "Environment: AGENTIX_TOKEN (clients must present it in the /rpc CONNECT auth as\n"
               "{\"token\": …}), AGENTIX_BIND_HOST, AGENTIX_BIND_PORT, AGENTIX_MODULE_DIR,\n"
               "AGENTIX_LOG_LEVEL (debug, info, notice, warning, err), AGENTIX_DEFAULT_USER (the\n"
               "account E2B requests that name none run as), AGENTIX_TLS=1 (serve nothing but\n"
               "/health until agentd hands over a TLS certificate, then TLS only),\n"
               "AGENTIX_CHECKPOINT=1 (the sandbox may be checkpointed: end connections with a\n"
               "reset, never a FIN, and listen without SO_REUSEADDR).\n"
               "\n"
               "With AGENTIX_CHECKPOINT=1, POST /runtime/hold (with the token) stops accepting\n"
               "and resets every other connection, so that gVisor can checkpoint the sandbox;\n"
               "SIGUSR2 (or 120 s without one) makes the server listen again.\n"
               "\n"
               "See agentix-server(8).\n",
               AGENTIX_MODULE_DIR_DEFAULT, ENVIRONMENT_FILE_DEFAULT);
}

static int parse_byte_count(const char *s, size_t min, size_t *ret) {
        unsigned long long v;
        char *end;

        errno = 0;
        v = strtoull(s, &end, 10);
        if (errno != 0 || end == s || *end != 0 || v < min || v > SIZE_MAX / 2)
                return -EINVAL;
        *ret = (size_t) v;
        return 0;
}

static int parse_uint(const char *s, unsigned min, unsigned *ret) {
        size_t v;

        if (parse_byte_count(s, min, &v) < 0 || v > UINT_MAX)
                return -EINVAL;
        *ret = (unsigned) v;
        return 0;
}

enum {
        ARG_VERSION = 0x100,
        ARG_HOST,
        ARG_PORT,
        ARG_MODULE_DIR,
        ARG_SECCOMP_PROFILE,
        ARG_NO_SECCOMP,
        ARG_MAX_MESSAGE,
        ARG_MAX_CALLS,
        ARG_MAX_CONNECTIONS,
        ARG_MAX_RESULTS,
        ARG_PING_INTERVAL,
        ARG_PING_TIMEOUT,
        ARG_MAX_PAYLOAD,
        ARG_CONNECT_TIMEOUT,
        ARG_CONFORMANCE,
        ARG_ORPHAN_TIMEOUT,
        ARG_MAX_PROCESSES,
        ARG_ENVIRONMENT_FILE,
        ARG_INSECURE_NO_TOKEN,
        ARG_TLS_CERT,
        ARG_TLS_KEY,
};

static int parse_argv(int argc, char *argv[], Options *o) {
        static const struct option options[] = {
                { "help", no_argument, NULL, 'h' },
                { "version", no_argument, NULL, ARG_VERSION },
                { "host", required_argument, NULL, ARG_HOST },
                { "port", required_argument, NULL, ARG_PORT },
                { "module-dir", required_argument, NULL, ARG_MODULE_DIR },
                { "seccomp-profile", required_argument, NULL, ARG_SECCOMP_PROFILE },
                { "no-seccomp", no_argument, NULL, ARG_NO_SECCOMP },
                { "max-message", required_argument, NULL, ARG_MAX_MESSAGE },
                { "max-calls", required_argument, NULL, ARG_MAX_CALLS },
                { "max-connections", required_argument, NULL, ARG_MAX_CONNECTIONS },
                { "max-results", required_argument, NULL, ARG_MAX_RESULTS },
                { "ping-interval", required_argument, NULL, ARG_PING_INTERVAL },
                { "ping-timeout", required_argument, NULL, ARG_PING_TIMEOUT },
                { "max-payload", required_argument, NULL, ARG_MAX_PAYLOAD },
                { "connect-timeout", required_argument, NULL, ARG_CONNECT_TIMEOUT },
                { "conformance", no_argument, NULL, ARG_CONFORMANCE },
                { "orphan-timeout", required_argument, NULL, ARG_ORPHAN_TIMEOUT },
                { "max-processes", required_argument, NULL, ARG_MAX_PROCESSES },
                { "environment-file", required_argument, NULL, ARG_ENVIRONMENT_FILE },
                { "insecure-no-token", no_argument, NULL, ARG_INSECURE_NO_TOKEN },
                { "tls-cert", required_argument, NULL, ARG_TLS_CERT },
                { "tls-key", required_argument, NULL, ARG_TLS_KEY },
                {}
        };
        bool port_set = false, ping_set = false, timeout_set = false, payload_set = false, connect_set = false;
        int c;

        while ((c = getopt_long(argc, argv, "h", options, NULL)) >= 0) {
                switch (c) {
                case 'h':
                        help();
                        return 0;
                case ARG_VERSION:
                        printf("agentix-server %s\n", AGENTIX_VERSION);
                        return 0;
                case ARG_HOST:
                        if (o->n_hosts >= ELEMENTSOF(o->hosts))
                                return log_error_errno(E2BIG, "At most %zu --host options.", ELEMENTSOF(o->hosts));
                        o->hosts[o->n_hosts++] = optarg;
                        break;
                case ARG_PORT:
                        o->port = optarg;
                        port_set = true;
                        break;
                case ARG_MODULE_DIR:
                        o->module_dir = optarg;
                        break;
                case ARG_SECCOMP_PROFILE:
                        o->seccomp_profile = optarg;
                        break;
                case ARG_NO_SECCOMP:
                        o->no_seccomp = true;
                        break;
                case ARG_MAX_MESSAGE:
                        if (parse_byte_count(optarg, 1024, &o->max_message) < 0 || o->max_message > 2048u * MIB)
                                return log_error_errno(EINVAL, "--max-message must be between 1024 and 2147483648: %s", optarg);
                        break;
                case ARG_MAX_CALLS:
                        if (parse_uint(optarg, 1, &o->max_calls) < 0)
                                return log_error_errno(EINVAL, "Invalid --max-calls: %s", optarg);
                        break;
                case ARG_MAX_CONNECTIONS:
                        if (parse_uint(optarg, 1, &o->max_connections) < 0 || o->max_connections > 65536)
                                return log_error_errno(EINVAL, "Invalid --max-connections: %s", optarg);
                        break;
                case ARG_MAX_RESULTS:
                        if (parse_uint(optarg, 0, &o->max_results) < 0)
                                return log_error_errno(EINVAL, "Invalid --max-results: %s", optarg);
                        break;
                case ARG_PING_INTERVAL:
                        if (parse_uint(optarg, 10, &o->ping_interval_ms) < 0)
                                return log_error_errno(EINVAL, "Invalid --ping-interval: %s", optarg);
                        ping_set = true;
                        break;
                case ARG_PING_TIMEOUT:
                        if (parse_uint(optarg, 10, &o->ping_timeout_ms) < 0)
                                return log_error_errno(EINVAL, "Invalid --ping-timeout: %s", optarg);
                        timeout_set = true;
                        break;
                case ARG_MAX_PAYLOAD:
                        if (parse_byte_count(optarg, 16, &o->max_payload) < 0)
                                return log_error_errno(EINVAL, "Invalid --max-payload: %s", optarg);
                        payload_set = true;
                        break;
                case ARG_CONNECT_TIMEOUT:
                        if (parse_uint(optarg, 10, &o->connect_timeout_ms) < 0)
                                return log_error_errno(EINVAL, "Invalid --connect-timeout: %s", optarg);
                        connect_set = true;
                        break;
                case ARG_CONFORMANCE:
                        o->conformance = true;
                        break;
                case ARG_ORPHAN_TIMEOUT:
                        if (parse_uint(optarg, 0, &o->orphan_timeout_s) < 0)
                                return log_error_errno(EINVAL, "Invalid --orphan-timeout: %s", optarg);
                        break;
                case ARG_MAX_PROCESSES:
                        /* The worker's own threads count too: leave it room to start. */
                        if (parse_uint(optarg, 8, &o->max_processes) < 0)
                                return log_error_errno(EINVAL, "Invalid --max-processes (8 or more): %s", optarg);
                        break;
                case ARG_ENVIRONMENT_FILE:
                        o->environment_file = optarg;
                        break;
                case ARG_INSECURE_NO_TOKEN:
                        o->insecure_no_token = true;
                        break;
                case ARG_TLS_CERT:
                        o->tls_cert = optarg;
                        break;
                case ARG_TLS_KEY:
                        o->tls_key = optarg;
                        break;
                case '?':
                        return -EINVAL;
                default:
                        return log_error_errno(EINVAL, "Unhandled option");
                }
        }
        if (optind < argc)
                return log_error_errno(EINVAL, "Unexpected argument: %s (see --help)", argv[optind]);
        if (!o->tls_cert != !o->tls_key)
                return log_error_errno(EINVAL, "--tls-cert and --tls-key go together.");

        if (o->conformance) {
                /* The reference test suites expect these settings. */
                if (!port_set)
                        o->port = "3000";
                if (!ping_set)
                        o->ping_interval_ms = 300;
                if (!timeout_set)
                        o->ping_timeout_ms = 200;
                if (!payload_set)
                        o->max_payload = 1000000;
                if (!connect_set)
                        o->connect_timeout_ms = 1000;
                if (o->n_hosts == 0) {
                        o->hosts[o->n_hosts++] = "127.0.0.1";
                        o->hosts[o->n_hosts++] = "::1";
                }
        }
        return 1;
}

static void options_from_env(Options *o) {
        const char *e;

        e = getenv("AGENTIX_BIND_HOST");
        if (!strempty(e))
                o->hosts[o->n_hosts++] = e;
        e = getenv("AGENTIX_BIND_PORT");
        if (!strempty(e))
                o->port = e;
        e = getenv("AGENTIX_MODULE_DIR");
        if (!strempty(e))
                o->module_dir = e;
        /* agentd's to set, for a sandbox it may checkpoint; none of the commands' business. */
        o->checkpoint = streq_ptr(getenv("AGENTIX_CHECKPOINT"), "1");
        (void) unsetenv("AGENTIX_CHECKPOINT");
}

/* The token, taken out of the environment at start (take_token()). */
static char *server_token = NULL;
/* $AGENTIX_CLAIMABLE=1: agentd made this runtime for a pool; runtime::claim may change its
 * token once (rpc-claim.h). Taken out of the environment too. */
static bool server_claimable = false;
/* $AGENTIX_TLS=1: agentd hands over a TLS certificate; nothing but /health until then. */
static bool server_awaits_tls = false;

/* Keep the token from what the server runs: out of the environment the worker and its commands
 * inherit, and, with the server not dumpable, /proc/<its pid>/environ and mem belong to root,
 * so that commands of the same (non-root) user cannot read it there either. */
static int take_token(void) {
        const char *t = getenv("AGENTIX_TOKEN");

        if (t && !(server_token = strdup(t)))
                return log_error_errno(ENOMEM, "Out of memory");
        if (t) {
                /* Overwrite it where the kernel shows the initial environment, then drop it. */
                memset((char *) t, 'x', strlen(t));
                (void) unsetenv("AGENTIX_TOKEN");
        }
        server_claimable = getenv("AGENTIX_CLAIMABLE") && streq(getenv("AGENTIX_CLAIMABLE"), "1");
        (void) unsetenv("AGENTIX_CLAIMABLE");
        server_awaits_tls = getenv("AGENTIX_TLS") && streq(getenv("AGENTIX_TLS"), "1");
        (void) unsetenv("AGENTIX_TLS");
        /* An E2B template's DefaultUser= (agentd sets it): the account envd requests that name
         * none are for. agentd's to set like the two above, and no business of the commands. */
        if (envd_set_default_user(getenv("AGENTIX_DEFAULT_USER")) < 0)
                log_warning("Ignoring $AGENTIX_DEFAULT_USER: longer than an account name can be");
        (void) unsetenv("AGENTIX_DEFAULT_USER");
        if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
                return log_error_errno(errno, "Failed to make the server non-dumpable: %m");
        return 0;
}

static bool host_is_loopback(const char *host) {
        struct in6_addr a6;
        struct in_addr a4;

        if (streq(host, "localhost"))
                return true;
        if (inet_pton(AF_INET, host, &a4) == 1)
                return (ntohl(a4.s_addr) >> 24) == 127;
        return inet_pton(AF_INET6, host, &a6) == 1 && IN6_IS_ADDR_LOOPBACK(&a6);
}

/* Anyone who reaches the port of a server without a token runs commands as the server's user:
 * without one, listen on loopback only, unless told in so many words. */
static int choose_hosts(Options *o) {
        bool token = !strempty(getenv("AGENTIX_TOKEN"));

        if (o->conformance)
                return 0; /* loopback already, and it runs nothing */
        if (o->n_hosts == 0 && !token && !o->insecure_no_token) {
                o->hosts[o->n_hosts++] = "127.0.0.1";
                log_notice("No $AGENTIX_TOKEN: listening on 127.0.0.1 only, where anyone on this machine may "
                           "connect; set AGENTIX_TOKEN to listen on other addresses.");
                return 0;
        }
        if (o->n_hosts == 0)
                o->hosts[o->n_hosts++] = "0.0.0.0";
        if (token)
                return 0;
        if (o->insecure_no_token) {
                log_warning("Listening without $AGENTIX_TOKEN (--insecure-no-token): anyone who reaches the "
                            "port runs commands.");
                return 0;
        }
        for (size_t i = 0; i < o->n_hosts; i++)
                if (!host_is_loopback(o->hosts[i]))
                        return log_error_errno(EPERM,
                                               "Refusing to listen on %s without $AGENTIX_TOKEN: anyone who reaches "
                                               "it could run commands. Set AGENTIX_TOKEN, or pass --insecure-no-token.",
                                               o->hosts[i]);
        log_notice("No $AGENTIX_TOKEN: anyone who can reach the loopback address may connect.");
        return 0;
}

static int on_worker_spawn(pid_t pid, void *userdata) {
        int r = pids_limit_add(userdata, pid);
        if (r < 0)
                return log_error_errno(r, "Failed to move the worker into its pids cgroup: %m");
        return 0;
}

/* ---- shutdown ----------------------------------------------------------------------------- */

static int on_shutdown_tick(sd_event_source *s, uint64_t usec, void *userdata) {
        Server *srv = userdata;
        uint64_t now = usec;
        bool idle = (!srv->eio || eio_server_n_sessions(srv->eio) == 0) &&
                    (!srv->worker || !worker_link_running(srv->worker));

        if (idle || now >= srv->shutdown_deadline)
                return sd_event_exit(srv->event, 0);
        (void) sd_event_source_set_time(s, now + 20 * 1000);
        (void) sd_event_source_set_enabled(s, SD_EVENT_ONESHOT);
        return 0;
}

static int on_signal(sd_event_source *s, const struct signalfd_siginfo *si, void *userdata) {
        Server *srv = userdata;
        uint64_t now;

        if (srv->shutting_down) {
                log_notice("Second signal, exiting now.");
                return sd_event_exit(srv->event, 0);
        }
        srv->shutting_down = true;
        log_info("Received %s, shutting down.", strsignal((int) si->ssi_signo));

        http_server_shutdown(srv->http);
        /* In-flight calls end with Cancelled; sessions flush what is queued, then close. */
        if (srv->rpc)
                rpc_stop(srv->rpc, "the runtime server is shutting down");
        if (srv->eio)
                eio_server_close_all(srv->eio, "server shutdown");
        if (srv->eio_echo)
                eio_server_close_all(srv->eio_echo, "server shutdown");
        if (srv->worker)
                worker_link_stop(srv->worker, 2 * 1000 * 1000);

        (void) sd_event_now(srv->event, CLOCK_MONOTONIC, &now);
        srv->shutdown_deadline = now + 3 * 1000 * 1000;
        return sd_event_add_time(srv->event, &srv->shutdown_timer, CLOCK_MONOTONIC, now + 10 * 1000, 1, on_shutdown_tick, srv);
}

/* Reap every exited child: the worker, and (when we are a container's PID 1) the orphans that
 * commands leave behind, which would otherwise pile up as zombies. */
static int on_sigchld(sd_event_source *s, const struct signalfd_siginfo *si, void *userdata) {
        Server *srv = userdata;

        for (;;) {
                int status;
                pid_t pid = waitpid(-1, &status, WNOHANG);
                if (pid <= 0)
                        break;
                if (!worker_link_child_exited(srv->worker, pid, status))
                        log_debug("Reaped process %d.", (int) pid);
        }
        return 0;
}

/* ---- setup -------------------------------------------------------------------------------- */

/* The worker program: $AGENTIX_WORKER, else agentix-worker next to our own executable (the
 * build tree, a bundle's bin directory), else the installed one in libexecdir. */
static int find_worker(char *buf, size_t size) {
        int r = companion_program("agentix-worker", "AGENTIX_WORKER", buf, size);

        if (r == -EACCES)
                return log_error_errno(EACCES, "$AGENTIX_WORKER=%s is not executable: %m", getenv("AGENTIX_WORKER"));
        if (r < 0)
                return log_error_errno(ENOENT, "Cannot find agentix-worker next to agentix-server or in %s; "
                                       "set $AGENTIX_WORKER.", AGENTIX_LIBEXECDIR);
        return 0;
}

static int setup(Server *srv, Options *o) {
        static char exe[PATH_MAX];
        static char module_arg[PATH_MAX + 32], seccomp_arg[PATH_MAX + 32], calls_arg[64];
        static char *worker_args[8];
        size_t n_args = 0;
        int r;

        size_t max_payload = o->max_payload ?: o->max_message;
        EioConfig eio_config = {
                .path = "/socket.io/",
                .ping_interval_ms = o->ping_interval_ms,
                .ping_timeout_ms = o->ping_timeout_ms,
                .upgrade_timeout_ms = 10000,
                .max_payload = max_payload,
                .max_message = o->max_message,
                /* Room for a full-size message plus what else is queued, then the client is stuck. */
                .max_backlog = 2 * o->max_message + 64 * MIB,
                /* Stream output is credited to the worker when the client's queue is this low
                 * (rpc.c): the rest of the window is then still queued, so the client never
                 * runs dry while the credit makes its way to the function. */
                .drain_low_water = FRAME_OUT_CREDIT_MIN,
                .max_sessions = o->max_connections,
        };
        HttpServerConfig http_config = {
                .max_connections = o->max_connections,
                .close_by_reset = o->checkpoint,
        };
        SioConfig sio_config = { .connect_timeout_ms = o->connect_timeout_ms };

        r = http_server_new(srv->event, &http_config, &srv->http);
        if (r < 0)
                return r;
        r = sio_server_new(srv->event, &sio_config, &srv->sio);
        if (r < 0)
                return r;
        r = eio_server_new(srv->event, &eio_config, &sio_eio_callbacks, srv->sio, &srv->eio);
        if (r < 0)
                return r;
        r = http_server_add_eio(srv->http, srv->eio, &eio_http_ops);
        if (r < 0)
                return r;

        if (o->conformance) {
                eio_config.path = "/engine.io/";
                r = eio_server_new(srv->event, &eio_config, &conformance_echo_callbacks, NULL, &srv->eio_echo);
                if (r < 0)
                        return r;
                r = http_server_add_eio(srv->http, srv->eio_echo, &eio_http_ops);
                if (r < 0)
                        return r;
                r = conformance_add_namespaces(srv->sio, srv->event);
                if (r < 0)
                        return r;
        } else {
                static const SioNamespace main_ns = { .name = "/" };
                RpcConfig rpc_config = {
                        .token = server_token,
                        .claimable = server_claimable,
                        .max_message = o->max_message,
                        .max_calls = o->max_calls,
                        .max_results = o->max_results,
                        .max_result_bytes = 1024u * MIB,
                        .max_orphan_bytes = 64u * MIB,
                        .forget_window = 16384,
                        .orphan_timeout_usec = (uint64_t) o->orphan_timeout_s * 1000 * 1000,
                };
                WorkerLinkConfig worker_config = {
                        .max_frame = o->max_message + 64 * 1024,
                };

                if (o->max_processes > 0) {
                        r = pids_limit_new(o->max_processes, &srv->pids_limit);
                        if (r < 0)
                                return r;
                        worker_config.on_spawn = on_worker_spawn;
                        worker_config.on_spawn_userdata = srv->pids_limit;
                        log_info("Worker and its processes bounded to %u (%s).", o->max_processes,
                                 pids_limit_path(srv->pids_limit));
                }

                r = find_worker(exe, sizeof(exe));
                if (r < 0)
                        return r;
                worker_config.executable = exe;
                if (o->module_dir) {
                        snprintf(module_arg, sizeof(module_arg), "--module-dir=%s", o->module_dir);
                        worker_args[n_args++] = module_arg;
                }
                if (o->seccomp_profile) {
                        snprintf(seccomp_arg, sizeof(seccomp_arg), "--seccomp-profile=%s", o->seccomp_profile);
                        worker_args[n_args++] = seccomp_arg;
                }
                if (o->no_seccomp)
                        worker_args[n_args++] = (char *) "--no-seccomp";
                snprintf(calls_arg, sizeof(calls_arg), "--max-calls=%u", o->max_calls);
                worker_args[n_args++] = calls_arg;
                worker_args[n_args] = NULL;
                worker_config.extra_args = worker_args;

                r = rpc_new(srv->event, &rpc_config, &srv->rpc);
                if (r < 0)
                        return r;
                r = worker_link_new(srv->event, &worker_config, &rpc_worker_callbacks, srv->rpc, &srv->worker);
                if (r < 0)
                        return r;
                rpc_set_worker(srv->rpc, srv->worker);
                r = code_interpreter_api_new(srv->rpc, srv->http, &srv->code_api);
                if (r < 0)
                        return r;
                r = envd_filesystem_api_new(srv->rpc, srv->http, &srv->envd_fs);
                if (r < 0)
                        return r;
                r = envd_files_api_new(srv->rpc, srv->http);
                if (r < 0)
                        return r;
                r = envd_process_api_new(srv->rpc, srv->event, srv->http, &srv->envd_process);
                if (r < 0)
                        return r;
                r = sio_server_add_namespace(srv->sio, rpc_namespace(srv->rpc));
                if (r < 0)
                        return r;
                /* Plain clients connect to "/" by default; let them in (same token), it has no events. */
                r = sio_server_add_namespace(srv->sio, &main_ns);
                if (r < 0)
                        return r;
                /* The worker (and the modules it loads) is started by the first connection or
                 * call: an idle sandbox costs a few MiB less. A pool member starts it now: its
                 * claim is waited for. */
                if (server_claimable) {
                        r = worker_link_start(srv->worker);
                        if (r < 0)
                                return r;
                }
        }

        r = proxy_new(srv->event, current_token, srv, &srv->proxy);
        if (r < 0)
                return r;
        http_server_set_takeover(srv->http, &(HttpTakeover) PROXY_TAKEOVER(srv->proxy));
        if (o->checkpoint) {
                r = proxy_set_close_by_reset(srv->proxy);
                if (r < 0)
                        return r;
        }
        /* Only where agentd may checkpoint: elsewhere the listener keeps SO_REUSEADDR, and a port
         * shut down for a hold could be taken by another account meanwhile. */
        if (srv->rpc && o->checkpoint) {
                r = checkpoint_hold_new(srv->event, srv->http, srv->proxy, srv->rpc, &srv->hold);
                if (r < 0)
                        return r;
        }

        if (o->tls_cert) {
                _cleanup_(SSL_CTX_freep) SSL_CTX *ctx = NULL;
                _cleanup_free_ char *error = NULL;

                r = tls_server_context_from_files(o->tls_cert, o->tls_key, &ctx, &error);
                if (r < 0)
                        return log_error_errno(r, "Cannot serve TLS with --tls-cert=%s --tls-key=%s: %s", o->tls_cert,
                                               o->tls_key, error ?: "out of memory");
                r = http_server_set_tls(srv->http, ctx);
                if (r < 0)
                        return r;
        }
        if (!o->conformance && (server_awaits_tls || server_token)) {
                /* agentd may hand over a certificate (again, after its CA changed) any time. */
                r = tls_install_new(srv->http, current_token, srv, server_awaits_tls && !o->tls_cert, &srv->tls_install);
                if (r < 0)
                        return r;
        }

        for (size_t i = 0; i < o->n_hosts; i++) {
                r = http_server_listen(srv->http, o->hosts[i], o->port);
                if (r < 0) {
                        /* Without IPv6 on the machine, ::1 fails; one working address is enough. */
                        if (o->conformance && i > 0)
                                continue;
                        return r;
                }
        }
        log_info("agentix-server %s listening on port %u%s%s%s.", AGENTIX_VERSION, http_server_port(srv->http),
                 http_server_is_tls(srv->http) ? " (TLS)"
                 : server_awaits_tls           ? " (waiting for its TLS certificate)"
                                               : "",
                 o->conformance ? " (conformance mode)" : "", o->checkpoint ? " (checkpointable)" : "");
        return 0;
}

/* What commands left running in the background (orphans come to us as subreaper, so they are
 * all our descendants) ends with the server. */
static void end_descendants(void) {
        int n = process_tree_kill(getpid(), 0, 16);

        if (n > 0)
                log_info("Ended %d process%s left running by commands.", n, n == 1 ? "" : "es");
        for (int i = 0; i < 200; i++) {
                pid_t p = waitpid(-1, NULL, WNOHANG);
                if (p < 0)
                        break; /* ECHILD: all reaped */
                if (p == 0)
                        usleep(5 * 1000);
        }
}

static void server_done(Server *srv) {
        /* lws first: closing its connections calls back into the Engine.IO layer. */
        srv->http = http_server_free(srv->http);
        srv->code_api = code_interpreter_api_free(srv->code_api);
        srv->envd_fs = envd_filesystem_api_free(srv->envd_fs);
        srv->envd_process = envd_process_api_free(srv->envd_process);
        srv->proxy = proxy_free(srv->proxy);
        /* After the HTTP server, whose route calls it. */
        srv->hold = checkpoint_hold_free(srv->hold);
        srv->tls_install = tls_install_free(srv->tls_install);
        srv->eio = eio_server_free(srv->eio);
        srv->eio_echo = eio_server_free(srv->eio_echo);
        srv->worker = worker_link_free(srv->worker);
        end_descendants();
        srv->pids_limit = pids_limit_free(srv->pids_limit);
        srv->rpc = rpc_free(srv->rpc);
        srv->sio = sio_server_free(srv->sio);
        sd_event_source_disable_unref(srv->shutdown_timer);
        srv->event = sd_event_unref(srv->event);
}

int main(int argc, char *argv[]) {
        Options o = {
                .port = "8000",
                .max_message = 256u * MIB,
                .ping_interval_ms = 25000,
                .ping_timeout_ms = 60000,
                .connect_timeout_ms = 45000,
                .max_calls = 1024,
                .max_connections = 1024,
                .max_results = 4096,
                .orphan_timeout_s = 300,
        };
        Server srv = { .opts = &o };
        sigset_t mask;
        int r;

        log_parse_env();
        log_set_prefix("agentix-server");
        options_from_env(&o);
        r = parse_argv(argc, argv, &o);
        if (r <= 0)
                return r < 0 ? 2 : 0;

        r = choose_hosts(&o);
        if (r < 0)
                return 2;
        if (!o.conformance && take_token() < 0)
                return 1;

        /* Before the worker starts, so that it and everything it runs see the bundle's PATH. */
        if (!o.environment_file) {
                r = environment_file_apply(ENVIRONMENT_FILE_DEFAULT);
                if (r < 0 && r != -ENOENT)
                        return 1;
        } else if (!strempty(o.environment_file)) {
                r = environment_file_apply(o.environment_file);
                if (r == -ENOENT)
                        log_error_errno(r, "Cannot read --environment-file=%s: %m", o.environment_file);
                if (r < 0)
                        return 1;
        }

        /* sd-event wants these blocked so it can take them as signalfd/child events. */
        sigemptyset(&mask);
        sigaddset(&mask, SIGTERM);
        sigaddset(&mask, SIGINT);
        sigaddset(&mask, SIGCHLD);
        sigaddset(&mask, SIGUSR2); /* listen again after a hold (checkpoint-hold.h) */
        sigprocmask(SIG_BLOCK, &mask, NULL);
        signal(SIGPIPE, SIG_IGN);

        /* Orphans of the commands we run come to us (as they would to a container's PID 1), so
         * they are reaped here wherever we run. */
        (void) prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);

        r = sd_event_new(&srv.event);
        if (r < 0) {
                log_error_errno(r, "Failed to create the event loop: %m");
                return 1;
        }
        (void) sd_event_add_signal(srv.event, NULL, SIGTERM, on_signal, &srv);
        (void) sd_event_add_signal(srv.event, NULL, SIGINT, on_signal, &srv);
        (void) sd_event_add_signal(srv.event, NULL, SIGCHLD, on_sigchld, &srv);

        r = setup(&srv, &o);
        if (r < 0) {
                server_done(&srv);
                return 1;
        }

        /* Its exit code: 0, or 1 from a part that cannot go on (a hold that cannot listen again). */
        r = sd_event_loop(srv.event);
        if (r < 0)
                log_error_errno(r, "Event loop failed: %m");
        server_done(&srv);
        return r == 0 ? 0 : 1;
}

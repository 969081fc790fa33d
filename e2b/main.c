/* SPDX-License-Identifier: MIT */
/* agentix-e2b: E2B's API on your own machine. E2B's SDKs, pointed at it with E2B_API_URL and
 * E2B_SANDBOX_URL, create and drive agentd's sandboxes, each owned by the user its API key
 * names. */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <systemd/sd-daemon.h>

#include "api-keys.h"
#include "control-api.h"
#include "http-server.h"
#include "log.h"
#include "macro.h"
#include "sandbox-route.h"
#include "tls.h"
#include "user-bus.h"

#define E2B_KEYS_DEFAULT "/etc/agentix/e2b-keys"
#define E2B_LISTEN_DEFAULT "127.0.0.1:49982"
#define E2B_MAX_CONNECTIONS 4096
#define EXIT_NOT_PERMITTED 4    /* LSB's "user had insufficient privilege" */

static const char *arg_listen = NULL;
static const char *arg_keys = E2B_KEYS_DEFAULT;
static const char *arg_domain = NULL;
static const char *arg_tls_cert = NULL, *arg_tls_key = NULL;

static void help(void) {
        printf("Usage: agentix-e2b [OPTIONS]\n"
               "       agentix-e2b --make-key=USER\n"
               "\n"
               "Serve E2B's API (the control API and, routed by E2b-Sandbox-Id, every sandbox's\n"
               "envd and code interpreter) on agentd's sandboxes. Point E2B's SDK here with\n"
               "E2B_API_URL=http://ADDR:PORT E2B_SANDBOX_URL=http://ADDR:PORT E2B_API_KEY=KEY.\n"
               "\n"
               "  -h --help            Show this help\n"
               "     --version         Show the version\n"
               "     --listen=ADDR:PORT\n"
               "                       Listen there (default " E2B_LISTEN_DEFAULT
               ", or the sockets systemd\n"
               "                       passes)\n"
               "     --keys=FILE       API keys, lines of KEY USER (default " E2B_KEYS_DEFAULT ")\n"
               "     --domain=DOMAIN   Also route Host: PORT-ID.DOMAIN to port PORT of sandbox ID\n"
               "                       (what E2B_DOMAIN makes getHost() return)\n"
               "     --tls-cert=FILE   Serve HTTPS with this certificate (PEM; then E2B's SDK takes\n"
               "                       https:// URLs), so that it may listen beyond loopback\n"
               "     --tls-key=FILE    ... and its private key (PEM)\n"
               "     --make-key=USER   Print a new key line for USER (append it to the keys file)\n"
               "\n"
               "Environment: DBUS_SYSTEM_BUS_ADDRESS (the bus agentd is on), AGENTIX_LOG_LEVEL.\n"
               "\n"
               "See agentix-e2b(8).\n");
}

/* 1: run; 0: done (help, version, a key printed); <0: error. */
static int parse_argv(int argc, char *argv[]) {
        enum { ARG_VERSION = 0x100, ARG_LISTEN, ARG_KEYS, ARG_DOMAIN, ARG_MAKE_KEY, ARG_TLS_CERT, ARG_TLS_KEY };
        static const struct option options[] = {
                { "help", no_argument, NULL, 'h' },
                { "version", no_argument, NULL, ARG_VERSION },
                { "listen", required_argument, NULL, ARG_LISTEN },
                { "keys", required_argument, NULL, ARG_KEYS },
                { "domain", required_argument, NULL, ARG_DOMAIN },
                { "make-key", required_argument, NULL, ARG_MAKE_KEY },
                { "tls-cert", required_argument, NULL, ARG_TLS_CERT },
                { "tls-key", required_argument, NULL, ARG_TLS_KEY },
                {}
        };
        char key[45];
        int c, r;

        while ((c = getopt_long(argc, argv, "h", options, NULL)) >= 0)
                switch (c) {
                case 'h':
                        help();
                        return 0;
                case ARG_VERSION:
                        printf("agentix-e2b %s\n", AGENTIX_VERSION);
                        return 0;
                case ARG_LISTEN:
                        arg_listen = optarg;
                        break;
                case ARG_KEYS:
                        arg_keys = optarg;
                        break;
                case ARG_DOMAIN:
                        if (!*optarg || strchr(optarg, '/') || strchr(optarg, ':'))
                                return log_error_errno(EINVAL, "--domain=%s: give a DNS name (e2b.example.com)", optarg);
                        arg_domain = optarg;
                        break;
                case ARG_TLS_CERT:
                        arg_tls_cert = optarg;
                        break;
                case ARG_TLS_KEY:
                        arg_tls_key = optarg;
                        break;
                case ARG_MAKE_KEY:
                        if (!*optarg || strpbrk(optarg, " \t\n"))
                                return log_error_errno(EINVAL, "--make-key=%s: give a user name", optarg);
                        r = api_key_make(key);
                        if (r < 0)
                                return log_error_errno(r, "Cannot make a key: %m");
                        printf("%s %s\n", key, optarg);
                        return 0;
                default:
                        return -EINVAL;
                }
        if (optind < argc)
                return log_error_errno(EINVAL, "agentix-e2b takes no arguments (see --help)");
        if (!arg_tls_cert != !arg_tls_key)
                return log_error_errno(EINVAL, "--tls-cert and --tls-key go together.");
        return 1;
}

typedef struct Gateway {
        sd_event *event;
        HttpServer *http;
        UserBuses *buses;
        ApiKeys *keys;
        ControlApi *control;
        SandboxRoute *route;
} Gateway;

static int load_keys(Gateway *g) {
        _cleanup_free_ char *error = NULL;
        ApiKeys *keys = NULL;
        int r;

        r = api_keys_load(arg_keys, &keys, &error);
        if (r < 0)
                return log_error_errno(r, "%s", error ?: "Cannot read the API keys");
        /* Found out now rather than at a request: a gateway that cannot act for a key's user
         * would fail every request with it. */
        r = user_buses_check_keys(keys, &error);
        if (r < 0) {
                api_keys_free(keys);
                return log_error_errno(r, "%s: %s", arg_keys, error ?: "a key's user cannot be acted for");
        }
        api_keys_free(g->keys);
        g->keys = keys;
        log_info("%zu API key%s from %s.", keys->n, keys->n == 1 ? "" : "s", arg_keys);
        return 0;
}

static int on_reload_signal(sd_event_source *s, const struct signalfd_siginfo *si, void *userdata) {
        /* A bad file keeps the keys in use: a typo must not lock everyone out. */
        (void) sd_notify(false, "RELOADING=1");
        (void) load_keys(userdata);
        (void) sd_notify(false, "READY=1");
        return 0;
}

static int on_stop_signal(sd_event_source *s, const struct signalfd_siginfo *si, void *userdata) {
        Gateway *g = userdata;

        (void) sd_notify(false, "STOPPING=1");
        http_server_shutdown(g->http);
        return sd_event_exit(g->event, 0);
}

static int listen_on(Gateway *g) {
        _cleanup_free_ char *host = NULL;
        const char *listen = arg_listen ?: E2B_LISTEN_DEFAULT, *colon;
        int n, r;

        n = arg_listen ? 0 : sd_listen_fds(true);
        if (n < 0)
                return log_error_errno(n, "Cannot take the sockets systemd passed: %m");
        for (int i = 0; i < n; i++) {
                r = http_server_listen_fd(g->http, SD_LISTEN_FDS_START + i);
                if (r < 0)
                        return log_error_errno(r, "Cannot serve on the socket systemd passed: %m");
        }
        if (n > 0)
                return 0;
        colon = strrchr(listen, ':');
        if (!colon || colon == listen || !colon[1])
                return log_error_errno(EINVAL, "--listen=%s: give ADDR:PORT (127.0.0.1:49982, [::1]:49982)", listen);
        if (listen[0] == '[' && colon[-1] == ']')
                host = strndup(listen + 1, (size_t) (colon - listen - 2));
        else
                host = strndup(listen, (size_t) (colon - listen));
        if (!host)
                return log_oom();
        return http_server_listen(g->http, host, colon + 1);
}

static void gateway_done(Gateway *g) {
        sandbox_route_free(g->route);
        control_api_free(g->control);
        http_server_free(g->http);
        user_buses_free(g->buses);
        api_keys_free(g->keys);
        sd_event_unref(g->event);
}

int main(int argc, char *argv[]) {
        HttpServerConfig config = { .max_connections = E2B_MAX_CONNECTIONS };
        Gateway g = {};
        sigset_t mask;
        int r;

        log_set_prefix("agentix-e2b");
        log_parse_env();
        r = parse_argv(argc, argv);
        if (r <= 0)
                return r < 0 ? EXIT_FAILURE : EXIT_SUCCESS;

        sigemptyset(&mask);
        sigaddset(&mask, SIGTERM);
        sigaddset(&mask, SIGINT);
        sigaddset(&mask, SIGHUP);
        sigprocmask(SIG_BLOCK, &mask, NULL);
        /* A peer that closes while we write must not kill the gateway. */
        signal(SIGPIPE, SIG_IGN);

        r = load_keys(&g);
        if (r == -EPERM) {
                /* A keys file others may read, or a key the gateway may not act for: not a failure a
                 * restart mends (the unit says RestartPreventExitStatus=4). */
                gateway_done(&g);
                return EXIT_NOT_PERMITTED;
        }
        if (r >= 0)
                r = sd_event_default(&g.event);
        if (r >= 0)
                r = user_buses_new(g.event, &g.buses);
        if (r >= 0)
                r = http_server_new(g.event, &config, &g.http);
        if (r >= 0 && arg_tls_cert) {
                _cleanup_(SSL_CTX_freep) SSL_CTX *ctx = NULL;
                _cleanup_free_ char *error = NULL;

                r = tls_server_context_from_files(arg_tls_cert, arg_tls_key, &ctx, &error);
                if (r < 0)
                        log_error("Cannot serve TLS with --tls-cert=%s --tls-key=%s: %s", arg_tls_cert, arg_tls_key,
                                  error ?: "out of memory");
                else
                        r = http_server_set_tls(g.http, ctx);
        }
        if (r >= 0)
                r = control_api_new(g.http, g.buses, &g.keys, &g.control);
        if (r >= 0)
                r = sandbox_route_new(g.event, g.http, arg_domain, &g.route);
        if (r >= 0)
                r = listen_on(&g);
        if (r >= 0)
                r = sd_event_add_signal(g.event, NULL, SIGTERM, on_stop_signal, &g);
        if (r >= 0)
                r = sd_event_add_signal(g.event, NULL, SIGINT, on_stop_signal, &g);
        if (r >= 0)
                r = sd_event_add_signal(g.event, NULL, SIGHUP, on_reload_signal, &g);
        if (r < 0) {
                log_error_errno(r, "agentix-e2b cannot start: %m");
                gateway_done(&g);
                return EXIT_FAILURE;
        }
        log_info("agentix-e2b %s on port %u%s.", AGENTIX_VERSION, http_server_port(g.http),
                 arg_tls_cert ? " (HTTPS)" : "");
        (void) sd_notify(false, "READY=1");
        r = sd_event_loop(g.event);
        gateway_done(&g);
        return r < 0 ? EXIT_FAILURE : EXIT_SUCCESS;
}

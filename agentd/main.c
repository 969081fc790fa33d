/* SPDX-License-Identifier: MIT */
/* agentd: the agentix sandbox manager on D-Bus. */
#include <getopt.h>
#include <signal.h>

#include <systemd/sd-daemon.h>

#include "log.h"
#include "lifecycle.h"
#include "manager-dbus.h"
#include "metrics-endpoint.h"

static bool arg_user = false;
static bool arg_show_config = false;
static uint64_t arg_docker_timeout_usec = 0;
static const char *arg_config = AGENTD_CONFIG_DEFAULT;

/* Within systemd's default TimeoutStopSec= (90 s). */
#define AGENTD_STOP_DELETE_TIMEOUT_USEC (60ULL * 1000 * 1000)

static void help(void) {
        printf("Usage: agentd [OPTIONS]\n"
               "\n"
               "Create, list and delete agentix sandboxes for D-Bus clients (busctl, agentixctl,\n"
               "libagentix): task containers with a bundle's runtime overlaid at /nix.\n"
               "\n"
               "  -h --help               Show this help\n"
               "     --version            Show the version\n"
               "     --user               Serve on the session bus instead of the system bus\n"
               "     --config=FILE        Read FILE and FILE.d/*.conf (default " AGENTD_CONFIG_DEFAULT ")\n"
               "     --show-config        Print the configuration in effect and exit\n"
               "     --docker-timeout=SEC Fail a backend request that takes longer (default: Timeout=\n"
               "                          in agentd.conf, 30)\n"
               "\n"
               "Environment: DBUS_SYSTEM_BUS_ADDRESS (the system bus), DOCKER_HOST (unix:// socket,\n"
               "over [Docker] Socket=, default unix:///var/run/docker.sock), AGENTIX_LOG_LEVEL.\n"
               "\n"
               "See agentd(8), agentd.conf(5) and org.agentix.Agentd1(5).\n");
}

static int parse_argv(int argc, char *argv[]) {
        enum { ARG_VERSION = 0x100, ARG_USER, ARG_CONFIG, ARG_SHOW_CONFIG, ARG_DOCKER_TIMEOUT };
        static const struct option options[] = {
                { "help", no_argument, NULL, 'h' },
                { "version", no_argument, NULL, ARG_VERSION },
                { "user", no_argument, NULL, ARG_USER },
                { "config", required_argument, NULL, ARG_CONFIG },
                { "show-config", no_argument, NULL, ARG_SHOW_CONFIG },
                { "docker-timeout", required_argument, NULL, ARG_DOCKER_TIMEOUT },
                {}
        };
        int c;

        while ((c = getopt_long(argc, argv, "h", options, NULL)) >= 0)
                switch (c) {
                case 'h':
                        help();
                        return 0;
                case ARG_VERSION:
                        printf("agentd %s\n", AGENTIX_VERSION);
                        return 0;
                case ARG_USER:
                        arg_user = true;
                        break;
                case ARG_CONFIG:
                        if (optarg[0] != '/' && !(optarg[0] == '.' && optarg[1] == '/'))
                                return log_error_errno(EINVAL, "--config=%s: give a path (absolute or ./)", optarg);
                        arg_config = optarg;
                        break;
                case ARG_SHOW_CONFIG:
                        arg_show_config = true;
                        break;
                case ARG_DOCKER_TIMEOUT: {
                        char *end;
                        double v = strtod(optarg, &end);
                        if (*end || !(v >= 0.1 && v <= 3600))
                                return log_error_errno(EINVAL, "Invalid --docker-timeout '%s': 0.1 to 3600 seconds", optarg);
                        arg_docker_timeout_usec = (uint64_t) (v * 1e6);
                        break;
                }
                default:
                        return -EINVAL;
                }
        if (optind < argc)
                return log_error_errno(EINVAL, "Unexpected argument: %s (see --help)", argv[optind]);
        return 1;
}

/* unix://PATH into var, unless the environment already names one. */
static int export_socket(const char *var, const char *path) {
        _cleanup_free_ char *host = NULL;

        if (!path)
                return 0;
        if (asprintf(&host, "unix://%s", path) < 0)
                return -ENOMEM;
        return setenv(var, host, 0) < 0 ? -errno : 0;
}

/* What the backends read from the environment, from agentd.conf. */
static int export_backend_settings(const AgentdConfig *c) {
        char timeout[32];
        int r;

        snprintf(timeout, sizeof(timeout), "%.3f", c->backend_timeout_usec / 1e6);
        if (setenv(AGENTD_BACKEND_TIMEOUT_ENV, timeout, 1) < 0)
                return -errno;
        r = export_socket("DOCKER_HOST", c->docker_socket);
        if (r < 0)
                return r;
        r = export_socket("CONTAINER_HOST", c->podman_socket);
        if (r < 0)
                return r;
        if (c->network_shard_size > 0) {
                char size[32];

                snprintf(size, sizeof(size), "%llu", (unsigned long long) c->network_shard_size);
                if (setenv("AGENTIX_NETWORK_SHARD_SIZE", size, 0) < 0)
                        return -errno;
        }
        if ((c->swarm_host && setenv("SWARM_HOST", c->swarm_host, 0) < 0) ||
            (c->swarm_cert_path && setenv("SWARM_CERT_PATH", c->swarm_cert_path, 0) < 0) ||
            (c->swarm_registry && setenv("SWARM_REGISTRY", c->swarm_registry, 0) < 0))
                return -errno;
        return 0;
}

/* Read agentd.conf; what the backends read from the environment is set there unless the
 * environment already says (an explicit DOCKER_HOST wins, as with the docker CLI). */
static int load_config(AgentdConfig **ret) {
        _cleanup_free_ char *error = NULL;
        AgentdConfig *c = NULL;
        int r;

        r = agentd_config_new(&c);
        if (r < 0)
                return log_error_errno(r, "Out of memory.");
        r = agentd_config_load(c, arg_config, &error);
        if (r < 0) {
                if (error)
                        log_error("Bad configuration: %s", error);
                else
                        log_error_errno(r, "Cannot read %s: %m", arg_config);
                agentd_config_free(c);
                return r;
        }
        if (arg_docker_timeout_usec > 0)
                c->backend_timeout_usec = arg_docker_timeout_usec;
        r = export_backend_settings(c);
        if (r < 0) {
                agentd_config_free(c);
                return log_error_errno(r, "Cannot set the backends' environment: %m");
        }
        *ret = c;
        return 0;
}

/* SIGTERM/SIGINT: leave the loop, after deleting every sandbox when agentd.conf says
 * DeleteOnStop=yes (the sandboxes run on otherwise: they have TTLs, and the next agentd adopts
 * them). A second signal does not wait. */
static int on_stop_signal(sd_event_source *es, const struct signalfd_siginfo *si, void *userdata) {
        Manager *m = userdata;
        static bool stopping = false;
        int r;

        if (stopping || !m->config->delete_on_stop)
                return sd_event_exit(m->event, 0);
        stopping = true;
        m->stopping = true; /* no new creates meanwhile */
        r = lifecycle_delete_all_then_exit(m, AGENTD_STOP_DELETE_TIMEOUT_USEC);
        if (r <= 0) {
                if (r < 0)
                        log_error_errno(r, "Cannot delete the sandboxes before stopping: %m");
                return sd_event_exit(m->event, 0);
        }
        return 0;
}

static int on_reload_signal(sd_event_source *es, const struct signalfd_siginfo *si, void *userdata) {
        (void) manager_dbus_reload(userdata, NULL);
        return 0;
}

static int on_name_acquired(sd_bus_message *reply, void *userdata, sd_bus_error *ret_error) {
        Manager *m = userdata;
        const sd_bus_error *e = sd_bus_message_get_error(reply);

        if (e) {
                log_error("Failed to own %s on the bus (another agentd, or the bus policy?): %s", BUS_NAME, e->message);
                return sd_event_exit(m->event, -sd_bus_error_get_errno(e) ?: -EACCES);
        }
        log_info("agentd %s on the %s bus as %s.", AGENTIX_VERSION, arg_user ? "session" : "system", BUS_NAME);
        (void) sd_notify(false, "READY=1");
        manager_notify_status(m);
        return 0;
}

/* The sandboxes an earlier agentd left are adopted: clients may come (the ones D-Bus activation
 * queued get their answers now). */
static void on_ready(Manager *m) {
        int r = sd_bus_request_name_async(m->bus, NULL, BUS_NAME, 0, on_name_acquired, m);

        if (r < 0) {
                log_error_errno(r, "Failed to ask for %s on the bus: %m", BUS_NAME);
                (void) sd_event_exit(m->event, r);
        }
}

static bool any_backend_loaded(Backend **l, size_t n) {
        for (size_t i = 0; i < n; i++)
                if (l[i]->state)
                        return true;
        return false;
}

int main(int argc, char *argv[]) {
        AgentdConfig *config = NULL;
        Backend **backends = NULL;
        size_t n_backends = 0;
        sd_event *event = NULL;
        sd_bus *bus = NULL;
        Manager *m = NULL;
        sigset_t mask;
        int r;

        log_parse_env();
        log_set_prefix("agentd");
        r = parse_argv(argc, argv);
        if (r <= 0)
                return r < 0 ? 2 : 0;

        r = load_config(&config);
        if (r < 0)
                return 1;
        if (arg_show_config) {
                r = agentd_config_format(config, stdout);
                agentd_config_free(config);
                return r < 0 ? 1 : 0;
        }

        sigemptyset(&mask);
        sigaddset(&mask, SIGTERM);
        sigaddset(&mask, SIGINT);
        sigaddset(&mask, SIGHUP);
        sigprocmask(SIG_BLOCK, &mask, NULL);
        signal(SIGPIPE, SIG_IGN);

        r = sd_event_default(&event);
        if (r < 0)
                goto finish;
        /* WATCHDOG=1 from the loop itself, at half of WatchdogSec= (nothing when it is unset). */
        (void) sd_event_set_watchdog(event, true);

        /* The backends take this loop as sd_event_default(). Loaded before the bus: with none,
         * there is nothing to offer on it. */
        r = backends_load(config->backends, getenv("AGENTD_BACKEND_DIR") ?: config->backend_dir, &backends,
                          &n_backends);
        if (r < 0)
                goto finish;
        if (!any_backend_loaded(backends, n_backends)) {
                log_error("No backend could be loaded (see above): agentd has nowhere to run sandboxes.");
                r = -ENOENT;
                goto finish;
        }

        r = arg_user ? sd_bus_open_user(&bus) : sd_bus_open_system(&bus);
        if (r < 0) {
                log_error_errno(r, "Failed to connect to the %s bus: %m", arg_user ? "session" : "system");
                goto finish;
        }
        r = manager_new(event, bus, TAKE_PTR(config), TAKE_PTR(backends), n_backends, &m);
        n_backends = 0;
        if (r < 0)
                goto finish;
        m->config_path = arg_config;
        m->timeout_from_command_line = arg_docker_timeout_usec > 0;
        {
                _cleanup_free_ char *error = NULL;

                r = manager_setup_tls(m, &error);
                if (r < 0) {
                        log_error("Cannot serve runtimes over TLS ([Runtime] TLS= in agentd.conf): %s",
                                  error ?: strerror(-r));
                        r = -ENOENT; /* said */
                        goto finish;
                }
                if (m->runtime_ca)
                        for (size_t i = 0; i < m->n_backends; i++)
                                if (m->backends[i]->tls)
                                        log_info("Sandboxes of backend %s serve TLS; runtime CA in %s.",
                                                 m->backends[i]->name, runtime_ca_default_dir());
        }
        r = manager_dbus_register(m);
        if (r < 0)
                goto finish;
        r = metrics_endpoint_start(m, &m->metrics_endpoint);
        if (r < 0)
                goto finish;
        r = sd_event_add_signal(event, NULL, SIGTERM, on_stop_signal, m);
        if (r >= 0)
                r = sd_event_add_signal(event, NULL, SIGINT, on_stop_signal, m);
        if (r >= 0)
                r = sd_event_add_signal(event, NULL, SIGHUP, on_reload_signal, m);
        if (r < 0)
                goto finish;
        r = sd_bus_attach_event(bus, event, SD_EVENT_PRIORITY_NORMAL);
        if (r < 0)
                goto finish;
        m->on_ready = on_ready;
        r = lifecycle_start(m);
        if (r < 0)
                goto finish;
        r = sd_event_loop(event);
finish:
        if (r < 0 && r != -ENOENT)
                log_error_errno(r, "agentd failed: %m");
        if (m)
                lifecycle_stop(m);
        manager_free(m);
        backends_free(backends, n_backends);
        agentd_config_free(config);
        if (bus)
                sd_bus_flush_close_unref(bus);
        sd_event_unref(event);
        return r < 0 ? 1 : 0;
}

/* SPDX-License-Identifier: MIT */
/* The isolated network (network=isolated, the docker backend's default): a bridge agentd owns,
 * agentix-isolated on the interface agentix0 (or $AGENTIX_ISOLATED_BRIDGE), with traffic between
 * its containers off (enable_icc=false). The firewall rules that keep its sandboxes off the host's own addresses
 * and private ranges are agentix-firewall's (policy/firewall): agentd.service applies them
 * before agentd starts, and agentd applies them itself when it holds CAP_NET_ADMIN.
 *
 * The network is made once, by the first create that needs it; creates that come meanwhile
 * wait for that one (Docker does not keep two creates of one name apart reliably). */
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>

#include "docker-network.h"
#include "log.h"

#define NETWORK_NAME "agentix-isolated"
#define NETWORK_BRIDGE_DEFAULT "agentix0"
#define NETWORK_BRIDGE_ENV "AGENTIX_ISOLATED_BRIDGE"
#define CAP_NET_ADMIN_BIT 12

extern char **environ;

struct DockerNetwork {
        DockerClient *docker;
        char *service;
        char *bridge;             /* its interface */
        NetworkState state;
        DockerRequest *request;
        char *error;
};

const char *docker_network_isolated_name(void) {
        return NETWORK_NAME;
}

int docker_network_new(DockerClient *d, const char *service, DockerNetwork **ret, char **ret_error) {
        const char *v = getenv(NETWORK_BRIDGE_ENV) ?: NETWORK_BRIDGE_DEFAULT;
        size_t len = strlen(v);
        DockerNetwork *n;

        if (len == 0 || len > 15 || strspn(v, "abcdefghijklmnopqrstuvwxyz0123456789_-") != len) {
                if (asprintf(ret_error, "%s=%s: not an interface name (lowercase letters, digits, '-', '_'; at most "
                             "15)", NETWORK_BRIDGE_ENV, v) < 0)
                        *ret_error = NULL;
                return -EINVAL;
        }
        n = calloc(1, sizeof(*n));
        if (!n)
                return -ENOMEM;
        n->docker = d;
        n->service = strdup(service);
        n->bridge = strdup(v);
        if (!n->service || !n->bridge) {
                docker_network_free(n);
                return -ENOMEM;
        }
        *ret = n;
        return 0;
}

DockerNetwork *docker_network_free(DockerNetwork *n) {
        if (!n)
                return NULL;
        docker_request_cancel(n->request);
        free(n->service);
        free(n->bridge);
        free(n->error);
        free(n);
        return NULL;
}

NetworkState docker_network_state(const DockerNetwork *n) {
        return n->state;
}

const char *docker_network_error(const DockerNetwork *n) {
        return n->error;
}

/* Record why the network cannot be used; state UNKNOWN: a later create tries again, BROKEN:
 * none does until agentd starts again (its firewall rules are not in place). */
static void network_error(DockerNetwork *n, NetworkState state, const char *fmt, ...) _printf_(3, 4);
static void network_error(DockerNetwork *n, NetworkState state, const char *fmt, ...) {
        va_list ap;

        free(n->error);
        va_start(ap, fmt);
        if (vasprintf(&n->error, fmt, ap) < 0)
                n->error = NULL;
        va_end(ap);
        n->state = state;
        log_full_errno(state == NETWORK_BROKEN ? LOG_ERR : LOG_WARNING, 0, "%s",
                       n->error ?: "The isolated network cannot be used.");
}

#define network_failed(n, ...) network_error((n), NETWORK_UNKNOWN, __VA_ARGS__)
#define network_broken(n, ...) network_error((n), NETWORK_BROKEN, __VA_ARGS__)

static void on_network_created(DockerClient *d, int status, json_t *body, const char *error, void *userdata) {
        DockerNetwork *n = userdata;
        char buf[256];

        n->request = NULL;
        if (status != 201 && status != 409) { /* 409: made meanwhile by someone else */
                network_failed(n, "%s refused to make the isolated network %s: %s", n->service, NETWORK_NAME,
                               docker_error_message(status, body, error, buf, sizeof(buf)));
                return;
        }
        log_info("Made the isolated network %s (bridge %s, no traffic between sandboxes).", NETWORK_NAME,
                 n->bridge);
        n->state = NETWORK_READY;
}

static void on_network_inspected(DockerClient *d, int status, json_t *body, const char *error, void *userdata) {
        DockerNetwork *n = userdata;
        json_t *options, *create;
        char buf[256];
        int r;

        n->request = NULL;
        if (status == 200) {
                options = json_object_get(body, "Options");
                /* One made by hand with other settings would not isolate: say so, use nothing. */
                if (!streq(json_string_value(json_object_get(options, "com.docker.network.bridge.enable_icc")) ?: "",
                           "false") ||
                    !streq(json_string_value(json_object_get(options, "com.docker.network.bridge.name")) ?: "",
                           n->bridge)) {
                        network_failed(n, "%s's network %s is not agentd's isolated network (it lets containers "
                                       "reach each other, or is not on bridge %s): remove it with `docker network rm "
                                       "%s`, and agentd makes it anew", n->service, NETWORK_NAME, n->bridge,
                                       NETWORK_NAME);
                        return;
                }
                n->state = NETWORK_READY;
                return;
        }
        if (status != 404) {
                network_failed(n, "Cannot look up the isolated network %s in %s: %s", NETWORK_NAME, n->service,
                               docker_error_message(status, body, error, buf, sizeof(buf)));
                return;
        }
        create = json_pack("{s:s, s:b, s:s, s:{s:s, s:s}, s:{s:s}}", "Name", NETWORK_NAME, "CheckDuplicate", 1,
                           "Driver", "bridge", "Options", "com.docker.network.bridge.enable_icc", "false",
                           "com.docker.network.bridge.name", n->bridge, "Labels", "org.agentix.managed", "1");
        r = create ? docker_request(n->docker, "POST", "/networks/create", create, 0, on_network_created, n,
                                    &n->request)
                   : -ENOMEM;
        json_decref(create);
        if (r < 0)
                network_failed(n, "Cannot ask %s to make the isolated network: %s", n->service, strerror(-r));
}

void docker_network_ensure(DockerNetwork *n) {
        int r;

        if (n->state != NETWORK_UNKNOWN)
                return; /* made, being made, or impossible (no firewall rules) */
        free(n->error);
        n->error = NULL;
        n->state = NETWORK_MAKING;
        r = docker_request(n->docker, "GET", "/networks/" NETWORK_NAME, NULL, 0, on_network_inspected, n,
                           &n->request);
        if (r < 0)
                network_failed(n, "Cannot ask %s about the isolated network: %s", n->service, strerror(-r));
}

void docker_network_forget(DockerNetwork *n) {
        if (n->state == NETWORK_BROKEN)
                return;
        docker_request_cancel(n->request);
        n->request = NULL;
        n->state = NETWORK_UNKNOWN;
}

/* CAP_NET_ADMIN in our effective set (/proc/self/status's CapEff)? */
static bool may_change_firewall(void) {
        _cleanup_fclose_ FILE *f = fopen("/proc/self/status", "re");
        char line[256];
        unsigned long long caps;

        while (f && fgets(line, sizeof(line), f))
                if (sscanf(line, "CapEff: %llx", &caps) == 1)
                        return caps & (1ULL << CAP_NET_ADMIN_BIT);
        return false;
}

int docker_network_apply_firewall(DockerNetwork *n) {
        const char *path = getenv("AGENTIX_FIREWALL") ?: AGENTIX_LIBEXECDIR "/agentix-firewall";
        char *argv[] = { (char *) path, (char *) "apply", n->bridge, NULL };
        posix_spawn_file_actions_t fa;
        int status, r;
        pid_t pid;

        if (!may_change_firewall()) {
                log_debug("No CAP_NET_ADMIN: the isolated network's firewall rules are agentd.service's to apply "
                          "(ExecStartPre=agentix-firewall apply).");
                return 0;
        }
        /* At start, before the event loop runs: a short child of our own, waited for here. */
        if (posix_spawn_file_actions_init(&fa) != 0)
                return -ENOMEM;
        (void) posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
        (void) posix_spawn_file_actions_adddup2(&fa, STDERR_FILENO, STDOUT_FILENO);
        r = posix_spawn(&pid, path, &fa, NULL, argv, environ);
        posix_spawn_file_actions_destroy(&fa);
        if (r != 0) {
                network_broken(n, "Cannot run %s to apply the isolated network's firewall rules: %s", path,
                               strerror(r));
                return -r;
        }
        while (waitpid(pid, &status, 0) < 0)
                if (errno != EINTR) {
                        r = -errno;
                        network_broken(n, "Cannot wait for %s: %s", path, strerror(-r));
                        return r;
                }
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
                network_broken(n, "%s apply %s failed (status %d; its output is in agentd's log): sandboxes on the "
                               "isolated network would reach the host, so none is made", path, n->bridge,
                               WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
                return -EIO;
        }
        log_info("Applied the isolated network's firewall rules (%s apply %s).", path, n->bridge);
        return 0;
}

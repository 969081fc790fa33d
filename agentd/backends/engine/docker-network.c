/* SPDX-License-Identifier: MIT */
/* The isolated network (network=isolated, the docker backend's default): a bridge agentd owns,
 * agentix-isolated on the interface agentix0, with traffic between its containers off
 * (enable_icc=false). The firewall rules that keep its sandboxes off the host's own addresses
 * and private ranges are agentix-firewall's (policy/firewall): agentd.service applies them
 * before agentd starts, and agentd applies them itself when it holds CAP_NET_ADMIN.
 *
 * The network is made once, by the first create that needs it; creates that come meanwhile
 * wait for that one (Docker does not keep two creates of one name apart reliably). */
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>

#include "docker-backend.h"
#include "log.h"

#define NETWORK_NAME "agentix-isolated"
#define NETWORK_BRIDGE_DEFAULT "agentix0"
#define NETWORK_BRIDGE_ENV "AGENTIX_ISOLATED_BRIDGE"
#define CAP_NET_ADMIN_BIT 12

extern char **environ;

const char *docker_network_isolated_name(void) {
        return NETWORK_NAME;
}

/* The bridge's interface name: one per dockerd on a host (a second dockerd, made for a test
 * say, needs another). */
int docker_network_set_bridge_from_env(DockerBackend *b, char **ret_error) {
        const char *v = getenv(NETWORK_BRIDGE_ENV) ?: NETWORK_BRIDGE_DEFAULT;
        size_t n = strlen(v);

        if (n == 0 || n > 15 || strspn(v, "abcdefghijklmnopqrstuvwxyz0123456789_-") != n) {
                if (asprintf(ret_error, "%s=%s: not an interface name (lowercase letters, digits, '-', '_'; at most "
                             "15)", NETWORK_BRIDGE_ENV, v) < 0)
                        *ret_error = NULL;
                return -EINVAL;
        }
        free(b->network_bridge);
        b->network_bridge = strdup(v);
        return b->network_bridge ? 0 : -ENOMEM;
}

/* Record why the network cannot be used; state UNKNOWN: a later create tries again, BROKEN:
 * none does until agentd starts again (its firewall rules are not in place). */
static void network_error(DockerBackend *b, NetworkState state, const char *fmt, ...) _printf_(3, 4);
static void network_error(DockerBackend *b, NetworkState state, const char *fmt, ...) {
        va_list ap;

        free(b->network_error);
        va_start(ap, fmt);
        if (vasprintf(&b->network_error, fmt, ap) < 0)
                b->network_error = NULL;
        va_end(ap);
        b->network_state = state;
        log_full_errno(state == NETWORK_BROKEN ? LOG_ERR : LOG_WARNING, 0, "%s",
                       b->network_error ?: "The isolated network cannot be used.");
}

#define network_failed(b, ...) network_error((b), NETWORK_UNKNOWN, __VA_ARGS__)
#define network_broken(b, ...) network_error((b), NETWORK_BROKEN, __VA_ARGS__)

static void on_network_created(DockerClient *d, int status, json_t *body, const char *error, void *userdata) {
        DockerBackend *b = userdata;
        char buf[256];

        b->network_request = NULL;
        if (status != 201 && status != 409) { /* 409: made meanwhile by someone else */
                network_failed(b, "%s refused to make the isolated network %s: %s", b->service, NETWORK_NAME,
                               docker_error_message(status, body, error, buf, sizeof(buf)));
                return;
        }
        log_info("Made the isolated network %s (bridge %s, no traffic between sandboxes).", NETWORK_NAME,
                 b->network_bridge);
        b->network_state = NETWORK_READY;
}

static void on_network_inspected(DockerClient *d, int status, json_t *body, const char *error, void *userdata) {
        DockerBackend *b = userdata;
        json_t *options, *create;
        char buf[256];
        int r;

        b->network_request = NULL;
        if (status == 200) {
                options = json_object_get(body, "Options");
                /* One made by hand with other settings would not isolate: say so, use nothing. */
                if (!streq(json_string_value(json_object_get(options, "com.docker.network.bridge.enable_icc")) ?: "",
                           "false") ||
                    !streq(json_string_value(json_object_get(options, "com.docker.network.bridge.name")) ?: "",
                           b->network_bridge)) {
                        network_failed(b, "%s's network %s is not agentd's isolated network (it lets containers "
                                       "reach each other, or is not on bridge %s): remove it with `docker network rm "
                                       "%s`, and agentd makes it anew", b->service, NETWORK_NAME, b->network_bridge,
                                       NETWORK_NAME);
                        return;
                }
                b->network_state = NETWORK_READY;
                return;
        }
        if (status != 404) {
                network_failed(b, "Cannot look up the isolated network %s in %s: %s", NETWORK_NAME, b->service,
                               docker_error_message(status, body, error, buf, sizeof(buf)));
                return;
        }
        create = json_pack("{s:s, s:b, s:s, s:{s:s, s:s}, s:{s:s}}", "Name", NETWORK_NAME, "CheckDuplicate", 1,
                           "Driver", "bridge", "Options", "com.docker.network.bridge.enable_icc", "false",
                           "com.docker.network.bridge.name", b->network_bridge, "Labels", "org.agentix.managed", "1");
        r = create ? docker_request(b->docker, "POST", "/networks/create", create, 0, on_network_created, b,
                                    &b->network_request)
                   : -ENOMEM;
        json_decref(create);
        if (r < 0)
                network_failed(b, "Cannot ask %s to make the isolated network: %s", b->service, strerror(-r));
}

void docker_network_ensure(DockerBackend *b) {
        int r;

        if (b->network_state != NETWORK_UNKNOWN)
                return; /* made, being made, or impossible (no firewall rules) */
        free(b->network_error);
        b->network_error = NULL;
        b->network_state = NETWORK_MAKING;
        r = docker_request(b->docker, "GET", "/networks/" NETWORK_NAME, NULL, 0, on_network_inspected, b,
                           &b->network_request);
        if (r < 0)
                network_failed(b, "Cannot ask %s about the isolated network: %s", b->service, strerror(-r));
}

void docker_network_forget(DockerBackend *b) {
        if (b->network_state == NETWORK_BROKEN)
                return;
        docker_request_cancel(b->network_request);
        b->network_request = NULL;
        b->network_state = NETWORK_UNKNOWN;
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

int docker_network_apply_firewall(DockerBackend *b) {
        const char *path = getenv("AGENTIX_FIREWALL") ?: AGENTIX_LIBEXECDIR "/agentix-firewall";
        char *argv[] = { (char *) path, (char *) "apply", b->network_bridge, NULL };
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
                network_broken(b, "Cannot run %s to apply the isolated network's firewall rules: %s", path,
                               strerror(r));
                return -r;
        }
        while (waitpid(pid, &status, 0) < 0)
                if (errno != EINTR) {
                        r = -errno;
                        network_broken(b, "Cannot wait for %s: %s", path, strerror(-r));
                        return r;
                }
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
                network_broken(b, "%s apply %s failed (status %d; its output is in agentd's log): sandboxes on the "
                               "isolated network would reach the host, so none is made", path, b->network_bridge,
                               WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
                return -EIO;
        }
        log_info("Applied the isolated network's firewall rules (%s apply %s).", path, b->network_bridge);
        return 0;
}

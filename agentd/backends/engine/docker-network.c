/* SPDX-License-Identifier: MIT */
/* agentd's own networks: bridges agentd owns, with traffic between their containers off
 * (enable_icc=false).
 *   - agentix-isolated (network=isolated, the docker backend's default), on the interface
 *     agentix0 (or $AGENTIX_ISOLATED_BRIDGE): agentix-firewall's rules keep its sandboxes off
 *     the host's own addresses and off private, shared and link-local ranges.
 *   - agentix-egress (sandboxes with an egress list), on agentix1 (or $AGENTIX_EGRESS_BRIDGE):
 *     only the host's own addresses are refused there; each sandbox carries its own allow-list
 *     (docker-egress.c).
 * agentd.service applies the rules (agentix-firewall, policy/firewall) before agentd starts;
 * agentd applies them itself when it holds CAP_NET_ADMIN.
 *
 * The network is made once, by the first create that needs it; creates that come meanwhile
 * wait for that one (Docker does not keep two creates of one name apart reliably). */
#include <ctype.h>
#include <limits.h>

#include "docker-network.h"
#include "firewall-helper.h"
#include "log.h"
#include "macro.h"

static const struct {
        const char *name, *bridge_env, *bridge_default, *what;
} kinds[] = {
        [NETWORK_ISOLATED] = { "agentix-isolated", "AGENTIX_ISOLATED_BRIDGE", "agentix0", "the isolated network" },
        [NETWORK_EGRESS] = { "agentix-egress", "AGENTIX_EGRESS_BRIDGE", "agentix1", "the egress network" },
};

struct DockerNetwork {
        DockerClient *docker;
        NetworkKind kind;
        unsigned shard;
        char *name;
        char *service;
        char *bridge;             /* its interface */
        NetworkState state;
        DockerRequest *request;
        char *error;
};

const char *docker_network_name(const DockerNetwork *n) {
        return n->name;
}

int docker_network_new(DockerClient *d, const char *service, NetworkKind kind, unsigned shard, DockerNetwork **ret,
                       char **ret_error) {
        const char *v = getenv(kinds[kind].bridge_env) ?: kinds[kind].bridge_default;
        size_t len = strlen(v);
        char suffix[16] = "";
        DockerNetwork *n;

        if (shard > 0)
                snprintf(suffix, sizeof(suffix), "-%u", shard);
        if (len == 0 || len + strlen(suffix) > 15 || strspn(v, "abcdefghijklmnopqrstuvwxyz0123456789_-") != len) {
                if (asprintf(ret_error, "%s=%s: not an interface name (lowercase letters, digits, '-', '_'; at most "
                             "15 with a shard's suffix '-N')", kinds[kind].bridge_env, v) < 0)
                        *ret_error = NULL;
                return -EINVAL;
        }
        n = calloc(1, sizeof(*n));
        if (!n)
                return -ENOMEM;
        n->docker = d;
        n->kind = kind;
        n->shard = shard;
        n->service = strdup(service);
        if (!n->service || asprintf(&n->name, "%s%s", kinds[kind].name, suffix) < 0 ||
            asprintf(&n->bridge, "%s%s", v, suffix) < 0) {
                n->name = n->bridge = NULL;
                docker_network_free(n);
                return -ENOMEM;
        }
        *ret = n;
        return 0;
}

int docker_network_shard_of(NetworkKind kind, const char *name, unsigned *ret) {
        const char *rest = startswith(name ?: "", kinds[kind].name);
        char *end;
        unsigned long k;

        if (!rest)
                return -ENOENT;
        if (!rest[0]) {
                *ret = 0;
                return 0;
        }
        if (rest[0] != '-' || !isdigit((unsigned char) rest[1]))
                return -ENOENT;
        errno = 0;
        k = strtoul(rest + 1, &end, 10);
        if (errno || *end || k == 0 || k > UINT_MAX)
                return -ENOENT;
        *ret = (unsigned) k;
        return 0;
}

DockerNetwork *docker_network_free(DockerNetwork *n) {
        if (!n)
                return NULL;
        docker_request_cancel(n->request);
        free(n->name);
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
                       n->error ?: "One of agentd's networks cannot be used.");
}

#define network_failed(n, ...) network_error((n), NETWORK_UNKNOWN, __VA_ARGS__)
#define network_broken(n, ...) network_error((n), NETWORK_BROKEN, __VA_ARGS__)

static void on_network_created(DockerClient *d, int status, json_t *body, const char *error, void *userdata) {
        DockerNetwork *n = userdata;
        char buf[256];

        n->request = NULL;
        if (status != 201 && status != 409) { /* 409: made meanwhile by someone else */
                network_failed(n, "%s refused to make %s %s: %s", n->service, kinds[n->kind].what, n->name,
                               docker_error_message(status, body, error, buf, sizeof(buf)));
                return;
        }
        log_info("Made %s %s (bridge %s, no traffic between sandboxes).", kinds[n->kind].what, n->name, n->bridge);
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
                        network_failed(n, "%s's network %s is not agentd's (it lets containers reach each other, "
                                       "or is not on bridge %s): remove it with `docker network rm %s`, and agentd "
                                       "makes it anew", n->service, n->name, n->bridge, n->name);
                        return;
                }
                n->state = NETWORK_READY;
                return;
        }
        if (status != 404) {
                network_failed(n, "Cannot look up %s %s in %s: %s", kinds[n->kind].what, n->name, n->service,
                               docker_error_message(status, body, error, buf, sizeof(buf)));
                return;
        }
        create = json_pack("{s:s, s:b, s:s, s:{s:s, s:s}, s:{s:s}}", "Name", n->name, "CheckDuplicate", 1,
                           "Driver", "bridge", "Options", "com.docker.network.bridge.enable_icc", "false",
                           "com.docker.network.bridge.name", n->bridge, "Labels", "org.agentix.managed", "1");
        r = create ? docker_request(n->docker, "POST", "/networks/create", create, 0, on_network_created, n,
                                    &n->request)
                   : -ENOMEM;
        json_decref(create);
        if (r < 0)
                network_failed(n, "Cannot ask %s to make %s: %s", n->service, kinds[n->kind].what, strerror(-r));
}

void docker_network_ensure(DockerNetwork *n) {
        int r;

        if (n->state != NETWORK_UNKNOWN)
                return; /* made, being made, or impossible (no firewall rules) */
        free(n->error);
        n->error = NULL;
        n->state = NETWORK_MAKING;
        char path[64];

        snprintf(path, sizeof(path), "/networks/%s", n->name);
        r = docker_request(n->docker, "GET", path, NULL, 0, on_network_inspected, n, &n->request);
        if (r < 0)
                network_failed(n, "Cannot ask %s about %s: %s", n->service, kinds[n->kind].what, strerror(-r));
}

void docker_network_forget(DockerNetwork *n) {
        if (n->state == NETWORK_BROKEN)
                return;
        docker_request_cancel(n->request);
        n->request = NULL;
        n->state = NETWORK_UNKNOWN;
}

int docker_network_apply_firewall(DockerNetwork *n) {
        char *isolated[] = { (char *) "apply", n->bridge, NULL },
             *egress[] = { (char *) "apply", (char *) "--host-only", n->bridge, NULL };
        char **args = n->kind == NETWORK_EGRESS ? egress : isolated;
        int r;

        if (!firewall_helper_allowed(false)) {
                log_debug("No CAP_NET_ADMIN: the rules of %s are agentd.service's to apply (ExecStartPre=agentix-firewall "
                          "apply).", n->name);
                return 0;
        }
        r = firewall_helper_run(args);
        if (r < 0) {
                network_broken(n, "Cannot run %s to apply the firewall rules of %s: %s", firewall_helper_path(), n->name,
                               strerror(-r));
                return r;
        }
        if (r != 0) {
                network_broken(n, "%s apply failed for %s (status %d; its output is in agentd's log): sandboxes on "
                               "%s would reach the host, so none is made", firewall_helper_path(), n->bridge, r,
                               n->name);
                return -EIO;
        }
        log_info("Applied the firewall rules of %s (bridge %s).", n->name, n->bridge);
        return 0;
}

int docker_runtime_url(json_t *inspect, char **ret) {
        json_t *settings = json_object_get(inspect, "NetworkSettings");
        const char *port = json_string_value(json_object_get(
                json_array_get(json_object_get(json_object_get(settings, "Ports"), "8000/tcp"), 0), "HostPort"));
        const char *network = json_string_value(json_object_get(json_object_get(inspect, "HostConfig"), "NetworkMode"));
        const char *address = json_string_value(json_object_get(
                json_object_get(json_object_get(settings, "Networks"), network ?: ""), "IPAddress"));
        int r;

        if (port && port[0])
                r = asprintf(ret, "http://127.0.0.1:%s", port);
        else if (address && address[0])
                r = asprintf(ret, "http://%s:8000", address);
        else
                return -ENOENT;
        return r < 0 ? -ENOMEM : 0;
}

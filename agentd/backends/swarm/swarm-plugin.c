/* SPDX-License-Identifier: MIT */
/* The swarm backend: its settings from the environment, the check that $SWARM_HOST is a swarm
 * manager, and its AgentdBackendOps. */
#include <limits.h>

#include "log.h"
#include "swarm-backend.h"

/* GET /info, once, before agentd's loop runs: a backend pointed at something that is no swarm
 * manager fails at load, with a message, instead of at every create. */
static int check_manager(SwarmBackend *b, char **ret_error) {
        _cleanup_free_ char *why = NULL;
        json_t *info = NULL, *swarm;
        const char *runtime;
        int r;

        r = docker_get_blocking(b->manager, "/info", &info, &why);
        if (r < 0)
                return backend_new_error(ret_error, r, "%s=%s: the swarm manager's Engine API: %s", SWARM_HOST_ENV, b->host,
                                         why ?: strerror(-r));
        swarm = json_object_get(info, "Swarm");
        if (!json_is_true(json_object_get(swarm, "ControlAvailable"))) {
                r = backend_new_error(ret_error, -ENOTCONN,
                                      "%s=%s: that Docker is no swarm manager (its swarm state is '%s'): point it at a "
                                      "manager, or make one with `docker swarm init`", SWARM_HOST_ENV, b->host,
                                      json_string_value(json_object_get(swarm, "LocalNodeState")) ?: "?");
                json_decref(info);
                return r;
        }
        runtime = json_string_value(json_object_get(info, "DefaultRuntime"));
        b->default_runtime = strdup(runtime ?: "runc");
        json_decref(info);
        return b->default_runtime ? 0 : -ENOMEM;
}

static void swarm_free(SwarmBackend *b) {
        if (!b)
                return;
        swarm_watch_stop(b);
        swarm_bundle_free_all(b);
        swarm_digests_free(b);
        docker_client_free(b->manager);
        curl_event_free(b->probes);
        sd_event_unref(b->event);
        free(b->host);
        free(b->registry);
        free(b->default_runtime);
        free(b->known);
        free(b);
}

static int swarm_new(SwarmBackend **ret, char **ret_error) {
        const char *host = getenv(SWARM_HOST_ENV), *cert_path = getenv(SWARM_CERT_PATH_ENV),
                   *registry = getenv(SWARM_REGISTRY_ENV);
        SwarmBackend *b;
        uint64_t timeout = 0;
        int r;

        log_parse_env();
        log_set_prefix("agentd");
        if (!host || !host[0])
                return backend_new_error(ret_error, -EINVAL, "%s is not set: name the swarm manager's Engine API (unix://PATH or "
                                         "tcp://HOST:PORT)", SWARM_HOST_ENV);
        if (!startswith(host, "unix://") && !startswith(host, "tcp://"))
                return backend_new_error(ret_error, -EINVAL, "%s=%s: not unix://PATH or tcp://HOST:PORT", SWARM_HOST_ENV, host);
        if (cert_path && !startswith(host, "tcp://"))
                return backend_new_error(ret_error, -EINVAL, "%s is set, but %s=%s is no tcp:// address: TLS is for TCP only",
                                         SWARM_CERT_PATH_ENV, SWARM_HOST_ENV, host);
        if (registry && (!registry[0] || strpbrk(registry, "/ \t@")))
                return backend_new_error(ret_error, -EINVAL, "%s=%s: not a registry's HOST[:PORT]", SWARM_REGISTRY_ENV, registry);
        r = docker_timeout_from_env(&timeout, ret_error);
        if (r < 0)
                return r;

        b = calloc(1, sizeof(*b));
        if (!b)
                return -ENOMEM;
        r = sd_event_default(&b->event);
        if (r >= 0)
                r = (b->host = strdup(host)) ? 0 : -ENOMEM;
        if (r >= 0 && registry)
                r = (b->registry = strdup(registry)) ? 0 : -ENOMEM;
        if (r >= 0)
                r = docker_client_new(b->event, host, &b->manager);
        if (r >= 0 && cert_path) {
                char ca[PATH_MAX], cert[PATH_MAX], key[PATH_MAX];
                if (snprintf(ca, sizeof(ca), "%s/ca.pem", cert_path) >= (int) sizeof(ca) ||
                    snprintf(cert, sizeof(cert), "%s/cert.pem", cert_path) >= (int) sizeof(cert) ||
                    snprintf(key, sizeof(key), "%s/key.pem", cert_path) >= (int) sizeof(key))
                        r = backend_new_error(ret_error, -ENAMETOOLONG, "%s=%s: too long a path", SWARM_CERT_PATH_ENV,
                                              cert_path);
                else
                        r = docker_client_set_tls(b->manager, ca, cert, key);
        }
        if (r >= 0)
                r = curl_event_new(b->event, &b->probes);
        if (r >= 0 && timeout > 0)
                docker_client_set_timeout(b->manager, timeout);
        if (r >= 0)
                r = check_manager(b, ret_error);
        if (r < 0) {
                swarm_free(b);
                return r;
        }
        log_debug("Swarm manager at %s, default runtime %s%s%s.", host, b->default_runtime,
                  registry ? ", images from " : "", registry ?: "");
        *ret = b;
        return 0;
}

AGENTD_BACKEND_DEFINE(.abi = AGENTD_BACKEND_ABI,
                      .name = "swarm",
                      .remote_runtimes = true,
                      .new = swarm_new,
                      .free = swarm_free,
                      .create = swarm_create,
                      .cancel = swarm_cancel,
                      .remove = swarm_remove,
                      .adopt = swarm_adopt,
                      .watch = swarm_watch,
                      .runtimes = swarm_runtimes,
                      .logs = swarm_logs);

/* SPDX-License-Identifier: MIT */
/* The swarm backend: its settings from the environment, the check that $SWARM_HOST is a swarm
 * manager, and its AgentdBackendOps. */
#include <curl/curl.h>

#include "buffer.h"
#include "log.h"
#include "swarm-backend.h"

#define CHECK_TIMEOUT_MS 10000L

static int fail(char **ret_error, int r, const char *fmt, ...) _printf_(3, 4);
static int fail(char **ret_error, int r, const char *fmt, ...) {
        va_list ap;

        va_start(ap, fmt);
        if (vasprintf(ret_error, fmt, ap) < 0)
                *ret_error = NULL;
        va_end(ap);
        return r;
}

static size_t collect(char *data, size_t size, size_t n, void *userdata) {
        return buffer_append(userdata, data, size * n) < 0 ? 0 : size * n;
}

/* GET /info, once, before agentd's loop runs: a backend pointed at something that is no swarm
 * manager fails at load, with a message, instead of at every create. */
static int check_manager(const char *host, const char *cert_path, char **ret_default_runtime, char **ret_error) {
        _cleanup_buffer_ Buffer answer = BUFFER_NULL;
        _cleanup_free_ char *url = NULL, *ca = NULL, *cert = NULL, *key = NULL;
        json_t *info, *swarm;
        CURL *c = curl_easy_init();
        CURLcode res;
        long status = 0;
        const char *runtime;

        if (!c)
                return -ENOMEM;
        if (startswith(host, "tcp://")) {
                if (asprintf(&url, "%s://%s/info", cert_path ? "https" : "http", host + 6) < 0)
                        url = NULL;
                curl_easy_setopt(c, CURLOPT_NOPROXY, "*");
        } else {
                url = strdup("http://docker/info");
                curl_easy_setopt(c, CURLOPT_UNIX_SOCKET_PATH, startswith(host, "unix://"));
        }
        if (cert_path && (asprintf(&ca, "%s/ca.pem", cert_path) < 0 || asprintf(&cert, "%s/cert.pem", cert_path) < 0 ||
                          asprintf(&key, "%s/key.pem", cert_path) < 0)) {
                curl_easy_cleanup(c);
                return -ENOMEM;
        }
        if (cert_path) {
                curl_easy_setopt(c, CURLOPT_CAINFO, ca);
                curl_easy_setopt(c, CURLOPT_SSLCERT, cert);
                curl_easy_setopt(c, CURLOPT_SSLKEY, key);
        }
        curl_easy_setopt(c, CURLOPT_URL, url);
        curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, collect);
        curl_easy_setopt(c, CURLOPT_WRITEDATA, &answer);
        curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, CHECK_TIMEOUT_MS);
        res = url ? curl_easy_perform(c) : CURLE_OUT_OF_MEMORY;
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
        curl_easy_cleanup(c);
        if (res != CURLE_OK)
                return fail(ret_error, -EHOSTUNREACH, "%s=%s: cannot reach the swarm manager's Engine API: %s",
                            SWARM_HOST_ENV, host, curl_easy_strerror(res));
        info = status == 200 ? json_loadb((const char *) buffer_data(&answer), answer.len, 0, NULL) : NULL;
        if (!info)
                return fail(ret_error, -EPROTO, "%s=%s: GET /info answered HTTP %ld, not Docker's information",
                            SWARM_HOST_ENV, host, status);
        swarm = json_object_get(info, "Swarm");
        if (!json_is_true(json_object_get(swarm, "ControlAvailable"))) {
                fail(ret_error, -ENOTCONN,
                     "%s=%s: that Docker is no swarm manager (its swarm state is '%s'): point it at a manager, or "
                     "make one with `docker swarm init`", SWARM_HOST_ENV, host,
                     json_string_value(json_object_get(swarm, "LocalNodeState")) ?: "?");
                json_decref(info);
                return -ENOTCONN;
        }
        runtime = json_string_value(json_object_get(info, "DefaultRuntime"));
        *ret_default_runtime = strdup(runtime ?: "runc");
        json_decref(info);
        return *ret_default_runtime ? 0 : -ENOMEM;
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
                return fail(ret_error, -EINVAL, "%s is not set: name the swarm manager's Engine API (unix://PATH or "
                            "tcp://HOST:PORT)", SWARM_HOST_ENV);
        if (!startswith(host, "unix://") && !startswith(host, "tcp://"))
                return fail(ret_error, -EINVAL, "%s=%s: not unix://PATH or tcp://HOST:PORT", SWARM_HOST_ENV, host);
        if (cert_path && !startswith(host, "tcp://"))
                return fail(ret_error, -EINVAL, "%s is set, but %s=%s is no tcp:// address: TLS is for TCP only",
                            SWARM_CERT_PATH_ENV, SWARM_HOST_ENV, host);
        if (registry && (!registry[0] || strpbrk(registry, "/ \t@")))
                return fail(ret_error, -EINVAL, "%s=%s: not a registry's HOST[:PORT]", SWARM_REGISTRY_ENV, registry);
        r = docker_timeout_from_env(&timeout, ret_error);
        if (r < 0)
                return r;

        b = calloc(1, sizeof(*b));
        if (!b)
                return -ENOMEM;
        r = check_manager(host, cert_path, &b->default_runtime, ret_error);
        if (r < 0) {
                swarm_free(b);
                return r;
        }
        r = sd_event_default(&b->event);
        if (r >= 0)
                r = (b->host = strdup(host)) ? 0 : -ENOMEM;
        if (r >= 0 && registry)
                r = (b->registry = strdup(registry)) ? 0 : -ENOMEM;
        if (r >= 0)
                r = docker_client_new(b->event, host, &b->manager);
        if (r >= 0 && cert_path) {
                _cleanup_free_ char *ca = NULL, *cert = NULL, *key = NULL;
                if (asprintf(&ca, "%s/ca.pem", cert_path) < 0 || asprintf(&cert, "%s/cert.pem", cert_path) < 0 ||
                    asprintf(&key, "%s/key.pem", cert_path) < 0)
                        r = -ENOMEM;
                else
                        r = docker_client_set_tls(b->manager, ca, cert, key);
        }
        if (r >= 0)
                r = curl_event_new(b->event, &b->probes);
        if (r < 0) {
                swarm_free(b);
                return r;
        }
        if (timeout > 0)
                docker_client_set_timeout(b->manager, timeout);
        log_debug("Swarm manager at %s, default runtime %s%s%s.", host, b->default_runtime,
                  registry ? ", images from " : "", registry ?: "");
        *ret = b;
        return 0;
}

AGENTD_BACKEND_DEFINE(.abi = AGENTD_BACKEND_ABI,
                      .name = "swarm",
                      .new = swarm_new,
                      .free = swarm_free,
                      .create = swarm_create,
                      .cancel = swarm_cancel,
                      .remove = swarm_remove,
                      .adopt = swarm_adopt,
                      .watch = swarm_watch,
                      .runtimes = swarm_runtimes,
                      .logs = swarm_logs);

/* SPDX-License-Identifier: MIT */
#include <systemd/sd-daemon.h>

#include "agentd-errors.h"
#include "log.h"
#include "macro.h"
#include "manager.h"
#include "metrics-endpoint.h"
#include "strv.h"

int manager_new(sd_event *event, sd_bus *bus, AgentdConfig *config, Backend **backends, size_t n_backends,
                Manager **ret) {
        Manager *m = calloc(1, sizeof(*m));

        if (!m) {
                agentd_config_free(config);
                backends_free(backends, n_backends);
                return -ENOMEM;
        }
        m->config = config;
        m->backends = backends;
        m->n_backends = n_backends;
        for (size_t i = 0; i < n_backends; i++)
                backends[i]->owner = m;
        m->event = sd_event_ref(event);
        m->bus = sd_bus_ref(bus);
        m->sandboxes = strmap_new();
        if (!m->sandboxes) {
                manager_free(m);
                return -ENOMEM;
        }

        *ret = m;
        return 0;
}

Manager *manager_free(Manager *m) {
        Sandbox *s;
        size_t state = 0;

        if (!m)
                return NULL;
        while ((s = strmap_iterate(m->sandboxes, &state))) {
                (void) strmap_remove(m->sandboxes, s->id, strlen(s->id));
                sandbox_free(s);
                state = 0;
        }
        strmap_free(m->sandboxes);
        sd_event_source_disable_unref(m->reaper);
        backends_free(m->backends, m->n_backends);
        metrics_endpoint_free(m->metrics_endpoint);
        m->curl = curl_event_free(m->curl);
        m->runtime_ca = runtime_ca_free(m->runtime_ca);
        sd_bus_unref(m->bus);
        agentd_config_free(m->config);
        sd_event_unref(m->event);
        free(m);
        return NULL;
}

const char *manager_runtime_ca_pem(const Manager *m) {
        return m->runtime_ca ? runtime_ca_pem(m->runtime_ca) : NULL;
}

int manager_setup_tls(Manager *m, char **ret_error) {
        bool any = false;
        int r;

        for (size_t i = 0; i < m->n_backends; i++) {
                Backend *b = m->backends[i];

                b->tls = m->config->runtime_tls == RUNTIME_TLS_YES ||
                         (m->config->runtime_tls == RUNTIME_TLS_AUTO && b->ops && b->ops->remote_runtimes);
                any = any || b->tls;
        }
        if (!any)
                return 0;
        r = runtime_ca_open(runtime_ca_default_dir(), &m->runtime_ca, ret_error);
        if (r < 0)
                return r;
        for (size_t i = 0; i < m->n_backends; i++)
                if (m->backends[i]->tls)
                        m->backends[i]->runtime_ca_pem = runtime_ca_pem(m->runtime_ca);
        return 0;
}

Sandbox *manager_get_sandbox(Manager *m, const char *id) {
        return strmap_get(m->sandboxes, id, strlen(id));
}

int manager_add_sandbox(Manager *m, Sandbox *s) {
        int r = strmap_put(m->sandboxes, s->id, strlen(s->id), s);

        if (r >= 0)
                manager_notify_status(m);
        return r;
}

void manager_remove_sandbox(Manager *m, Sandbox *s) {
        if (strmap_get(m->sandboxes, s->id, strlen(s->id)) == s) {
                (void) strmap_remove(m->sandboxes, s->id, strlen(s->id));
                manager_notify_status(m);
        }
}

Sandbox *manager_find_sandbox(Manager *m, bool (*match)(Sandbox *s, void *userdata), void *userdata) {
        size_t state = 0;
        Sandbox *s;

        while ((s = strmap_iterate(m->sandboxes, &state)))
                if (match(s, userdata))
                        return s;
        return NULL;
}

uint64_t manager_count_sandboxes_of(Manager *m, uid_t uid) {
        size_t state = 0;
        uint64_t n = 0;
        Sandbox *s;

        while ((s = strmap_iterate(m->sandboxes, &state)))
                n += s->owner == uid;
        return n;
}

Backend *manager_get_backend(Manager *m, const char *name, sd_bus_error *error) {
        Backend *b = backends_find(m->backends, m->n_backends, name);

        if (!b) {
                _cleanup_free_ char *names = NULL;
                size_t len = 0;
                FILE *f = open_memstream(&names, &len);

                for (size_t i = 0; f && i < m->n_backends; i++)
                        fprintf(f, "%s%s", i ? ", " : "", m->backends[i]->name);
                if (f)
                        fclose(f);
                (void) sd_bus_error_setf(error, AGENTD_ERROR_BACKEND_UNAVAILABLE,
                                         "No backend '%s' here (this agentd loads: %s; see Load= in agentd.conf).", name,
                                         names ?: "");
                return NULL;
        }
        if (!b->state) {
                (void) sd_bus_error_setf(error, AGENTD_ERROR_BACKEND_UNAVAILABLE, "Backend '%s' did not load: %s", name,
                                         b->error ?: "unknown error");
                return NULL;
        }
        return b;
}

static bool strv_equal(char **a, char **b) {
        for (; a && *a && b && *b; a++, b++)
                if (!streq(*a, *b))
                        return false;
        return strv_isempty(a) && strv_isempty(b);
}

/* Keep the value in effect (swapped into the new configuration, the old one freed). */
#define KEEP_FOR_RESTART(field, equal, what)                                                       \
        do {                                                                                       \
                typeof(old->field) _t_ = old->field;                                               \
                if (!(equal))                                                                      \
                        log_notice("Reload: %s changed; agentd takes it at its next start.", what); \
                old->field = new->field;                                                           \
                new->field = _t_;                                                                  \
        } while (0)

int manager_reload(Manager *m, char **ret_error) {
        AgentdConfig *new = NULL, *old = m->config;
        int r;

        r = agentd_config_new(&new);
        if (r < 0)
                return r;
        r = agentd_config_load(new, m->config_path, ret_error);
        if (r < 0) {
                agentd_config_free(new);
                return r;
        }
        if (!backends_find(m->backends, m->n_backends, new->default_backend) ||
            !backends_find(m->backends, m->n_backends, new->default_backend)->state) {
                if (asprintf(ret_error, "%s (and its drop-ins): [Backends] Default=%s is not a backend this agentd "
                             "has loaded (a change of Load= needs a restart)", m->config_path, new->default_backend) < 0)
                        *ret_error = NULL;
                agentd_config_free(new);
                return -EINVAL;
        }
        /* The backends read these once, at load. */
        KEEP_FOR_RESTART(backends, strv_equal(old->backends, new->backends), "[Backends] Load=");
        KEEP_FOR_RESTART(backend_dir, streq(old->backend_dir, new->backend_dir), "[Backends] Directory=");
        KEEP_FOR_RESTART(backend_timeout_usec, old->backend_timeout_usec == new->backend_timeout_usec ||
                         m->timeout_from_command_line, "[Backends] Timeout=");
        KEEP_FOR_RESTART(docker_socket, streq_ptr(old->docker_socket, new->docker_socket), "[Docker] Socket=");
        KEEP_FOR_RESTART(network_shard_size, old->network_shard_size == new->network_shard_size,
                         "[Docker] NetworkShardSize=");
        KEEP_FOR_RESTART(podman_socket, streq_ptr(old->podman_socket, new->podman_socket), "[Podman] Socket=");
        KEEP_FOR_RESTART(swarm_host, streq_ptr(old->swarm_host, new->swarm_host), "[Swarm] Host=");
        KEEP_FOR_RESTART(swarm_cert_path, streq_ptr(old->swarm_cert_path, new->swarm_cert_path), "[Swarm] CertPath=");
        KEEP_FOR_RESTART(swarm_registry, streq_ptr(old->swarm_registry, new->swarm_registry), "[Swarm] Registry=");
        /* The endpoint listens once, at start. */
        KEEP_FOR_RESTART(metrics_listen, streq_ptr(old->metrics_listen, new->metrics_listen), "[Metrics] Listen=");
        m->config = new;
        agentd_config_free(old);
        return 0;
}

void manager_notify_status(Manager *m) {
        (void) sd_notifyf(false, "STATUS=%zu sandbox%s", strmap_size(m->sandboxes),
                          strmap_size(m->sandboxes) == 1 ? "" : "es");
}

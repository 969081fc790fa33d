/* SPDX-License-Identifier: MIT */
#include "agentd-errors.h"
#include "macro.h"
#include "manager.h"

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
                manager_remove_sandbox(m, s);
                sandbox_free(s);
                state = 0;
        }
        strmap_free(m->sandboxes);
        sd_event_source_disable_unref(m->reaper);
        backends_free(m->backends, m->n_backends);
        sd_bus_unref(m->bus);
        agentd_config_free(m->config);
        sd_event_unref(m->event);
        free(m);
        return NULL;
}

Sandbox *manager_get_sandbox(Manager *m, const char *id) {
        return strmap_get(m->sandboxes, id, strlen(id));
}

int manager_add_sandbox(Manager *m, Sandbox *s) {
        return strmap_put(m->sandboxes, s->id, strlen(s->id), s);
}

void manager_remove_sandbox(Manager *m, Sandbox *s) {
        if (strmap_get(m->sandboxes, s->id, strlen(s->id)) == s)
                (void) strmap_remove(m->sandboxes, s->id, strlen(s->id));
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

/* SPDX-License-Identifier: MIT */
#include "macro.h"
#include "manager.h"

int manager_new(sd_event *event, sd_bus *bus, DockerBackend *docker, Manager **ret) {
        Manager *m = calloc(1, sizeof(*m));

        if (!m)
                return -ENOMEM;
        m->event = sd_event_ref(event);
        m->bus = sd_bus_ref(bus);
        m->docker = docker;
        m->sandboxes = strmap_new();
        if (!m->sandboxes) {
                manager_free(m);
                return -ENOMEM;
        }
        /* Never unlimited (a fork bomb in a sandbox must not reach the host). */
        m->defaults = (SandboxLimits) { .cpus = 1.0, .memory = 2ULL << 30, .pids = 1024 };
        m->default_ttl_sec = 24 * 3600;
        m->max_sandboxes = 1024;
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
        sd_bus_unref(m->bus);
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

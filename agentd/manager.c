/* SPDX-License-Identifier: MIT */
#include <time.h>

#include "docker-backend.h"
#include "log.h"
#include "sandbox-dbus.h"
#include "macro.h"
#include "manager.h"
#include "sandbox.h"

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
        /* The containers stay: agentd's state is rebuilt from their labels. */
        while ((s = strmap_iterate(m->sandboxes, &state))) {
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

/* A sandbox's container changed outside agentd's own calls. */
static void on_docker_event(const char *id, const char *action, void *userdata) {
        Manager *m = userdata;
        Sandbox *s = manager_get_sandbox(m, id);

        if (!s || s->state == SANDBOX_CREATING || s->state == SANDBOX_REMOVING)
                return; /* not ours, or our own doing */
        if (streq(action, "die"))
                sandbox_set_state(s, SANDBOX_EXITED);
        else if (streq(action, "start"))
                sandbox_set_state(s, SANDBOX_RUNNING);
        else if (streq(action, "oom"))
                log_warning("Sandbox %s ran out of memory (its limit is %llu bytes).", s->id,
                            (unsigned long long) s->config->limits.memory);
        else if (streq(action, "destroy")) {
                log_info("Sandbox %s: its container was removed outside agentd.", s->id);
                sandbox_dbus_removed(s);
                sandbox_free(s);
        }
}

static int on_reaper(sd_event_source *es, uint64_t usec, void *userdata) {
        Manager *m = userdata;
        struct timespec ts;
        uint64_t now;
        bool again = true;

        clock_gettime(CLOCK_REALTIME, &ts);
        now = (uint64_t) ts.tv_sec * 1000000ULL + (uint64_t) ts.tv_nsec / 1000ULL;
        /* Deleting changes the map: start over after each one. */
        while (again) {
                size_t state = 0;
                Sandbox *s;

                again = false;
                while ((s = strmap_iterate(m->sandboxes, &state)))
                        if (s->expires_at <= now && s->state != SANDBOX_REMOVING) {
                                log_info("Sandbox %s expired: deleting it.", s->id);
                                (void) sandbox_delete(s, NULL);
                                if (manager_get_sandbox(m, s->id) == s && s->state != SANDBOX_REMOVING)
                                        /* Docker would not remove it now: try again in a minute. */
                                        s->expires_at = now + 60 * 1000000ULL;
                                again = true;
                                break;
                        }
        }
        manager_schedule_reaper(m);
        return 0;
}

void manager_schedule_reaper(Manager *m) {
        uint64_t next = UINT64_MAX;
        size_t state = 0;
        Sandbox *s;

        while ((s = strmap_iterate(m->sandboxes, &state)))
                if (s->state != SANDBOX_REMOVING && s->expires_at < next)
                        next = s->expires_at;
        if (next == UINT64_MAX) {
                if (m->reaper)
                        (void) sd_event_source_set_enabled(m->reaper, SD_EVENT_OFF);
                return;
        }
        if (!m->reaper) {
                if (sd_event_add_time(m->event, &m->reaper, CLOCK_REALTIME, next, 100 * 1000, on_reaper, m) < 0)
                        log_warning("Cannot arm the reaper of expired sandboxes.");
                return;
        }
        (void) sd_event_source_set_time(m->reaper, next);
        (void) sd_event_source_set_enabled(m->reaper, SD_EVENT_ONESHOT);
}

int manager_start(Manager *m) {
        return docker_backend_watch(m->docker, on_docker_event, m);
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

/* SPDX-License-Identifier: MIT */
#pragma once

/* agentd's state: the sandboxes it owns, by id, the bus it serves them on, the backend that
 * runs them, and the defaults every create starts from. What happens to the sandboxes is
 * lifecycle.c; the manager's D-Bus face manager-dbus.c. */

#include <systemd/sd-bus.h>
#include <systemd/sd-event.h>

#include "agentd-bus.h"
#include "sandbox.h"
#include "strmap.h"

typedef struct DockerBackend DockerBackend;

typedef struct Manager {
        sd_event *event;
        sd_bus *bus;
        DockerBackend *docker;
        StrMap *sandboxes;        /* id -> Sandbox */
        SandboxLimits defaults;
        uint64_t default_ttl_sec;
        unsigned max_sandboxes;
        sd_event_source *reaper;  /* fires at the earliest ExpiresAt */
} Manager;

int manager_new(sd_event *event, sd_bus *bus, DockerBackend *docker, Manager **ret);
/* Frees the records (the containers stay: agentd's state is rebuilt from their labels). */
Manager *manager_free(Manager *m);

Sandbox *manager_get_sandbox(Manager *m, const char *id);
/* -EEXIST when the id is taken. */
int manager_add_sandbox(Manager *m, Sandbox *s);
void manager_remove_sandbox(Manager *m, Sandbox *s);

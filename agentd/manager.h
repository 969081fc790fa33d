/* SPDX-License-Identifier: MIT */
#pragma once

/* agentd's state: the sandboxes it owns, by id, the bus it serves them on, the backend that
 * runs them, and the defaults every create starts from. Its D-Bus face is manager-dbus.c. */

#include <systemd/sd-bus.h>
#include <systemd/sd-event.h>

#include "sandbox-config.h"
#include "strmap.h"

#define MANAGER_PATH "/org/agentix/Agentd1"
#define SANDBOX_PATH_PREFIX "/org/agentix/Agentd1/sandbox"
#define BUS_NAME "org.agentix.Agentd1"
#define MANAGER_INTERFACE "org.agentix.Agentd1.Manager"
#define SANDBOX_INTERFACE "org.agentix.Agentd1.Sandbox"

typedef struct DockerBackend DockerBackend;
typedef struct Sandbox Sandbox;

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
Manager *manager_free(Manager *m);

Sandbox *manager_get_sandbox(Manager *m, const char *id);
int manager_add_sandbox(Manager *m, Sandbox *s);
void manager_remove_sandbox(Manager *m, Sandbox *s);

/* A sandbox's ExpiresAt was set or moved: re-arm the reaper that deletes expired sandboxes. */
void manager_schedule_reaper(Manager *m);

/* Follow the backend's events (sandbox state). */
int manager_start(Manager *m);

/* Publish the objects on the bus (vtables, node enumerator). */
int manager_dbus_register(Manager *m);

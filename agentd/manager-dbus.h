/* SPDX-License-Identifier: MIT */
#pragma once

/* The manager's D-Bus face: org.agentix.Agentd1.Manager at /org/agentix/Agentd1, and the
 * registration of the sandbox objects (sandbox-dbus.c). */

#include "manager.h"

int manager_dbus_register(Manager *m);

/* Reload agentd.conf (manager_reload()) as SIGHUP and Manager.Reload() ask: tell the service
 * manager (RELOADING=1, then READY=1), log the outcome in one line, and announce the properties
 * that may have changed. On a bad file nothing changes and error says why. */
int manager_dbus_reload(Manager *m, sd_bus_error *error);

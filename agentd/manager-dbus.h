/* SPDX-License-Identifier: MIT */
#pragma once

/* The manager's D-Bus face: org.agentix.Agentd1.Manager at /org/agentix/Agentd1, and the
 * registration of the sandbox objects (sandbox-dbus.c). */

#include "manager.h"

int manager_dbus_register(Manager *m);

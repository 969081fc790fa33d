/* SPDX-License-Identifier: MIT */
#pragma once

/* agentd's names on the bus (org.agentix.Agentd1(5)). */

#define BUS_NAME "org.agentix.Agentd1"
#define MANAGER_PATH "/org/agentix/Agentd1"
#define SANDBOX_PATH_PREFIX "/org/agentix/Agentd1/sandbox"
#define MANAGER_INTERFACE "org.agentix.Agentd1.Manager"
#define SANDBOX_INTERFACE "org.agentix.Agentd1.Sandbox"

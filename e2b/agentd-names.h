/* SPDX-License-Identifier: MIT */
#pragma once

/* agentd's names on the bus (org.agentix.Agentd1(5)), as the gateway calls them. */

#define AGENTD_NAME "org.agentix.Agentd1"
#define MANAGER_PATH "/org/agentix/Agentd1"
#define MANAGER_IFACE "org.agentix.Agentd1.Manager"
#define SANDBOX_IFACE "org.agentix.Agentd1.Sandbox"
#define AGENTD_ERROR(name) "org.agentix.Agentd1." name

/* SPDX-License-Identifier: MIT */
#pragma once

/* A sandbox's D-Bus face: /org/agentix/Agentd1/sandbox/<id>, interface
 * org.agentix.Agentd1.Sandbox (properties, Delete, Extend), found through a fallback vtable
 * whose userdata is the Manager, and listed by a node enumerator. */

#include "manager.h"

extern const sd_bus_vtable sandbox_vtable[];

int sandbox_object_find(sd_bus *bus, const char *path, const char *interface, void *userdata, void **found,
                        sd_bus_error *error);
int sandbox_node_enumerator(sd_bus *bus, const char *path, void *userdata, char ***nodes, sd_bus_error *error);

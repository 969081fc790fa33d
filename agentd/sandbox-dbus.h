/* SPDX-License-Identifier: MIT */
#pragma once

/* A sandbox's D-Bus face: /org/agentix/Agentd1/sandbox/<id>, interface
 * org.agentix.Agentd1.Sandbox (properties, Delete, Extend), found through a fallback vtable
 * and listed by a node enumerator. */

#include "sandbox.h"

extern const sd_bus_vtable sandbox_vtable[];

int sandbox_object_find(sd_bus *bus, const char *path, const char *interface, void *userdata, void **found,
                        sd_bus_error *error);
int sandbox_node_enumerator(sd_bus *bus, const char *path, void *userdata, char ***nodes, sd_bus_error *error);

/* The caller may act on s: its owner, or root. Sets NotOwner otherwise. */
int sandbox_check_caller(Sandbox *s, sd_bus_message *m, sd_bus_error *error);

/* Signals: SandboxNew, SandboxRemoved, and PropertiesChanged for State. */
void sandbox_dbus_new(Sandbox *s);
void sandbox_dbus_removed(Sandbox *s);
void sandbox_dbus_state_changed(Sandbox *s);

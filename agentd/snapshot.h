/* SPDX-License-Identifier: MIT */
#pragma once

/* Snapshots of sandboxes (snapshot.c): taken through the sandbox's backend, listed and deleted
 * over every backend that keeps them. Each answers its D-Bus call itself (returns 1), or
 * returns < 0 (error set) before anything was asked. */

#include <systemd/sd-bus.h>

#include "manager.h"

/* Sandbox.Snapshot(): image NULL for the backend's own name. */
int snapshot_take(Manager *m, Sandbox *s, const char *image, sd_bus_message *call, sd_bus_error *error);
/* Manager.ListSnapshots() for uid: its own snapshots, root everyone's. */
int snapshot_list(Manager *m, uid_t uid, sd_bus_message *call);
/* Manager.DeleteSnapshot(image) for uid (NotOwner for another user's, unless root). */
int snapshot_delete(Manager *m, const char *image, uid_t uid, sd_bus_message *call);

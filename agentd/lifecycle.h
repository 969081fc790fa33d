/* SPDX-License-Identifier: MIT */
#pragma once

/* What happens to sandboxes: created through the backend (answered when the runtime answers
 * /health, after the setup command), deleted on request, at expiry, when the creator leaves
 * the bus (bind_to_caller) or when Docker removed the container; state kept in step with
 * Docker's events; SandboxNew, SandboxRemoved and PropertiesChanged sent on the way. */

#include "manager.h"

/* Start creating a sandbox from config (taken) for the CreateSandbox call (answered later). */
int lifecycle_create(Manager *m, SandboxConfig *config, uid_t owner, sd_bus_message *call, sd_bus_error *error);
/* Remove its container, then the sandbox; call (may be NULL) is answered then. */
int lifecycle_delete(Manager *m, Sandbox *s, sd_bus_message *call);
/* Freeze (pause) or thaw a running sandbox's processes through its backend; call is answered
 * once done (1), or error is set (< 0). Its TTL keeps running while it is paused. */
int lifecycle_pause(Manager *m, Sandbox *s, bool pause, sd_bus_message *call, sd_bus_error *error);
/* Move ExpiresAt later, not beyond now + MaxTTL (InvalidConfig). */
int lifecycle_extend(Manager *m, Sandbox *s, uint64_t seconds, sd_bus_error *error);
/* The sandbox expires `seconds` from now (sooner or later than it would have), within MaxTTL=. */
int lifecycle_set_ttl(Manager *m, Sandbox *s, uint64_t seconds, sd_bus_error *error);

/* Adopt the sandboxes an earlier agentd left in Docker (their labels say whose they are and
 * until when), remove the half-made (never started) and the expired ones, then follow the
 * backend's events. m->on_ready (if set) is called once every backend has been looked at
 * (adopted, or it could not say within its timeout): agentd takes its bus name then, so that
 * no client sees a restarted agentd without the sandboxes it is about to adopt. */
int lifecycle_start(Manager *m);
/* agentd is asked to stop and agentd.conf says DeleteOnStop=yes: delete every sandbox, and leave
 * the event loop once none is left or after timeout_usec. 0 when there is nothing to delete
 * (leave now). */
int lifecycle_delete_all_then_exit(Manager *m, uint64_t timeout_usec);
/* Stop every job in flight and free the pools' records (before manager_free()). */
void lifecycle_stop(Manager *m);

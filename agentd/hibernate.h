/* SPDX-License-Identifier: MIT */
#pragma once

/* Hibernate and wake a sandbox (org.agentix.Agentd1(5): Sandbox.Hibernate(), Resume()).
 *
 * Hibernate: its runtime is asked to hold still (runtime-hold.h), then its backend saves its
 * processes, memory and files and stops it (hibernate()); state `hibernated`. A runtime that
 * cannot hold still (a TCP connection gVisor cannot save) leaves the sandbox as it was:
 * CheckpointFailed, naming the connections. A failed save has its backend run the sandbox again
 * (wake()), and the caller hears CheckpointFailed with what happened.
 *
 * Resume of a hibernated sandbox: its backend runs it from its checkpoint (wake()), within the
 * owner's memory and CPU quotas, which do not count it while it is hibernated; state `running`
 * again, RuntimeUrl as the backend says (PropertiesChanged when it changed). A call that needs
 * its runtime (GetRuntimeAccess, GetPortUrl) does the same first, and waits.
 *
 * One such operation per sandbox at a time (s->live): Pause, Snapshot, another Hibernate or
 * Resume meanwhile are InUse; a Delete meanwhile wins (the operation's caller hears so). */

#include <systemd/sd-bus.h>

#include "manager.h"

/* Start hibernating s for call (answered later: 1), or set error (< 0). */
int hibernate_start(Manager *m, Sandbox *s, sd_bus_message *call, sd_bus_error *error);
/* s expired (now: CLOCK_REALTIME µs): with OnExpiry=hibernate, and when s can, it hibernates
 * (deleted when that fails) and expires again HibernatedRetention= from now; a sandbox being
 * hibernated or resumed is looked at again in a minute. true: taken care of (its expires_at
 * moved; delete() deletes it if its hibernation fails); false: delete it now. */
typedef void (*hibernate_delete_t)(Manager *m, Sandbox *s);
bool hibernate_on_expiry(Manager *m, Sandbox *s, uint64_t now, hibernate_delete_t delete);
/* Start running hibernated s again for call (answered later: 1), or set error (< 0). */
int hibernate_wake(Manager *m, Sandbox *s, sd_bus_message *call, sd_bus_error *error);
/* Answer call now that s runs (a GetRuntimeAccess(), say). */
typedef int (*hibernate_answer_t)(Sandbox *s, sd_bus_message *call);
/* A call that needs s's runtime: when s is hibernated, it runs again from its checkpoint first
 * (auto-resume; within its owner's quotas), and answer() answers call once it does; when s is
 * being hibernated or resumed, once that is over (and it ran again). 1: call waits (answered
 * later); 0: nothing to wait for, answer it now; < 0 with error set. */
int hibernate_wait_running(Manager *m, Sandbox *s, sd_bus_message *call, hibernate_answer_t answer,
                           sd_bus_error *error);
/* s goes (deleted, or removed outside agentd): its operation's caller is told, and what the
 * backend still does for it finds no sandbox when it ends. */
void hibernate_drop(Sandbox *s);

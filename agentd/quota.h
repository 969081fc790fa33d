/* SPDX-License-Identifier: MIT */
#pragma once

/* Per-user quotas (quota-config.h) against what a user holds: checked at each create (a claim
 * from a warm pool included) and each snapshot, answered by Manager.GetUsage(). agentd runs
 * one event loop and registers a sandbox the moment its create is accepted, so a check and
 * the count it is checked against cannot race: 20 creates at once against MaxSandboxes=5
 * make 5. Root has no quota. */

#include <systemd/sd-bus.h>

#include "manager.h"

#define AGENTD_ERROR_QUOTA_EXCEEDED AGENTD_ERROR_PREFIX "Error.QuotaExceeded"

typedef struct QuotaUsage {
        uint64_t sandboxes;      /* every sandbox of theirs agentd holds, creating ones included */
        double cpus;             /* the sum of their CPUs */
        uint64_t memory;         /* the sum of their memory limits */
        uint64_t hibernated;     /* hibernated, or being hibernated */
} QuotaUsage;

/* uid's quotas as the configuration in use says them; a negative errno when they cannot be
 * known (its name cannot be looked up): then nothing is allowed that a quota would bound. */
int quota_of(Manager *m, uid_t uid, Quotas *ret);
QuotaUsage quota_usage_of(Manager *m, uid_t uid);

/* Would a create of config by owner pass one of owner's quotas? Then QuotaExceeded, naming the
 * quota, what was asked and what is in use, and -EDQUOT; else 0. */
int quota_check_create(Manager *m, uid_t owner, const SandboxConfig *config, sd_bus_error *error);
/* The same for a hibernated sandbox of its owner's to run again (its memory and CPUs count
 * again; it is in the count of sandboxes already). */
int quota_check_wake(Manager *m, const Sandbox *s, sd_bus_error *error);

/* Would hibernating s pass the host's MaxHibernated= (TooManySandboxes) or its owner's
 * [Quotas] MaxHibernated= (QuotaExceeded)? Then -EDQUOT with error set; else 0. */
int quota_check_hibernate(Manager *m, const Sandbox *s, sd_bus_error *error);

/* The error for a snapshot past MaxSnapshots= (have: the owner's snapshots now). */
int quota_snapshots_exceeded(sd_bus_message *call, uid_t owner, uint64_t have, uint64_t max);

/* Manager.GetUsage() for uid: usage and quotas as a{sv}; the snapshots are counted over the
 * backends that keep them, so the answer comes later (returns 1). */
int quota_usage_reply(Manager *m, uid_t uid, sd_bus_message *call);

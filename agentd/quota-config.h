/* SPDX-License-Identifier: MIT */
#pragma once

/* Per-user quotas as agentd.conf says them: [Quotas] in agentd.conf and its drop-ins, the
 * defaults for every user, and agentd.conf.d/users/NAME.conf (NAME a user name or a uid), one
 * user's own [Quotas] over them, key by key. agentd.conf(5) documents them:
 *   MaxSandboxes=  live sandboxes (creating and claimed ones included; warm pool members are
 *                  no one's until claimed)
 *   MaxCPUs=       the sum of their CPUs
 *   MaxMemory=     the sum of their memory limits
 *   MaxSnapshots=  snapshots (root has no such quota)
 *   MaxHibernated= hibernated sandboxes (root has no such quota)
 * "infinity" (the default) for none. They come on top of [Sandboxes] MaxSandboxesPerUser= and
 * MaxSnapshotsPerUser=, one bound for every user alike; a quota is the operator's per user, and
 * passing one is QuotaExceeded (agentd-errors.h). */

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#define QUOTA_MAX_USER_FILES 4096

typedef struct Quotas {
        uint64_t max_sandboxes;  /* AGENTD_UNLIMITED: none */
        double max_cpus;         /* 0: none */
        uint64_t max_memory;     /* AGENTD_UNLIMITED: none */
        uint64_t max_snapshots;  /* AGENTD_UNLIMITED: none */
        uint64_t max_hibernated; /* AGENTD_UNLIMITED: none */
} Quotas;

/* One user's file: what it sets, over the defaults. */
typedef struct UserQuotas {
        char *user;              /* NAME of users/NAME.conf */
        Quotas quotas;
        bool set[5];             /* MaxSandboxes, MaxCPUs, MaxMemory, MaxSnapshots, MaxHibernated given */
} UserQuotas;

/* A [Quotas] key into q (set: which were given, may be NULL). 1 when taken; 0 with *ret_error
 * (malloc'ed) naming the key for a bad value or an unknown key. */
int quota_key(Quotas *q, bool set[5], const char *key, const char *value, char **ret_error);

/* Every dir/ *.conf (a missing dir: none), each [Quotas] only. On a bad file *ret_error says
 * "FILE:LINE: what" and -EINVAL is returned; a file (or dir) another user than root may write,
 * or not a regular file, is -EPERM, named likewise. */
int user_quotas_load_dir(const char *dir, UserQuotas ***ret, size_t *ret_n, char **ret_error);
void user_quotas_free(UserQuotas **l, size_t n);

/* The quotas of uid: the defaults, with its file's keys over them (found by its name, or by
 * the uid itself). A negative errno when its name cannot be looked up (and a file names a
 * user): the caller refuses rather than apply the defaults. */
int quotas_for(const Quotas *defaults, UserQuotas *const *users, size_t n_users, uid_t uid, Quotas *ret);

/* defaults with u's keys over them. */
Quotas quotas_apply(const Quotas *defaults, const UserQuotas *u);

/* [Quotas] as a key file. */
void quotas_format(const Quotas *q, FILE *out);

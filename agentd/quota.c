/* SPDX-License-Identifier: MIT */
#include <pwd.h>

#include "backend.h"
#include "log.h"
#include "macro.h"
#include "quota.h"
#include "strmap.h"

int quota_of(Manager *m, uid_t uid, Quotas *ret) {
        const AgentdConfig *c = m->config;

        return quotas_for(&c->quotas, c->user_quotas, c->n_user_quotas, uid, ret);
}

QuotaUsage quota_usage_of(Manager *m, uid_t uid) {
        QuotaUsage u = {};
        size_t state = 0;
        Sandbox *s;

        while ((s = strmap_iterate(m->sandboxes, &state))) {
                if (s->owner != uid)
                        continue;
                u.sandboxes++;
                if (sandbox_hibernate_counted(s))
                        u.hibernated++;
                /* A hibernated sandbox holds no memory and no CPU, only its place in the count;
                 * one being run again holds them already. */
                if (s->config && (s->state != SANDBOX_HIBERNATED || sandbox_live_in_progress(s))) {
                        u.cpus += s->config->limits.cpus;
                        /* Saturated: an unlimited [Limits] MaxMemory= lets sizes near 2^64. */
                        u.memory = u.memory > UINT64_MAX - s->config->limits.memory ? UINT64_MAX
                                                                                     : u.memory + s->config->limits.memory;
                }
        }
        return u;
}

/* "uid 1001 (alice)": who a message is about. */
static void who(uid_t uid, char buf[static 96]) {
        struct passwd pw, *pwp = NULL;
        char pwbuf[2048];

        if (getpwuid_r(uid, &pw, pwbuf, sizeof(pwbuf), &pwp) == 0 && pwp)
                snprintf(buf, 96, "uid %u (%s)", (unsigned) uid, pwp->pw_name);
        else
                snprintf(buf, 96, "uid %u", (unsigned) uid);
}

#define WHERE "agentd.conf [Quotas], or the user's agentd.conf.d/users/NAME.conf"

/* Would a sandbox of config fit owner's quotas, as a new one (one more in the count) or as a
 * hibernated one of theirs brought back (counted already)? */
static int check(Manager *m, uid_t owner, const SandboxConfig *config, bool new_sandbox, sd_bus_error *error) {
        Quotas q;
        QuotaUsage u;
        char name[96];
        int r;

        if (owner == 0)
                return 0;
        r = quota_of(m, owner, &q);
        if (r < 0)
                return sd_bus_error_set_errnof(error, r, "Cannot look up the name of uid %u, which its quotas may "
                                               "depend on (agentd.conf.d/users/NAME.conf): %m", (unsigned) owner), r;
        if (q.max_sandboxes == AGENTD_UNLIMITED && q.max_cpus <= 0 && q.max_memory == AGENTD_UNLIMITED)
                return 0;
        u = quota_usage_of(m, owner);
        who(owner, name);
        if (new_sandbox && q.max_sandboxes != AGENTD_UNLIMITED && u.sandboxes + 1 > q.max_sandboxes)
                return sd_bus_error_setf(error, AGENTD_ERROR_QUOTA_EXCEEDED,
                                         "Quota MaxSandboxes=%llu of %s: it has %llu sandboxes, one more is past it (" WHERE
                                         "): delete one first.", (unsigned long long) q.max_sandboxes, name,
                                         (unsigned long long) u.sandboxes), -EDQUOT;
        /* A hundredth of a CPU is the unit: sums of doubles are not exact. */
        if (q.max_cpus > 0 && u.cpus + config->limits.cpus > q.max_cpus + 0.005)
                return sd_bus_error_setf(error, AGENTD_ERROR_QUOTA_EXCEEDED,
                                         "Quota MaxCPUs=%g of %s: the sandbox asks for %g CPUs, %g of %g are in use (" WHERE
                                         ").", q.max_cpus, name, config->limits.cpus, u.cpus, q.max_cpus), -EDQUOT;
        /* Without the sum, which could wrap around. */
        if (q.max_memory != AGENTD_UNLIMITED &&
            (config->limits.memory > q.max_memory || u.memory > q.max_memory - config->limits.memory))
                return sd_bus_error_setf(error, AGENTD_ERROR_QUOTA_EXCEEDED,
                                         "Quota MaxMemory=%lluM of %s: the sandbox asks for %lluM of memory, %lluM of %lluM "
                                         "are in use (" WHERE ").", (unsigned long long) (q.max_memory >> 20), name,
                                         (unsigned long long) (config->limits.memory >> 20),
                                         (unsigned long long) (u.memory >> 20), (unsigned long long) (q.max_memory >> 20)),
                       -EDQUOT;
        return 0;
}

int quota_check_create(Manager *m, uid_t owner, const SandboxConfig *config, sd_bus_error *error) {
        return check(m, owner, config, true, error);
}

int quota_check_wake(Manager *m, const Sandbox *s, sd_bus_error *error) {
        return check(m, s->owner, s->config, false, error);
}

int quota_check_hibernate(Manager *m, const Sandbox *s, sd_bus_error *error) {
        size_t state = 0, host = 0;
        const Sandbox *o;
        char name[96];
        Quotas q;
        QuotaUsage u;
        int r;

        while ((o = strmap_iterate(m->sandboxes, &state)))
                if (sandbox_hibernate_counted(o))
                        host++;
        if (m->config->max_hibernated != AGENTD_UNLIMITED && host + 1 > m->config->max_hibernated)
                return sd_bus_error_setf(error, AGENTD_ERROR_TOO_MANY_SANDBOXES,
                                         "This host keeps at most %llu hibernated sandboxes (MaxHibernated= in agentd.conf "
                                         "[Sandboxes]), and has %zu.", (unsigned long long) m->config->max_hibernated,
                                         host), -EDQUOT;
        if (s->owner == 0)
                return 0;
        r = quota_of(m, s->owner, &q);
        if (r < 0)
                return sd_bus_error_set_errnof(error, r, "Cannot look up the name of uid %u, which its quotas may "
                                               "depend on (agentd.conf.d/users/NAME.conf): %m", (unsigned) s->owner), r;
        u = quota_usage_of(m, s->owner);
        if (q.max_hibernated != AGENTD_UNLIMITED && u.hibernated + 1 > q.max_hibernated) {
                who(s->owner, name);
                return sd_bus_error_setf(error, AGENTD_ERROR_QUOTA_EXCEEDED,
                                         "Quota MaxHibernated=%llu of %s: it has %llu hibernated sandboxes, one more is "
                                         "past it (" WHERE "): resume or delete one first.",
                                         (unsigned long long) q.max_hibernated, name, (unsigned long long) u.hibernated),
                       -EDQUOT;
        }
        return 0;
}

int quota_snapshots_exceeded(sd_bus_message *call, uid_t owner, uint64_t have, uint64_t max) {
        char name[96];

        who(owner, name);
        return sd_bus_reply_method_errorf(call, AGENTD_ERROR_QUOTA_EXCEEDED,
                                          "Quota MaxSnapshots=%llu of %s: it has %llu snapshots (those being taken "
                                          "included), one more is past it (" WHERE
                                          "): delete one with DeleteSnapshot().", (unsigned long long) max, name,
                                          (unsigned long long) have);
}

/* ---- GetUsage() ---------------------------------------------------------------------------- */

typedef struct UsageCall {
        Manager *manager;
        sd_bus_message *call;
        uid_t uid;
        uint64_t snapshots;
        bool snapshots_known;   /* some backend counted them */
        unsigned pending;
} UsageCall;

static int append_limit(sd_bus_message *reply, const char *key, uint64_t v) {
        return v == AGENTD_UNLIMITED ? 0 : sd_bus_message_append(reply, "{sv}", key, "t", v);
}

static void usage_unref(UsageCall *c) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        Quotas q;
        QuotaUsage u;
        int r;

        if (--c->pending > 0)
                return;
        q = (Quotas) { AGENTD_UNLIMITED, 0, AGENTD_UNLIMITED, AGENTD_UNLIMITED, AGENTD_UNLIMITED };
        r = c->uid == 0 ? 0 : quota_of(c->manager, c->uid, &q);
        u = quota_usage_of(c->manager, c->uid);
        if (r >= 0)
                r = sd_bus_message_new_method_return(c->call, &reply);
        if (r >= 0)
                r = sd_bus_message_open_container(reply, 'a', "{sv}");
        if (r >= 0)
                r = sd_bus_message_append(reply, "{sv}{sv}{sv}{sv}", "uid", "u", (uint32_t) c->uid, "sandboxes", "t",
                                       u.sandboxes, "cpus", "d", u.cpus, "memory", "t", u.memory);
        if (r >= 0)
                r = sd_bus_message_append(reply, "{sv}", "hibernated", "t", u.hibernated);
        if (r >= 0 && c->snapshots_known)
                r = sd_bus_message_append(reply, "{sv}", "snapshots", "t", c->snapshots);
        if (r >= 0)
                r = append_limit(reply, "max_sandboxes", q.max_sandboxes);
        if (r >= 0 && q.max_cpus > 0)
                r = sd_bus_message_append(reply, "{sv}", "max_cpus", "d", q.max_cpus);
        if (r >= 0)
                r = append_limit(reply, "max_memory", q.max_memory);
        if (r >= 0)
                r = append_limit(reply, "max_snapshots", q.max_snapshots);
        if (r >= 0)
                r = append_limit(reply, "max_hibernated", q.max_hibernated);
        if (r >= 0)
                r = sd_bus_message_close_container(reply);
        if (r >= 0)
                (void) sd_bus_send(NULL, reply, NULL);
        else
                (void) sd_bus_reply_method_errno(c->call, r, NULL);
        sd_bus_message_unref(c->call);
        free(c);
}

static void on_snapshots(void *userdata, const AgentdSnapshot *list, size_t n, const char *error_name,
                         const char *message) {
        UsageCall *c = userdata;

        if (error_name)
                log_warning("A backend could not list its snapshots: %s", message ?: error_name);
        else
                c->snapshots_known = true;
        for (size_t i = 0; i < n; i++)
                c->snapshots += list[i].owner == c->uid;
        usage_unref(c);
}

int quota_usage_reply(Manager *m, uid_t uid, sd_bus_message *call) {
        UsageCall *c = calloc(1, sizeof(*c));

        if (!c)
                return -ENOMEM;
        *c = (UsageCall) { .manager = m, .call = sd_bus_message_ref(call), .uid = uid, .pending = 1 };
        for (size_t i = 0; i < m->n_backends; i++) {
                Backend *b = m->backends[i];

                if (!b->state || !b->ops->snapshots)
                        continue;
                c->pending++;
                if (b->ops->snapshots(b->state, on_snapshots, c) < 0)
                        c->pending--;
        }
        usage_unref(c); /* its own reference: answered now if no backend was asked */
        return 1;
}

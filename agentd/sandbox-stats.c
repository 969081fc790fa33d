/* SPDX-License-Identifier: MIT */
#include "agentd-errors.h"
#include "backend.h"
#include "log.h"
#include "macro.h"
#include "manager.h"
#include "sandbox-stats.h"

typedef struct StatsCall {
        Manager *manager;
        sd_bus_message *call;
        char sandbox_id[32];
} StatsCall;

/* One t entry; AGENTD_STATS_UNKNOWN: none. */
static int append_t(sd_bus_message *reply, const char *key, uint64_t v) {
        if (v == AGENTD_STATS_UNKNOWN)
                return 0;
        return sd_bus_message_append(reply, "{sv}", key, "t", v);
}

static double cpu_percent(SandboxStatsSample *last, uint64_t created_at, const AgentdSandboxStats *s) {
        uint64_t since = last->time ?: created_at, used = last->time ? last->cpu_usec : 0;
        double p = 0;

        if (s->time > since && s->cpu_usec >= used)
                p = (double) (s->cpu_usec - used) * 100.0 / (double) (s->time - since);
        *last = (SandboxStatsSample) { .time = s->time, .cpu_usec = s->cpu_usec };
        return p;
}

static void on_stats(void *userdata, const AgentdSandboxStats *st, const char *error_name, const char *message) {
        _cleanup_free_ StatsCall *c = userdata;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *call = c->call, *reply = NULL;
        Sandbox *s;
        int r;

        if (error_name) {
                (void) sd_bus_reply_method_errorf(call, error_name, "%s", message ?: "The backend gave no reason");
                return;
        }
        r = sd_bus_message_new_method_return(call, &reply);
        if (r >= 0)
                r = sd_bus_message_open_container(reply, 'a', "{sv}");
        if (r >= 0)
                r = append_t(reply, "time", st->time);
        if (r >= 0 && st->cpu_usec != AGENTD_STATS_UNKNOWN) {
                /* The sandbox may have gone while the backend read: then no interval is kept. */
                s = manager_get_sandbox(c->manager, c->sandbox_id);
                SandboxStatsSample scratch = {};

                r = append_t(reply, "cpu_usec", st->cpu_usec);
                if (r >= 0)
                        r = sd_bus_message_append(reply, "{sv}", "cpu_percent", "d",
                                                  cpu_percent(s ? &s->stats_sample : &scratch, s ? s->created_at : 0, st));
        }
        if (r >= 0)
                r = append_t(reply, "memory_current", st->memory_current);
        if (r >= 0)
                r = append_t(reply, "memory_peak", st->memory_peak);
        if (r >= 0)
                r = append_t(reply, "memory_limit", st->memory_limit);
        if (r >= 0)
                r = append_t(reply, "pids_current", st->pids_current);
        if (r >= 0)
                r = append_t(reply, "pids_limit", st->pids_limit);
        if (r >= 0)
                r = append_t(reply, "net_rx_bytes", st->net_rx_bytes);
        if (r >= 0)
                r = append_t(reply, "net_tx_bytes", st->net_tx_bytes);
        if (r >= 0)
                r = append_t(reply, "io_read_bytes", st->io_read_bytes);
        if (r >= 0)
                r = append_t(reply, "io_write_bytes", st->io_write_bytes);
        if (r >= 0)
                r = sd_bus_message_close_container(reply);
        if (r >= 0)
                r = sd_bus_send(NULL, reply, NULL);
        if (r < 0) {
                log_warning_errno(r, "Cannot answer GetStats() of sandbox %s: %m", c->sandbox_id);
                (void) sd_bus_reply_method_errno(call, r, NULL);
        }
}

int sandbox_stats_reply(Manager *m, Sandbox *s, sd_bus_message *call, sd_bus_error *error) {
        StatsCall *c;
        int r;

        if (s->state != SANDBOX_RUNNING && s->state != SANDBOX_PAUSED)
                return sd_bus_error_setf(error, AGENTD_ERROR_NOT_RUNNING, "Sandbox %s is %s: it uses nothing.", s->id,
                                         sandbox_state_to_string(s->state));
        if (!s->backend->ops->stats && s->state == SANDBOX_PAUSED)
                return sd_bus_error_setf(error, AGENTD_ERROR_BACKEND_UNAVAILABLE,
                                         "Sandbox %s is paused: the %s backend reads no usage, and its runtime, "
                                         "which does, is frozen with it.", s->id, s->backend->name);
        c = calloc(1, sizeof(*c));
        if (!c)
                return -ENOMEM;
        *c = (StatsCall) { .manager = m, .call = sd_bus_message_ref(call) };
        snprintf(c->sandbox_id, sizeof(c->sandbox_id), "%s", s->id);
        r = sandbox_read_stats(m->event, s, on_stats, c);
        if (r == -EBUSY) {
                sd_bus_message_unref(c->call);
                free(c);
                return sd_bus_error_setf(error, AGENTD_ERROR_BACKEND_UNAVAILABLE,
                                         "Too many readings of sandbox %s's usage are waiting; ask again.", s->id);
        }
        if (r < 0) {
                sd_bus_message_unref(c->call);
                free(c);
                return r;
        }
        return 1;
}

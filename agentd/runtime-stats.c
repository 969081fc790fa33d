/* SPDX-License-Identifier: MIT */
#include <msgpack.h>

#include "agentd-errors.h"
#include "agentix.h"
#include "envelope.h"
#include "log.h"
#include "macro.h"
#include "runtime-stats.h"

typedef struct Waiter {
        agentd_stats_t done;
        void *userdata;
} Waiter;

struct RuntimeStats {
        RuntimeStats **slot;
        agentix_client *client;
        agentix_request *request;
        Waiter waiters[RUNTIME_STATS_WAITERS_MAX];
        size_t n_waiters;
};

/* Every waiter once, then gone. st NULL: error_name and message. */
static void answer(RuntimeStats *rs, const AgentdSandboxStats *st, const char *error_name, const char *message) {
        Waiter waiters[RUNTIME_STATS_WAITERS_MAX];
        size_t n = rs->n_waiters;

        /* Freed first: a waiter may ask again from its done(). */
        memcpy(waiters, rs->waiters, n * sizeof(Waiter));
        rs->n_waiters = 0;
        runtime_stats_free(rs);
        for (size_t i = 0; i < n; i++)
                waiters[i].done(waiters[i].userdata, st, error_name, message);
}

static uint64_t number(const msgpack_object *map, const char *key) {
        const msgpack_object *v = mp_map_get(map, key);

        return v && v->type == MSGPACK_OBJECT_POSITIVE_INTEGER ? v->via.u64 : AGENTD_STATS_UNKNOWN;
}

static void on_done(agentix_request *r, const msgpack_object *result, const agentix_error *e, void *userdata) {
        RuntimeStats *rs = userdata;
        char message[256];

        if (e && e->kind != AGENTIX_E_NONE) {
                snprintf(message, sizeof(message), "Its runtime did not say what it uses: %s", strna(e->message));
                answer(rs, NULL, AGENTD_ERROR_BACKEND_UNAVAILABLE, message);
                return;
        }
        if (!result || result->type != MSGPACK_OBJECT_MAP) {
                answer(rs, NULL, AGENTD_ERROR_BACKEND_UNAVAILABLE, "Its runtime answered sandbox::stats with no map.");
                return;
        }
        answer(rs,
               &(AgentdSandboxStats) {
                       .time = number(result, "time"),
                       .cpu_usec = number(result, "cpu_usec"),
                       .memory_current = number(result, "memory_current"),
                       .memory_peak = number(result, "memory_peak"),
                       .memory_limit = number(result, "memory_limit"),
                       .pids_current = number(result, "pids_current"),
                       .pids_limit = number(result, "pids_limit"),
                       .net_rx_bytes = number(result, "net_rx_bytes"),
                       .net_tx_bytes = number(result, "net_tx_bytes"),
                       .io_read_bytes = number(result, "io_read_bytes"),
                       .io_write_bytes = number(result, "io_write_bytes"),
               },
               NULL, NULL);
}

static void on_connected(agentix_client *c, const agentix_error *error, void *userdata) {
        static const agentix_request_handlers handlers = { .done = on_done };
        RuntimeStats *rs = userdata;
        char message[256];

        if (error && error->kind != AGENTIX_E_NONE) {
                snprintf(message, sizeof(message), "Cannot reach the sandbox's runtime: %s", strna(error->message));
                answer(rs, NULL, AGENTD_ERROR_BACKEND_UNAVAILABLE, message);
                return;
        }
        if (agentix_call_async(c, "sandbox::stats", &(agentix_args) {},
                               &(agentix_call_options) { .deadline_ms = RUNTIME_STATS_DEADLINE_MS }, &handlers, rs,
                               &rs->request) < 0)
                answer(rs, NULL, AGENTD_ERROR_BACKEND_UNAVAILABLE, "Cannot ask the sandbox's runtime what it uses.");
}

int runtime_stats_ask(sd_event *event, const char *url, const char *id, const char *token, const char *ca_pem, RuntimeStats **slot,
                      agentd_stats_t done,
                      void *userdata) {
        RuntimeStats *rs = *slot;
        int r;

        if (!rs) {
                if (!url || !token)
                        return -ENOTCONN;
                rs = calloc(1, sizeof(*rs));
                if (!rs)
                        return -ENOMEM;
                r = agentix_client_new(&(agentix_options) { .url = url, .token = token, .ca_pem = ca_pem,
                                                            .no_reconnect = true },
                                       event,
                                       &rs->client);
                if (r >= 0)
                        r = agentix_client_set_sandbox_id(rs->client, id);
                if (r >= 0)
                        r = agentix_client_connect_async(rs->client, on_connected, rs);
                if (r < 0) {
                        runtime_stats_free(rs);
                        return r;
                }
                rs->slot = slot;
                *slot = rs;
        }
        if (rs->n_waiters >= RUNTIME_STATS_WAITERS_MAX)
                return -EBUSY;
        rs->waiters[rs->n_waiters++] = (Waiter) { .done = done, .userdata = userdata };
        return 0;
}

RuntimeStats *runtime_stats_free(RuntimeStats *rs) {
        if (!rs)
                return NULL;
        if (rs->slot)
                *rs->slot = NULL;
        if (rs->request) {
                (void) agentix_request_cancel(rs->request);
                agentix_request_unref(rs->request);
        }
        if (rs->client) {
                agentix_client_close(rs->client);
                agentix_client_unref(rs->client);
        }
        for (size_t i = 0; i < rs->n_waiters; i++)
                rs->waiters[i].done(rs->waiters[i].userdata, NULL, AGENTD_ERROR_NO_SUCH_SANDBOX,
                                    "The sandbox went away while its usage was read.");
        free(rs);
        return NULL;
}

/* SPDX-License-Identifier: MIT */
#pragma once

/* agentd's state: the sandboxes it owns, by id, the bus it serves them on, the backend that
 * runs them, and the defaults every create starts from. What happens to the sandboxes is
 * lifecycle.c; the manager's D-Bus face manager-dbus.c. */

#include <systemd/sd-bus.h>
#include <systemd/sd-event.h>

#include "agentd-bus.h"
#include "agentd-config.h"
#include "metrics.h"
#include "sandbox.h"
#include "strmap.h"

#include "backend.h"
#include "curl-event.h"
#include "runtime-ca.h"

typedef struct Manager {
        sd_event *event;
        sd_bus *bus;
        Backend **backends;       /* loaded or failed, as [Backends] Load= names them */
        size_t n_backends;
        StrMap *sandboxes;        /* id -> Sandbox */
        AgentdConfig *config;
        const char *config_path;  /* what a reload reads again */
        bool timeout_from_command_line; /* --docker-timeout= (over [Backends] Timeout=) */
        bool stopping;            /* deleting every sandbox before it stops: no new creates */
        void (*on_ready)(struct Manager *m); /* once every backend's sandboxes are adopted */
        struct Pool **pools;      /* warm pools (pool.h), one per pools.d file, and those draining */
        size_t n_pools;
        unsigned pool_removing;   /* members whose containers are being removed */
        sd_event_source *pool_refill; /* the pools' refill, on the loop's next turn */
        sd_event_source *reaper;  /* fires at the earliest ExpiresAt */
        Metrics metrics;          /* counted since the start (metrics.h) */
        struct MetricsEndpoint *metrics_endpoint; /* /metrics, when agentd serves it */
        RuntimeCA *runtime_ca;    /* when a backend's runtimes serve TLS (runtime-ca.h), else NULL */
        CurlEvent *curl;          /* handing runtimes their certificates (runtime-tls.h) */
} Manager;

/* Takes config and the backends. */
int manager_new(sd_event *event, sd_bus *bus, AgentdConfig *config, Backend **backends, size_t n_backends,
                Manager **ret);
/* Frees the records (the containers stay: agentd's state is rebuilt from their labels), then
 * the backends. */
Manager *manager_free(Manager *m);

Sandbox *manager_get_sandbox(Manager *m, const char *id);
/* -EEXIST when the id is taken. */
int manager_add_sandbox(Manager *m, Sandbox *s);
void manager_remove_sandbox(Manager *m, Sandbox *s);
/* The first sandbox match() accepts: for loops that change the registry as they go. */
Sandbox *manager_find_sandbox(Manager *m, bool (*match)(Sandbox *s, void *userdata), void *userdata);
/* How many sandboxes uid has (in any state). */
uint64_t manager_count_sandboxes_of(Manager *m, uid_t uid);
/* The loaded backend called name, or NULL with an InvalidConfig/BackendUnavailable error. */
Backend *manager_get_backend(Manager *m, const char *name, sd_bus_error *error);

/* Read config_path (and its drop-ins) again and put it in effect: limits, TTLs, counts,
 * runtimes, the default backend (one that is loaded) and DeleteOnStop= at once, for the creates
 * that follow. What the backends took at start ([Backends] Load=, Directory=, Timeout=, the
 * sockets) waits for a restart (said in the log). A bad file changes nothing: -EINVAL, and
 * *ret_error names file, line and key. Sandboxes are not touched; the pools follow with
 * pools_sync() (pool.h), which must come next. */
int manager_reload(Manager *m, char **ret_error);
/* agentd's runtime CA (PEM) for clients of https:// runtimes, or NULL without TLS. */
const char *manager_runtime_ca_pem(const Manager *m);
/* Decide which backends' runtimes serve TLS ([Runtime] TLS=) and open the CA they need;
 * -errno with *ret_error when it cannot be made (agentd does not start then). */
int manager_setup_tls(Manager *m, char **ret_error);

/* Tell the service manager (sd_notify STATUS=) how many sandboxes agentd has. */
void manager_notify_status(Manager *m);

/* SPDX-License-Identifier: MIT */
#pragma once

/* A sandbox as agentd's properties say (org.freedesktop.DBus.Properties.GetAll on its object),
 * and as E2B's API shows one: {templateID, sandboxID, alias, clientID, startedAt, endAt,
 * cpuCount, memoryMB, diskSizeMB, metadata, state, envdVersion}. */

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include <systemd/sd-bus.h>

/* What E2B calls envd's version. The SDK gates features on it: from 0.4.0 it names no user
 * unless asked to (the sandbox's default user then; before, it says "user"), from 0.5.2 it may
 * closeStdin, from 0.5.7 it uploads streams and gzip-encoded content as application/octet-stream.
 * 0.6.2 would add file metadata, which the runtime does not keep. */
#define E2B_ENVD_VERSION "0.5.7"
/* The gateway's own labels, set at a create through it and never from E2B's metadata (no key
 * with this prefix is taken there). A sandbox with E2B_TEMPLATE_LABEL was made through the
 * gateway, and only such a sandbox is routed to: the label records which template (pool) it came
 * from. E2B_PUBLIC_LABEL says whether its ports take traffic without its traffic access token
 * (E2B's network.allowPublicTraffic): "no" closes them; anything else, or none, leaves them open.
 * agentd lets an owner set any label at a create of their own (agentixctl --label), so an owner
 * can open their own sandbox to the gateway this way, and nobody else's. */
#define E2B_LABEL_PREFIX "agentix-e2b."
#define E2B_TEMPLATE_LABEL E2B_LABEL_PREFIX "template"
#define E2B_PUBLIC_LABEL E2B_LABEL_PREFIX "public"

typedef struct SandboxInfo {
        char *id;
        char *state;        /* agentd's: creating, running, paused, hibernated, exited, failed, removing */
        char *runtime;      /* its OCI runtime: runsc sandboxes pause with their memory (Hibernate) */
        char *template_id;  /* the E2B_TEMPLATE_LABEL label, else the pool, else the image */
        uint64_t created_at, expires_at; /* µs since the epoch */
        double cpus;
        uint64_t memory;    /* bytes */
        json_t *metadata;   /* the labels but the gateway's own */
        uint32_t owner;     /* the uid agentd says owns it */
        bool e2b;           /* made through the gateway: it has E2B_TEMPLATE_LABEL */
        bool public_traffic; /* its ports are open without the traffic token (E2B_PUBLIC_LABEL) */
} SandboxInfo;

/* Read a GetAll reply (a{sv}) for sandbox id. Unknown properties are skipped. */
int sandbox_info_read(sd_bus_message *reply, const char *id, SandboxInfo *ret);
void sandbox_info_done(SandboxInfo *i);

/* E2B's state: "running" or "paused" (agentd's paused or hibernated); NULL for a sandbox E2B
 * would not list (being made, exited, failed, going). */
const char *sandbox_info_e2b_state(const SandboxInfo *i);

/* The sandbox in E2B's form (a new reference, NULL without memory). */
json_t *sandbox_info_json(const SandboxInfo *i);

/* E2B's metrics (GET /sandboxes/ID/metrics): one reading, from agentd's GetStats() reply (a{sv},
 * at its start), as [{timestamp, cpuCount, cpuUsedPct, memUsed, memTotal, memCache, diskUsed,
 * diskTotal}]; agentd does not measure disks (0). NULL when the reply cannot be read. */
json_t *sandbox_metrics_json(const SandboxInfo *i, sd_bus_message *stats);

/* µs since the epoch as RFC 3339 with milliseconds, UTC. */
void rfc3339_usec(uint64_t usec, char ret[static 32]);

/* SPDX-License-Identifier: MIT */
#pragma once

/* A sandbox as agentd's properties say (org.freedesktop.DBus.Properties.GetAll on its object),
 * and as E2B's API shows one: {templateID, sandboxID, alias, clientID, startedAt, endAt,
 * cpuCount, memoryMB, diskSizeMB, metadata, state, envdVersion}. */

#include <jansson.h>
#include <stdint.h>

#include <systemd/sd-bus.h>

/* What E2B calls envd's version. The SDK gates features on it: from 0.4.0 it names no user
 * unless asked to (the sandbox's default user then; before, it says "user"), from 0.5.2 it may
 * closeStdin, from 0.5.7 it uploads streams and gzip-encoded content as application/octet-stream.
 * 0.6.2 would add file metadata, which the runtime does not keep. */
#define E2B_ENVD_VERSION "0.5.7"
/* The label that records which template (pool) a sandbox came from. */
#define E2B_TEMPLATE_LABEL "agentix-e2b.template"

typedef struct SandboxInfo {
        char *id;
        char *state;        /* agentd's: creating, running, paused, exited, failed, removing */
        char *template_id;  /* the E2B_TEMPLATE_LABEL label, else the pool, else the image */
        uint64_t created_at, expires_at; /* µs since the epoch */
        double cpus;
        uint64_t memory;    /* bytes */
        json_t *metadata;   /* the labels but the gateway's own */
} SandboxInfo;

/* Read a GetAll reply (a{sv}) for sandbox id. Unknown properties are skipped. */
int sandbox_info_read(sd_bus_message *reply, const char *id, SandboxInfo *ret);
void sandbox_info_done(SandboxInfo *i);

/* E2B's state: "running" or "paused"; NULL for a sandbox E2B would not list (being made,
 * exited, failed, going). */
const char *sandbox_info_e2b_state(const SandboxInfo *i);

/* The sandbox in E2B's form (a new reference, NULL without memory). */
json_t *sandbox_info_json(const SandboxInfo *i);

/* E2B's metrics (GET /sandboxes/ID/metrics): one reading, from agentd's GetStats() reply (a{sv},
 * at its start), as [{timestamp, cpuCount, cpuUsedPct, memUsed, memTotal, memCache, diskUsed,
 * diskTotal}]; agentd does not measure disks (0). NULL when the reply cannot be read. */
json_t *sandbox_metrics_json(const SandboxInfo *i, sd_bus_message *stats);

/* µs since the epoch as RFC 3339 with milliseconds, UTC. */
void rfc3339_usec(uint64_t usec, char ret[static 32]);

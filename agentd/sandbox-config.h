/* SPDX-License-Identifier: MIT */
#pragma once

/* What CreateSandbox asks for: its a{sv} config, checked key by key (unknown keys and wrong
 * types are errors), with the daemon's defaults filled in so that no sandbox is unlimited. */

#include <stdbool.h>
#include <stdint.h>
#include <systemd/sd-bus.h>

typedef struct SandboxLimits {
        double cpus;             /* CPUs (NanoCpus / 1e9) */
        uint64_t memory;         /* bytes */
        uint64_t pids;
} SandboxLimits;

typedef struct SandboxConfig {
        char *image, *bundle, *platform, *backend, *network, *workdir, *setup, *runtime, *user;
        char *pool;              /* made as pools.d/POOL.pool says (pool_config_apply()) */
        char **env;              /* KEY=VALUE */
        char **labels;           /* key=value, the caller's own */
        char **egress;           /* CIDRs (empty: no network at all), or NULL: no egress list */
        uint64_t ttl_sec;        /* 0: the daemon's default */
        SandboxLimits limits;
        bool bind_to_caller;
        bool read_only;          /* a read-only root; /tmp and the workdir writable */
} SandboxConfig;

#define SANDBOX_MIN_MEMORY (32ULL * 1024 * 1024)
#define SANDBOX_MIN_PIDS 32ULL
#define SANDBOX_MAX_EGRESS 64

/* Read the a{sv} at the message's read position: limits it does not name are the defaults;
 * with `pool`, what the pool fixes (image, bundle, platform, backend, network, runtime, limits)
 * may not be named, and the caller fills it in from the pool (pool_config_apply());
 * limits and ttl above the maxima (cpus 0: any) are errors; no backend is default_backend.
 * An invalid config sets `error` (org.agentix.Agentd1.InvalidConfig, naming the key) and
 * returns -EINVAL. */
int sandbox_config_read(sd_bus_message *m, const SandboxLimits *defaults, const SandboxLimits *maxima,
                        uint64_t max_ttl_sec, const char *default_backend, SandboxConfig **ret, sd_bus_error *error);
SandboxConfig *sandbox_config_free(SandboxConfig *c);
static inline void sandbox_config_freep(SandboxConfig **c) {
        sandbox_config_free(*c);
}
/* A copy of every key (NULL: out of memory). */
SandboxConfig *sandbox_config_dup(const SandboxConfig *c);
/* The runtime: default_runtime when none is named; one that allowed (NULL: any) does not list
 * is InvalidConfig naming those it does. */
int sandbox_config_apply_runtimes(SandboxConfig *c, char *const *allowed, const char *default_runtime,
                                  sd_bus_error *error);

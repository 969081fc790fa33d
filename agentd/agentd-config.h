/* SPDX-License-Identifier: MIT */
#pragma once

/* agentd's own configuration: /etc/agentix/agentd.conf, then the drop-ins in agentd.conf.d/
 * (*.conf, in file name order; a later file wins key by key), in the key-file style of
 * systemd's configuration. Documented in agentd.conf(5). A bad file is an error at start that
 * names the file, the line and what is wrong. */

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "pool-config.h"
#include "quota-config.h"
#include "sandbox-config.h"

#include "config-values.h"

typedef enum RuntimeTlsMode {
        RUNTIME_TLS_AUTO,
        RUNTIME_TLS_YES,
        RUNTIME_TLS_NO,
} RuntimeTlsMode;

typedef struct AgentdConfig {
        /* [Sandboxes] */
        uint64_t default_ttl_sec;
        uint64_t max_ttl_sec;            /* AGENTD_UNLIMITED: any */
        uint64_t max_sandboxes;
        uint64_t max_sandboxes_per_user;
        uint64_t max_snapshots_per_user; /* root has no maximum */
        bool delete_on_stop;             /* agentd deletes its sandboxes when it stops (else they run on) */
        bool hibernate_on_expiry;        /* OnExpiry=hibernate: an expiring sandbox that can hibernates */
        uint64_t hibernated_retention_sec; /* then it expires this much later (AGENTD_UNLIMITED: never) */
        uint64_t max_hibernated;         /* hibernated sandboxes on the host (AGENTD_UNLIMITED: any) */
        /* [Limits]: what a create gets when it names none, and the most it may ask for */
        SandboxLimits defaults;
        SandboxLimits maxima;            /* cpus 0, memory/pids AGENTD_UNLIMITED: any */
        /* [Backends] */
        char *backend_dir;
        char **backends;                 /* names to load */
        char *default_backend;
        uint64_t backend_timeout_usec;
        /* [Runtimes]: the OCI runtimes a create may name (NULL: any the backend has), and the one
         * it gets when it names none (NULL: the backend's default) */
        char **allowed_runtimes;
        char *default_runtime;
        /* [Runtime] TLS=: runtimes serve TLS with certificates from agentd's CA (runtime-ca.h);
         * auto: for backends whose runtimes other machines reach (swarm) */
        RuntimeTlsMode runtime_tls;
        /* [Docker], [Podman]: handed to the backends as DOCKER_HOST and CONTAINER_HOST */
        char *docker_socket;
        char *podman_socket;
        /* [Docker] NetworkShardSize=: handed to the docker backend as AGENTIX_NETWORK_SHARD_SIZE
         * (0: not set, the backend's default) */
        uint64_t network_shard_size;
        /* [Swarm]: handed to the swarm backend as SWARM_HOST, SWARM_CERT_PATH, SWARM_REGISTRY */
        char *swarm_host;
        char *swarm_cert_path;
        char *swarm_registry;
        /* [Quotas]: every user's, and agentd.conf.d/users/NAME.conf: one user's over them */
        Quotas quotas;
        UserQuotas **user_quotas;
        size_t n_user_quotas;
        /* [Metrics]: /metrics on Listen=ADDR:PORT (NULL: none, unless systemd passes the socket
         * agentix-metrics.socket names "metrics"), with each sandbox's usage when PerSandbox= */
        char *metrics_listen;
        char *metrics_listen_where;      /* "FILE:LINE" it was set at, for an error at bind time */
        bool metrics_per_sandbox;
        char *metrics_tls_cert;          /* TLSCertificate=, TLSKey=: serve HTTPS (NULL: HTTP) */
        char *metrics_tls_key;
        /* pools.d/ *.pool beside the file: warm pools, limits resolved against [Limits] */
        PoolConfig **pools;
        size_t n_pools;
} AgentdConfig;

/* The built-in defaults. */
int agentd_config_new(AgentdConfig **ret);
AgentdConfig *agentd_config_free(AgentdConfig *c);

/* Read path (a missing file is no error), then path.d/ *.conf over c, then the pools in
 * pools.d/ beside path. On a bad file,
 * *ret_error says "FILE:LINE: what" and -EINVAL is returned. */
int agentd_config_load(AgentdConfig *c, const char *path, char **ret_error);
/* Read one file (for tests and fuzzing); name is what errors call it. */
int agentd_config_parse_file(AgentdConfig *c, FILE *f, const char *name, char **ret_error);

/* The configuration as agentd.conf text, every key with its value (agentd --show-config). */
int agentd_config_format(const AgentdConfig *c, FILE *out);

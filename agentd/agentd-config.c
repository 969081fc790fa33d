/* SPDX-License-Identifier: MIT */
#include <arpa/inet.h>
#include <ctype.h>
#include <ini.h>
#include <math.h>
#include <strings.h>

#include "agentd-config.h"
#include "config-dir.h"
#include "config-values.h"
#include "macro.h"
#include "strv.h"

#ifndef AGENTD_BACKEND_DIR_DEFAULT
#define AGENTD_BACKEND_DIR_DEFAULT "/usr/lib/agentix/backends"
#endif

#define MAX_DROP_INS 256

/* The host's memory: no sandbox may ask for more unless agentd.conf says MaxMemory= (even
 * infinity). Unknown (sysconf failed): no such bound. */
static uint64_t host_memory(void) {
        long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGESIZE);

        return pages > 0 && size > 0 ? (uint64_t) pages * (uint64_t) size : AGENTD_UNLIMITED;
}

int agentd_config_new(AgentdConfig **ret) {
        AgentdConfig *c = calloc(1, sizeof(*c));
        uint64_t host = host_memory();

        if (!c)
                return -ENOMEM;
        *c = (AgentdConfig) {
                .default_ttl_sec = 24 * 3600,
                .max_ttl_sec = AGENTD_UNLIMITED,
                .max_sandboxes = 1024,
                .max_sandboxes_per_user = 256,
                .max_snapshots_per_user = 32,
                .hibernated_retention_sec = 7 * 24 * 3600,
                .max_hibernated = AGENTD_UNLIMITED,
                /* Never unlimited: a fork bomb in a sandbox must not reach the host. */
                .defaults = { .cpus = 1.0, .memory = MIN(2ULL << 30, host), .pids = 1024 },
                .maxima = { .cpus = 0, .memory = host, .pids = 1ULL << 22 },
                .backend_timeout_usec = 30ULL * 1000 * 1000,
                .quotas = { .max_sandboxes = AGENTD_UNLIMITED, .max_cpus = 0, .max_memory = AGENTD_UNLIMITED,
                            .max_snapshots = AGENTD_UNLIMITED, .max_hibernated = AGENTD_UNLIMITED },
        };
        c->backend_dir = strdup(AGENTD_BACKEND_DIR_DEFAULT);
        c->default_backend = strdup("docker");
        if (!c->backend_dir || !c->default_backend || strv_extend(&c->backends, "docker") < 0) {
                agentd_config_free(c);
                return -ENOMEM;
        }
        *ret = c;
        return 0;
}

AgentdConfig *agentd_config_free(AgentdConfig *c) {
        if (!c)
                return NULL;
        free(c->backend_dir);
        strv_free(c->backends);
        free(c->default_backend);
        strv_free(c->allowed_runtimes);
        free(c->default_runtime);
        free(c->docker_socket);
        free(c->podman_socket);
        free(c->swarm_host);
        free(c->swarm_cert_path);
        free(c->swarm_registry);
        pool_configs_free(c->pools, c->n_pools);
        user_quotas_free(c->user_quotas, c->n_user_quotas);
        free(c->metrics_listen);
        free(c->metrics_listen_where);
        free(c->metrics_tls_cert);
        free(c->metrics_tls_key);
        free(c);
        return NULL;
}

/* ---- the file ---------------------------------------------------------------------------- */

typedef struct Parser {
        AgentdConfig *c;
        const char *file;       /* what errors call the file being read */
        char *error;
} Parser;

#define parser_fail(p, ...) message_set_first(&(p)->error, 0, __VA_ARGS__)

static int set_string(Parser *p, char **field, const char *value) {
        char *v = strdup(value);

        if (!v)
                return parser_fail(p, "out of memory");
        free(*field);
        *field = v;
        return 1;
}

static int set_socket(Parser *p, char **field, const char *key, const char *value) {
        if (value[0] != '/')
                return parser_fail(p, "%s=%s is not an absolute path to a unix socket", key, value);
        return set_string(p, field, value);
}

static int sandboxes_key(Parser *p, const char *key, const char *value) {
        AgentdConfig *c = p->c;
        uint64_t v;

        if (streq(key, "DefaultTTL") || streq(key, "MaxTTL")) {
                bool dflt = streq(key, "DefaultTTL");
                if (parse_timespan_sec(value, &v) < 0 || v == 0 || (dflt && v == AGENTD_UNLIMITED))
                        return parser_fail(p, "%s=%s is not a time span of at least 1 s (like 90s, 30min, 12h, 7d%s)",
                                           key, value, dflt ? "" : " or infinity");
                *(dflt ? &c->default_ttl_sec : &c->max_ttl_sec) = v;
                return 1;
        }
        if (streq(key, "MaxSandboxes") || streq(key, "MaxSandboxesPerUser")) {
                if (parse_count(value, 1, 1000000, &v) < 0)
                        return parser_fail(p, "%s=%s is not a number of sandboxes from 1 to 1000000 or infinity", key,
                                           value);
                *(streq(key, "MaxSandboxes") ? &c->max_sandboxes : &c->max_sandboxes_per_user) = v;
                return 1;
        }
        if (streq(key, "MaxSnapshotsPerUser")) {
                if (parse_count(value, 0, 1000000, &v) < 0)
                        return parser_fail(p, "%s=%s is not a number of snapshots from 0 to 1000000 or infinity", key,
                                           value);
                c->max_snapshots_per_user = v;
                return 1;
        }
        if (streq(key, "OnExpiry")) {
                if (!streq(value, "delete") && !streq(value, "hibernate"))
                        return parser_fail(p, "OnExpiry=%s is neither delete nor hibernate", value);
                c->hibernate_on_expiry = streq(value, "hibernate");
                return 1;
        }
        if (streq(key, "HibernatedRetention")) {
                if (parse_timespan_sec(value, &v) < 0 || v == 0)
                        return parser_fail(p, "HibernatedRetention=%s is not a time span of at least 1 s (like 1h, "
                                           "7d) or infinity", value);
                c->hibernated_retention_sec = v;
                return 1;
        }
        if (streq(key, "MaxHibernated")) {
                if (parse_count(value, 0, 1000000, &v) < 0)
                        return parser_fail(p, "MaxHibernated=%s is not a number of sandboxes from 0 to 1000000 or "
                                           "infinity", value);
                c->max_hibernated = v;
                return 1;
        }
        if (streq(key, "DeleteOnStop")) {
                int b = parse_boolean(value);
                if (b < 0)
                        return parser_fail(p, "DeleteOnStop=%s is not a boolean (yes or no)", value);
                c->delete_on_stop = b;
                return 1;
        }
        return parser_fail(p, "unknown key %s= in [Sandboxes] (DefaultTTL, MaxTTL, MaxSandboxes, MaxSandboxesPerUser, "
                           "MaxSnapshotsPerUser, OnExpiry, HibernatedRetention, MaxHibernated, DeleteOnStop)", key);
}

static int limits_key(Parser *p, const char *key, const char *value) {
        AgentdConfig *c = p->c;
        bool dflt = strneq(key, "Default", 7);
        SandboxLimits *l = dflt ? &c->defaults : &c->maxima;
        const char *what = dflt ? key + 7 : strneq(key, "Max", 3) ? key + 3 : "";
        uint64_t v;

        if (streq(what, "CPUs")) {
                double d;
                if (!dflt && streq(value, "infinity")) {
                        l->cpus = 0;
                        return 1;
                }
                if (parse_cpus(value, &d) < 0)
                        return parser_fail(p, "%s=%s is not a number of CPUs from 0.01 to 4096%s", key, value,
                                           dflt ? "" : " or infinity");
                l->cpus = d;
                return 1;
        }
        if (streq(what, "Memory")) {
                if (parse_size(value, &v) < 0 || v < SANDBOX_MIN_MEMORY || (dflt && v == AGENTD_UNLIMITED))
                        return parser_fail(p, "%s=%s is not a size of at least 32M (like 512M, 2G%s)", key, value,
                                           dflt ? "; a default is never unlimited" : " or infinity");
                l->memory = v;
                return 1;
        }
        if (streq(what, "Pids")) {
                if (parse_count(value, SANDBOX_MIN_PIDS, 1ULL << 22, &v) < 0 || v == AGENTD_UNLIMITED)
                        return parser_fail(p, "%s=%s is not a number of processes from 32 to 4194304", key, value);
                l->pids = v;
                return 1;
        }
        return parser_fail(p, "unknown key %s= in [Limits] (DefaultCPUs, DefaultMemory, DefaultPids, MaxCPUs, "
                           "MaxMemory, MaxPids)", key);
}

static int backends_key(Parser *p, const char *key, const char *value) {
        AgentdConfig *c = p->c;

        if (streq(key, "Directory")) {
                if (value[0] != '/')
                        return parser_fail(p, "Directory=%s is not an absolute path", value);
                return set_string(p, &c->backend_dir, value);
        }
        if (streq(key, "Load")) {
                _cleanup_strv_free_ char **l = NULL;
                if (strv_split_extend(&l, value) < 0)
                        return parser_fail(p, "out of memory");
                if (!l)
                        return parser_fail(p, "Load= names no backend (like: Load=docker podman)");
                for (char **n = l; *n; n++)
                        if (!backend_name_ok(*n))
                                return parser_fail(p, "Load=: '%s' is not a backend name (lowercase letters, digits, "
                                                   "'-' and '_')", *n);
                strv_free(c->backends);
                c->backends = TAKE_PTR(l);
                return 1;
        }
        if (streq(key, "Default")) {
                if (!backend_name_ok(value))
                        return parser_fail(p, "Default=%s is not a backend name", value);
                return set_string(p, &c->default_backend, value);
        }
        if (streq(key, "Timeout")) {
                uint64_t usec;
                if (parse_timespan_usec(value, &usec) < 0 || usec < 100000 || usec > 3600ULL * 1000000)
                        return parser_fail(p, "Timeout=%s is not a time span from 100ms to 1h", value);
                c->backend_timeout_usec = usec;
                return 1;
        }
        return parser_fail(p, "unknown key %s= in [Backends] (Directory, Load, Default, Timeout)", key);
}

static int runtimes_key(Parser *p, const char *key, const char *value) {
        AgentdConfig *c = p->c;

        if (streq(key, "Allowed")) {
                _cleanup_strv_free_ char **l = NULL;
                if (strv_split_extend(&l, value) < 0)
                        return parser_fail(p, "out of memory");
                for (char **n = l; n && *n; n++)
                        if (!runtime_name_ok(*n))
                                return parser_fail(p, "Allowed=: '%s' is not a runtime name", *n);
                strv_free(c->allowed_runtimes);
                c->allowed_runtimes = TAKE_PTR(l); /* empty: any */
                return 1;
        }
        if (streq(key, "Default")) {
                if (!strempty(value) && !runtime_name_ok(value))
                        return parser_fail(p, "Default=%s is not a runtime name", value);
                if (strempty(value)) {
                        free(c->default_runtime);
                        c->default_runtime = NULL;
                        return 1;
                }
                return set_string(p, &c->default_runtime, value);
        }
        return parser_fail(p, "unknown key %s= in [Runtimes] (Allowed, Default)", key);
}

static int swarm_key(Parser *p, const char *key, const char *value) {
        if (streq(key, "Host")) {
                if (!startswith(value, "unix:///") && !startswith(value, "tcp://"))
                        return parser_fail(p, "Host=%s is not unix:///PATH or tcp://HOST:PORT", value);
                return set_string(p, &p->c->swarm_host, value);
        }
        if (streq(key, "CertPath")) {
                if (value[0] != '/')
                        return parser_fail(p, "CertPath=%s is not an absolute path to a directory", value);
                return set_string(p, &p->c->swarm_cert_path, value);
        }
        if (streq(key, "Registry")) {
                if (!value[0] || strpbrk(value, "/ \t@"))
                        return parser_fail(p, "Registry=%s is not a registry's HOST[:PORT]", value);
                return set_string(p, &p->c->swarm_registry, value);
        }
        return parser_fail(p, "unknown key %s= in [Swarm] (Host, CertPath, Registry)", key);
}

/* ADDR:PORT, [IPV6]:PORT: a numeric address and a port from 1 to 65535. */
static bool listen_address_ok(const char *s) {
        const char *colon = strrchr(s, ':');
        char addr[64];
        unsigned char buf[sizeof(struct in6_addr)];
        unsigned long port;
        char *end;
        size_t n;

        if (!colon || colon == s)
                return false;
        errno = 0;
        port = strtoul(colon + 1, &end, 10);
        if (errno || *end || colon[1] == 0 || port < 1 || port > 65535)
                return false;
        n = (size_t) (colon - s);
        if (s[0] == '[') {
                if (n < 3 || s[n - 1] != ']' || n - 2 >= sizeof(addr))
                        return false;
                memcpy(addr, s + 1, n - 2);
                addr[n - 2] = 0;
                return inet_pton(AF_INET6, addr, buf) == 1;
        }
        if (n >= sizeof(addr))
                return false;
        memcpy(addr, s, n);
        addr[n] = 0;
        return inet_pton(AF_INET, addr, buf) == 1;
}

static const char *const tls_modes[] = {
        [RUNTIME_TLS_AUTO] = "auto",
        [RUNTIME_TLS_YES] = "yes",
        [RUNTIME_TLS_NO] = "no",
};

static int runtime_key(Parser *p, const char *key, const char *value) {
        if (streq(key, "TLS")) {
                for (size_t i = 0; i < ELEMENTSOF(tls_modes); i++)
                        if (streq(value, tls_modes[i])) {
                                p->c->runtime_tls = (RuntimeTlsMode) i;
                                return 1;
                        }
                return parser_fail(p, "TLS=%s is not auto, yes or no", value);
        }
        return parser_fail(p, "unknown key %s= in [Runtime] (TLS)", key);
}

static int metrics_key(Parser *p, const char *key, const char *value) {
        if (streq(key, "Listen")) {
                if (strempty(value)) {
                        p->c->metrics_listen = mfree(p->c->metrics_listen);
                        return 1;
                }
                if (!listen_address_ok(value))
                        return parser_fail(p, "Listen=%s is not ADDR:PORT (like 127.0.0.1:9477 or [::1]:9477)", value);
                free(p->c->metrics_listen_where);
                p->c->metrics_listen_where = p->file ? strdup(p->file) : NULL;
                return set_string(p, &p->c->metrics_listen, value);
        }
        if (streq(key, "PerSandbox")) {
                int b = parse_boolean(value);

                if (b < 0)
                        return parser_fail(p, "PerSandbox=%s is not a boolean (yes or no)", value);
                p->c->metrics_per_sandbox = b;
                return 1;
        }
        if (streq(key, "TLSCertificate") || streq(key, "TLSKey")) {
                char **where = streq(key, "TLSKey") ? &p->c->metrics_tls_key : &p->c->metrics_tls_cert;

                if (strempty(value)) {
                        *where = mfree(*where);
                        return 1;
                }
                if (value[0] != '/')
                        return parser_fail(p, "%s=%s is not an absolute path", key, value);
                return set_string(p, where, value);
        }
        return parser_fail(p, "unknown key %s= in [Metrics] (Listen, PerSandbox, TLSCertificate, TLSKey)", key);
}

static int on_entry(void *userdata, const char *section, const char *key, const char *value) {
        Parser *p = userdata;

        if (p->error)
                return 0;
        if (streq(section, "Sandboxes"))
                return sandboxes_key(p, key, value);
        if (streq(section, "Limits"))
                return limits_key(p, key, value);
        if (streq(section, "Backends"))
                return backends_key(p, key, value);
        if (streq(section, "Runtimes"))
                return runtimes_key(p, key, value);
        if (streq(section, "Runtime"))
                return runtime_key(p, key, value);
        if (streq(section, "Docker")) {
                if (streq(key, "Socket"))
                        return set_socket(p, &p->c->docker_socket, key, value);
                if (streq(key, "NetworkShardSize")) {
                        /* (the bounds are the backend's: docker-shards.h) */
                        if (parse_count(value, 2, 1000, &p->c->network_shard_size) < 0)
                                return parser_fail(p, "NetworkShardSize=%s: not a number of sandboxes from 2 to 1000",
                                                   value);
                        return 1;
                }
                return parser_fail(p, "unknown key %s= in [Docker] (Socket, NetworkShardSize)", key);
        }
        if (streq(section, "Podman")) {
                if (streq(key, "Socket"))
                        return set_socket(p, &p->c->podman_socket, key, value);
                return parser_fail(p, "unknown key %s= in [Podman] (Socket)", key);
        }
        if (streq(section, "Swarm"))
                return swarm_key(p, key, value);
        if (streq(section, "Metrics"))
                return metrics_key(p, key, value);
        if (streq(section, "Quotas")) {
                char *e = NULL;
                int r = quota_key(&p->c->quotas, NULL, key, value, &e);

                if (r == 0)
                        (void) parser_fail(p, "%s", e ?: "out of memory");
                free(e);
                return r;
        }
        if (strempty(section))
                return parser_fail(p, "%s= comes before any [Section]", key);
        return parser_fail(p, "unknown section [%s] (Sandboxes, Limits, Quotas, Metrics, Backends, Runtimes, Runtime, Docker, "
                           "Podman, Swarm)", section);
}

int agentd_config_parse_file(AgentdConfig *c, FILE *f, const char *name, char **ret_error) {
        Parser p = { .c = c, .file = name };
        int line = ini_parse_file(f, on_entry, &p);

        if (line == 0)
                return 0;
        if (line < 0)
                return -EIO;
        if (asprintf(ret_error, "%s:%d: %s", name, line, p.error ?: "not a key=value line or [Section]") < 0)
                *ret_error = NULL;
        free(p.error);
        return -EINVAL;
}

static int parse_path(AgentdConfig *c, const char *path, char **ret_error) {
        _cleanup_fclose_ FILE *f = fopen(path, "re");

        if (!f) {
                if (errno == ENOENT)
                        return 0;
                if (asprintf(ret_error, "%s: %s", path, strerror(errno)) < 0)
                        *ret_error = NULL;
                return -errno;
        }
        return agentd_config_parse_file(c, f, path, ret_error);
}

/* What no single key can check: the defaults within the maxima, the default backend loaded. */
static int verify(const AgentdConfig *c, const char *path, char **ret_error) {
        const char *what = NULL;

        if (c->maxima.cpus > 0 && c->defaults.cpus > c->maxima.cpus)
                what = "DefaultCPUs= is above MaxCPUs=";
        else if (c->defaults.memory > c->maxima.memory)
                what = "DefaultMemory= is above MaxMemory=";
        else if (c->defaults.pids > c->maxima.pids)
                what = "DefaultPids= is above MaxPids=";
        else if (c->max_ttl_sec != AGENTD_UNLIMITED && c->default_ttl_sec > c->max_ttl_sec)
                what = "DefaultTTL= is above MaxTTL=";
        else if (!strv_contains(c->backends, c->default_backend))
                what = "[Backends] Default= names a backend that Load= does not load";
        else if (c->default_runtime && c->allowed_runtimes && !strv_contains(c->allowed_runtimes, c->default_runtime))
                what = "[Runtimes] Default= names a runtime that Allowed= does not allow";
        else if (!c->metrics_tls_cert != !c->metrics_tls_key)
                what = "[Metrics] TLSCertificate= and TLSKey= go together";
        if (!what)
                return 0;
        if (asprintf(ret_error, "%s (and its drop-ins): %s", path, what) < 0)
                *ret_error = NULL;
        return -EINVAL;
}

/* A pool's sandboxes are made as a create would make them: the limits its file does not name
 * are [Limits]' defaults, and none may be above the maxima or name a runtime not allowed. */
static int resolve_pools(AgentdConfig *c, const char *dir, char **ret_error) {
        uint64_t total = 0;

        for (size_t i = 0; i < c->n_pools; i++) {
                PoolConfig *p = c->pools[i];
                SandboxLimits *l = &p->sandbox->limits;
                const char *what = NULL;

                if (!p->limits_set[0])
                        l->cpus = c->defaults.cpus;
                if (!p->limits_set[1])
                        l->memory = c->defaults.memory;
                if (!p->limits_set[2])
                        l->pids = c->defaults.pids;
                total += p->size;
                if (c->maxima.cpus > 0 && l->cpus > c->maxima.cpus)
                        what = "CPUs= is above agentd.conf's MaxCPUs=";
                else if (l->memory > c->maxima.memory)
                        what = "Memory= is above agentd.conf's MaxMemory=";
                else if (l->pids > c->maxima.pids)
                        what = "Pids= is above agentd.conf's MaxPids=";
                else if (p->sandbox->runtime && c->allowed_runtimes &&
                         !strv_contains(c->allowed_runtimes, p->sandbox->runtime))
                        what = "Runtime= names a runtime that agentd.conf's [Runtimes] Allowed= does not allow";
                else if (total > c->max_sandboxes)
                        what = "the pools' Size= add up to more than agentd.conf's MaxSandboxes=";
                if (what) {
                        if (asprintf(ret_error, "%s/%s.pool: %s", dir, p->name, what) < 0)
                                *ret_error = NULL;
                        return -EINVAL;
                }
        }
        return 0;
}

static int load_pools(AgentdConfig *c, const char *path, char **ret_error) {
        _cleanup_free_ char *copy = strdup(path), *dir = NULL;
        const char *slash;
        int r;

        if (!copy)
                return -ENOMEM;
        slash = strrchr(copy, '/');
        if (asprintf(&dir, "%.*s/pools.d", slash ? (int) (slash - copy) : 1, slash ? copy : ".") < 0)
                return -ENOMEM;
        pool_configs_free(c->pools, c->n_pools);
        c->pools = NULL;
        c->n_pools = 0;
        r = pool_configs_load_dir(dir, &c->pools, &c->n_pools, ret_error);
        return r < 0 ? r : resolve_pools(c, dir, ret_error);
}

/* agentd.conf.d/users/ *.conf: one user's quotas each. */
static int load_user_quotas(AgentdConfig *c, const char *drop_in_dir, char **ret_error) {
        _cleanup_free_ char *dir = NULL;

        if (asprintf(&dir, "%s/users", drop_in_dir) < 0)
                return -ENOMEM;
        user_quotas_free(c->user_quotas, c->n_user_quotas);
        c->user_quotas = NULL;
        c->n_user_quotas = 0;
        return user_quotas_load_dir(dir, &c->user_quotas, &c->n_user_quotas, ret_error);
}

int agentd_config_load(AgentdConfig *c, const char *path, char **ret_error) {
        _cleanup_free_ char *dir = NULL;
        _cleanup_strv_free_ char **drop_ins = NULL;
        int n, r;

        r = parse_path(c, path, ret_error);
        if (r < 0)
                return r;
        if (asprintf(&dir, "%s.d", path) < 0)
                return -ENOMEM;
        r = config_dir_list(dir, ".conf", MAX_DROP_INS, &drop_ins, &n, ret_error);
        for (int i = 0; r >= 0 && i < n; i++)
                r = parse_path(c, drop_ins[i], ret_error);
        if (r >= 0)
                r = verify(c, path, ret_error);
        if (r >= 0)
                r = load_user_quotas(c, dir, ret_error);
        return r < 0 ? r : load_pools(c, path, ret_error);
}

/* ---- showing it -------------------------------------------------------------------------- */

static void put_seconds(FILE *out, const char *key, uint64_t v) {
        if (v == AGENTD_UNLIMITED)
                fprintf(out, "%s=infinity\n", key);
        else
                fprintf(out, "%s=%llus\n", key, (unsigned long long) v);
}

int agentd_config_format(const AgentdConfig *c, FILE *out) {
        fputs("[Sandboxes]\n", out);
        put_seconds(out, "DefaultTTL", c->default_ttl_sec);
        put_seconds(out, "MaxTTL", c->max_ttl_sec);
        config_put_count(out, "MaxSandboxes", c->max_sandboxes);
        config_put_count(out, "MaxSandboxesPerUser", c->max_sandboxes_per_user);
        config_put_count(out, "MaxSnapshotsPerUser", c->max_snapshots_per_user);
        fprintf(out, "OnExpiry=%s\n", c->hibernate_on_expiry ? "hibernate" : "delete");
        put_seconds(out, "HibernatedRetention", c->hibernated_retention_sec);
        config_put_count(out, "MaxHibernated", c->max_hibernated);
        fprintf(out, "DeleteOnStop=%s\n", c->delete_on_stop ? "yes" : "no");
        fputs("\n[Limits]\n", out);
        fprintf(out, "DefaultCPUs=%g\n", c->defaults.cpus);
        config_put_size(out, "DefaultMemory", c->defaults.memory);
        config_put_count(out, "DefaultPids", c->defaults.pids);
        if (c->maxima.cpus > 0)
                fprintf(out, "MaxCPUs=%g\n", c->maxima.cpus);
        else
                fputs("MaxCPUs=infinity\n", out);
        config_put_size(out, "MaxMemory", c->maxima.memory);
        config_put_count(out, "MaxPids", c->maxima.pids);
        fprintf(out, "\n[Backends]\nDirectory=%s\nLoad=", c->backend_dir);
        for (char **n = c->backends; n && *n; n++)
                fprintf(out, "%s%s", n == c->backends ? "" : " ", *n);
        fprintf(out, "\nDefault=%s\nTimeout=%llums\n", c->default_backend,
                (unsigned long long) (c->backend_timeout_usec / 1000));
        fputs("\n[Runtimes]\nAllowed=", out);
        for (char **n = c->allowed_runtimes; n && *n; n++)
                fprintf(out, "%s%s", n == c->allowed_runtimes ? "" : " ", *n);
        fprintf(out, "\nDefault=%s\n", c->default_runtime ?: "");
        fprintf(out, "\n[Runtime]\nTLS=%s\n", tls_modes[c->runtime_tls]);
        fprintf(out, "\n[Docker]\nSocket=%s\n", c->docker_socket ?: "");
        if (c->network_shard_size > 0)
                fprintf(out, "NetworkShardSize=%llu\n", (unsigned long long) c->network_shard_size);
        fprintf(out, "\n[Podman]\nSocket=%s\n", c->podman_socket ?: "");
        fprintf(out, "\n[Swarm]\nHost=%s\nCertPath=%s\nRegistry=%s\n", c->swarm_host ?: "", c->swarm_cert_path ?: "",
                c->swarm_registry ?: "");
        fprintf(out, "\n[Metrics]\nListen=%s\nPerSandbox=%s\nTLSCertificate=%s\nTLSKey=%s\n", c->metrics_listen ?: "",
                c->metrics_per_sandbox ? "yes" : "no", c->metrics_tls_cert ?: "", c->metrics_tls_key ?: "");
        quotas_format(&c->quotas, out);
        for (size_t i = 0; i < c->n_user_quotas; i++) {
                /* Each user's file as it applies: the defaults with its keys over them. */
                Quotas q = quotas_apply(&c->quotas, c->user_quotas[i]);

                fprintf(out, "\n# agentd.conf.d/users/%s.conf", c->user_quotas[i]->user);
                quotas_format(&q, out);
        }
        for (size_t i = 0; i < c->n_pools; i++) {
                fprintf(out, "\n# pools.d/%s.pool\n", c->pools[i]->name);
                pool_config_format(c->pools[i], out);
        }
        return ferror(out) ? -EIO : 0;
}

/* SPDX-License-Identifier: MIT */
#include <arpa/inet.h>
#include <ctype.h>
#include <math.h>
#include <unistd.h>

#include "agentd-errors.h"
#include "macro.h"
#include "sandbox-config.h"
#include "strv.h"

SandboxConfig *sandbox_config_free(SandboxConfig *c) {
        if (!c)
                return NULL;
        free(c->image);
        free(c->bundle);
        free(c->platform);
        free(c->backend);
        free(c->network);
        free(c->runtime);
        free(c->user);
        free(c->pool);
        free(c->workdir);
        free(c->setup);
        strv_free(c->env);
        strv_free(c->labels);
        strv_free(c->egress);
        free(c);
        return NULL;
}


static int copy_string(char **to, const char *from) {
        return from && !(*to = strdup(from)) ? -ENOMEM : 0;
}

/* NULL stays NULL; an empty list stays an empty list (egress: no network at all). */
SandboxConfig *sandbox_config_dup(const SandboxConfig *c) {
        _cleanup_(sandbox_config_freep) SandboxConfig *d = calloc(1, sizeof(SandboxConfig));

        if (!d)
                return NULL;
        d->ttl_sec = c->ttl_sec;
        d->limits = c->limits;
        d->bind_to_caller = c->bind_to_caller;
        d->read_only = c->read_only;
        if (copy_string(&d->image, c->image) < 0 || copy_string(&d->bundle, c->bundle) < 0 ||
            copy_string(&d->platform, c->platform) < 0 || copy_string(&d->backend, c->backend) < 0 ||
            copy_string(&d->network, c->network) < 0 || copy_string(&d->workdir, c->workdir) < 0 ||
            copy_string(&d->setup, c->setup) < 0 || copy_string(&d->runtime, c->runtime) < 0 ||
            copy_string(&d->user, c->user) < 0 || copy_string(&d->pool, c->pool) < 0 || strv_copy(c->env, &d->env) < 0 ||
            strv_copy(c->labels, &d->labels) < 0 || strv_copy(c->egress, &d->egress) < 0)
                return NULL;
        return TAKE_PTR(d);
}

/* fmt takes the key, then detail (NULL: ""). */
#define invalid(error, fmt, key, detail) \
        sd_bus_error_setf((error), AGENTD_ERROR_INVALID_CONFIG, fmt, (key), (const char *) (detail) ?: "")

static bool env_name_ok(const char *s, size_t n) {
        if (n == 0 || isdigit((unsigned char) s[0]))
                return false;
        for (size_t i = 0; i < n; i++)
                if (!(isalnum((unsigned char) s[i]) || s[i] == '_'))
                        return false;
        return true;
}

/* A plain, printable, bounded string: what a Docker reference, path or name can hold. */
static bool text_ok(const char *s, size_t max) {
        size_t n = strlen(s);

        if (n == 0 || n > max)
                return false;
        for (size_t i = 0; i < n; i++)
                if ((unsigned char) s[i] < 0x20 || s[i] == 0x7f)
                        return false;
        return true;
}

/* os/arch[/variant]: lowercase letters, digits and '_' in two or three parts. */
static bool platform_ok(const char *s) {
        size_t parts = 1;

        for (const char *p = s; *p; p++) {
                if (*p == '/') {
                        if (p == s || p[1] == 0 || p[1] == '/')
                                return false;
                        parts++;
                } else if (!(islower((unsigned char) *p) || isdigit((unsigned char) *p) || *p == '_'))
                        return false;
        }
        return parts == 2 || parts == 3;
}

static int read_string(sd_bus_message *m, const char *key, char **field, size_t max, sd_bus_error *error) {
        const char *s;
        int r;

        r = sd_bus_message_read(m, "s", &s);
        if (r < 0)
                return r;
        if (*field)
                return invalid(error, "config key '%s' is given twice%s", key, NULL);
        if (!text_ok(s, max))
                return invalid(error, "config key '%s' must be a non-empty printable string%s", key, NULL);
        *field = strdup(s);
        return *field ? 0 : -ENOMEM;
}

static int read_map(sd_bus_message *m, const char *key, bool is_env, char ***field, sd_bus_error *error) {
        const char *k, *v;
        int r;

        r = sd_bus_message_enter_container(m, 'a', "{ss}");
        if (r < 0)
                return r;
        while ((r = sd_bus_message_read(m, "{ss}", &k, &v)) > 0) {
                char *kv;

                if (is_env && !env_name_ok(k, strlen(k)))
                        return invalid(error, "config key '%s': '%s' is not a variable name", key, k);
                if (!is_env && (!text_ok(k, 256) || strchr(k, '=') || strneq(k, "org.agentix.", 12)))
                        return invalid(error, "config key '%s': label '%s' is not allowed (org.agentix.* is agentd's)",
                                       key, k);
                if (asprintf(&kv, "%s=%s", k, v) < 0)
                        return -ENOMEM;
                r = strv_consume(field, kv);
                if (r < 0)
                        return r;
        }
        if (r < 0)
                return r;
        return sd_bus_message_exit_container(m);
}

/* A UID or GID (a number), or a user or group name as useradd allows them. */
static bool user_part_ok(const char *p, size_t len) {
        if (len == 0 || len > 32)
                return false;
        if (strspn(p, "0123456789") >= len)
                return true;
        return p[0] != '-' && !isdigit((unsigned char) p[0]) &&
               strspn(p, "abcdefghijklmnopqrstuvwxyz0123456789_-") >= len;
}

/* USER[:GROUP]. */
static bool user_ok(const char *s) {
        const char *colon = strchr(s, ':');

        if (!colon)
                return user_part_ok(s, strlen(s));
        return !strchr(colon + 1, ':') && user_part_ok(s, (size_t) (colon - s)) &&
               user_part_ok(colon + 1, strlen(colon + 1));
}

/* An IPv4 or IPv6 address with an optional /PREFIX, as iptables takes it. */
static bool cidr_ok(const char *s) {
        const char *slash = strchr(s, '/');
        char address[INET6_ADDRSTRLEN];
        unsigned char buf[sizeof(struct in6_addr)];
        size_t len = slash ? (size_t) (slash - s) : strlen(s);
        bool v6 = memchr(s, ':', len);
        unsigned long prefix;
        char *end;

        if (len == 0 || len >= sizeof(address))
                return false;
        memcpy(address, s, len);
        address[len] = '\0';
        if (inet_pton(v6 ? AF_INET6 : AF_INET, address, buf) != 1)
                return false;
        if (!slash)
                return true;
        if (!isdigit((unsigned char) slash[1]))
                return false;
        errno = 0;
        prefix = strtoul(slash + 1, &end, 10);
        return errno == 0 && *end == '\0' && prefix <= (v6 ? 128 : 32);
}

/* egress: CIDRs; an empty list is no network at all. */
static int read_egress(sd_bus_message *m, SandboxConfig *c, sd_bus_error *error) {
        const char *cidr;
        size_t n = 0;
        int r;

        strv_free(c->egress);
        c->egress = calloc(1, sizeof(char *));
        if (!c->egress)
                return -ENOMEM;
        r = sd_bus_message_enter_container(m, 'a', "s");
        if (r < 0)
                return r;
        while ((r = sd_bus_message_read(m, "s", &cidr)) > 0) {
                if (++n > SANDBOX_MAX_EGRESS)
                        return sd_bus_error_setf(error, AGENTD_ERROR_INVALID_CONFIG,
                                                 "config key 'egress' lists more than %d CIDRs", SANDBOX_MAX_EGRESS);
                if (!cidr_ok(cidr))
                        return invalid(error, "config key '%s': '%s' is not a CIDR (ADDRESS[/PREFIX], IPv4 or IPv6)",
                                       "egress", cidr);
                if (!strv_contains(c->egress, cidr)) {
                        r = strv_extend(&c->egress, cidr);
                        if (r < 0)
                                return r;
                }
        }
        if (r < 0)
                return r;
        return sd_bus_message_exit_container(m);
}

static int read_value(sd_bus_message *m, SandboxConfig *c, const char *key, const char *sig, sd_bus_error *error) {
        static const struct {
                const char *key, *sig;
        } types[] = {
                { "image", "s" }, { "bundle", "s" }, { "platform", "s" }, { "backend", "s" }, { "network", "s" },
                { "workdir", "s" }, { "setup", "s" }, { "env", "a{ss}" }, { "labels", "a{ss}" }, { "ttl", "t" },
                { "cpus", "d" }, { "memory", "t" }, { "pids", "t" }, { "bind_to_caller", "b" }, { "runtime", "s" },
                { "read_only", "b" }, { "user", "s" }, { "egress", "as" }, { "pool", "s" },
        };
        size_t i;
        int r;

        for (i = 0; i < ELEMENTSOF(types) && !streq(types[i].key, key); i++)
                ;
        if (i == ELEMENTSOF(types))
                return invalid(error, "unknown config key '%s'%s (known: image, bundle, platform, backend, env, labels, "
                                      "ttl, cpus, memory, pids, network, workdir, bind_to_caller, setup, runtime, read_only, user, "
                                      "egress, pool)", key,
                               NULL);
        if (!streq(sig, types[i].sig))
                return sd_bus_error_setf(error, AGENTD_ERROR_INVALID_CONFIG, "config key '%s' must be of type '%s', not '%s'",
                                         key, types[i].sig, sig);

        if (streq(key, "image"))
                return read_string(m, key, &c->image, 1024, error);
        if (streq(key, "bundle"))
                return read_string(m, key, &c->bundle, 1024, error);
        if (streq(key, "platform")) {
                r = read_string(m, key, &c->platform, 64, error);
                if (r >= 0 && !platform_ok(c->platform))
                        return invalid(error, "config key '%s' is OS/ARCH[/VARIANT] (linux/amd64), not '%s'", key,
                                       c->platform);
                return r;
        }
        if (streq(key, "backend"))
                return read_string(m, key, &c->backend, 64, error);
        if (streq(key, "network")) {
                r = read_string(m, key, &c->network, 256, error);
                if (r >= 0 && streq(c->network, "host"))
                        return invalid(error, "config key '%s': the host's network is not a sandbox's%s", key, NULL);
                return r;
        }
        if (streq(key, "workdir")) {
                r = read_string(m, key, &c->workdir, 4096, error);
                if (r >= 0 && c->workdir[0] != '/')
                        return invalid(error, "config key '%s' must be an absolute path, not '%s'", key, c->workdir);
                return r;
        }
        if (streq(key, "setup"))
                return read_string(m, key, &c->setup, 64 * 1024, error);
        if (streq(key, "user")) {
                r = read_string(m, key, &c->user, 64, error);
                if (r >= 0 && !user_ok(c->user))
                        return invalid(error, "config key '%s' is UID[:GID] or a user name the image knows, not '%s'",
                                       key, c->user);
                return r;
        }
        if (streq(key, "runtime")) {
                r = read_string(m, key, &c->runtime, 64, error);
                if (r >= 0 && strspn(c->runtime, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_") !=
                                      strlen(c->runtime))
                        return invalid(error, "config key '%s': '%s' is not a runtime name", key, c->runtime);
                return r;
        }
        if (streq(key, "egress"))
                return read_egress(m, c, error);
        if (streq(key, "pool")) {
                r = read_string(m, key, &c->pool, 64, error);
                if (r >= 0 && (c->pool[0] == '.' || strchr(c->pool, '/')))
                        return invalid(error, "config key '%s': '%s' is not a pool name", key, c->pool);
                return r;
        }
        if (streq(key, "env"))
                return read_map(m, key, true, &c->env, error);
        if (streq(key, "labels"))
                return read_map(m, key, false, &c->labels, error);
        if (streq(key, "bind_to_caller") || streq(key, "read_only")) {
                bool *field = streq(key, "read_only") ? &c->read_only : &c->bind_to_caller;
                int b;
                r = sd_bus_message_read(m, "b", &b);
                *field = b;
                return r;
        }
        if (streq(key, "cpus")) {
                double d;
                r = sd_bus_message_read(m, "d", &d);
                if (r < 0)
                        return r;
                if (!isfinite(d) || d < 0.01 || d > 4096)
                        return invalid(error, "config key '%s' must be a number of CPUs from 0.01 to 4096%s", key, NULL);
                c->limits.cpus = d;
                return 0;
        }
        {
                uint64_t t;
                r = sd_bus_message_read(m, "t", &t);
                if (r < 0)
                        return r;
                if (streq(key, "ttl")) {
                        if (t == 0)
                                return invalid(error, "config key '%s' must be at least 1 second%s", key, NULL);
                        c->ttl_sec = t;
                } else if (streq(key, "memory")) {
                        if (t < SANDBOX_MIN_MEMORY)
                                return invalid(error, "config key '%s' must be at least 32 MiB (%s)", key, "33554432");
                        c->limits.memory = t;
                } else {
                        if (t < SANDBOX_MIN_PIDS || t > (1ULL << 22))
                                return invalid(error, "config key '%s' must be from 32 to 4194304 processes%s", key, NULL);
                        c->limits.pids = t;
                }
        }
        return 0;
}

/* Within what the host allows (agentd.conf's [Limits] Max*= and MaxTTL=). */
static int check_maxima(const SandboxConfig *c, const SandboxLimits *maxima, uint64_t max_ttl_sec,
                        sd_bus_error *error) {
        if (maxima->cpus > 0 && c->limits.cpus > maxima->cpus)
                return sd_bus_error_setf(error, AGENTD_ERROR_INVALID_CONFIG,
                                         "config key 'cpus' asks for %g CPUs; this host allows at most %g (MaxCPUs= in "
                                         "agentd.conf)", c->limits.cpus, maxima->cpus);
        if (c->limits.memory > maxima->memory)
                return sd_bus_error_setf(error, AGENTD_ERROR_INVALID_CONFIG,
                                         "config key 'memory' asks for %llu bytes; this host allows at most %llu "
                                         "(MaxMemory= in agentd.conf)", (unsigned long long) c->limits.memory,
                                         (unsigned long long) maxima->memory);
        if (c->limits.pids > maxima->pids)
                return sd_bus_error_setf(error, AGENTD_ERROR_INVALID_CONFIG,
                                         "config key 'pids' asks for %llu processes; this host allows at most %llu "
                                         "(MaxPids= in agentd.conf)", (unsigned long long) c->limits.pids,
                                         (unsigned long long) maxima->pids);
        if (c->ttl_sec > max_ttl_sec)
                return sd_bus_error_setf(error, AGENTD_ERROR_INVALID_CONFIG,
                                         "config key 'ttl' asks for %llu s; this host allows at most %llu s (MaxTTL= in "
                                         "agentd.conf)", (unsigned long long) c->ttl_sec,
                                         (unsigned long long) max_ttl_sec);
        return 0;
}

int sandbox_config_read(sd_bus_message *m, const SandboxLimits *defaults, const SandboxLimits *maxima,
                        uint64_t max_ttl_sec, const char *default_backend, SandboxConfig **ret, sd_bus_error *error) {
        _cleanup_(sandbox_config_freep) SandboxConfig *c = calloc(1, sizeof(SandboxConfig));
        bool seen_limits[3] = {};
        int r;

        if (!c)
                return -ENOMEM;
        r = sd_bus_message_enter_container(m, 'a', "{sv}");
        if (r < 0)
                return r;
        for (;;) {
                const char *key, *sig;
                char type;

                r = sd_bus_message_enter_container(m, 'e', "sv");
                if (r < 0)
                        return r;
                if (r == 0)
                        break;
                r = sd_bus_message_read(m, "s", &key);
                if (r < 0)
                        return r;
                r = sd_bus_message_peek_type(m, &type, &sig);
                if (r < 0)
                        return r;
                r = sd_bus_message_enter_container(m, 'v', sig);
                if (r < 0)
                        return r;
                seen_limits[0] |= streq(key, "cpus");
                seen_limits[1] |= streq(key, "memory");
                seen_limits[2] |= streq(key, "pids");
                r = read_value(m, c, key, sig, error);
                if (r < 0)
                        return r;
                r = sd_bus_message_exit_container(m);
                if (r < 0)
                        return r;
                r = sd_bus_message_exit_container(m);
                if (r < 0)
                        return r;
        }
        r = sd_bus_message_exit_container(m);
        if (r < 0)
                return r;

        if (c->pool) {
                /* The pool fixes these; a create naming one could not be served by it. */
                const char *fixed = c->image ? "image" : c->bundle ? "bundle" : c->platform ? "platform" :
                                    c->backend ? "backend" : c->network ? "network" : c->runtime ? "runtime" :
                                    seen_limits[0] ? "cpus" : seen_limits[1] ? "memory" : seen_limits[2] ? "pids" : NULL;
                if (fixed)
                        return sd_bus_error_setf(error, AGENTD_ERROR_INVALID_CONFIG,
                                                 "config key '%s' comes from the pool ('%s'): name one or the other", fixed,
                                                 c->pool);
                *ret = TAKE_PTR(c);
                return 0;
        }
        if (!c->image)
                return invalid(error, "config key '%s' is required: the task image to run%s", "image", NULL);
        if (!c->bundle)
                return invalid(error, "config key '%s' is required: the bundle image (agentixctl build)%s", "bundle", NULL);
        if (!c->backend && !(c->backend = strdup(default_backend)))
                return -ENOMEM;
        /* Never unlimited: what the caller does not name comes from the daemon's defaults. */
        if (!seen_limits[0])
                c->limits.cpus = defaults->cpus;
        if (!seen_limits[1])
                c->limits.memory = defaults->memory;
        if (!seen_limits[2])
                c->limits.pids = defaults->pids;
        r = check_maxima(c, maxima, max_ttl_sec, error);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(c);
        return 0;
}

int sandbox_config_apply_runtimes(SandboxConfig *c, char *const *allowed, const char *default_runtime,
                                  sd_bus_error *error) {
        _cleanup_free_ char *list = NULL;
        size_t n = 0;

        if (!c->runtime && default_runtime && !(c->runtime = strdup(default_runtime)))
                return -ENOMEM;
        if (!c->runtime || !allowed || strv_contains(allowed, c->runtime))
                return 0;
        for (char *const *a = allowed; *a; a++)
                n += strlen(*a) + 2;
        list = calloc(n + 1, 1);
        if (!list)
                return -ENOMEM;
        for (char *const *a = allowed; *a; a++) {
                if (a != allowed)
                        strcat(list, ", ");
                strcat(list, *a);
        }
        (void) sd_bus_error_setf(error, AGENTD_ERROR_INVALID_CONFIG,
                                 "config key 'runtime': '%s' is not allowed here (agentd.conf [Runtimes] Allowed=: %s)",
                                 c->runtime, list);
        return -EINVAL;
}

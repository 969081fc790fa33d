/* SPDX-License-Identifier: MIT */
#include <ini.h>

#include "config-dir.h"
#include "config-values.h"
#include "macro.h"
#include "pool-config.h"
#include "strv.h"

PoolConfig *pool_config_free(PoolConfig *p) {
        if (!p)
                return NULL;
        free(p->name);
        free(p->default_user);
        sandbox_config_free(p->sandbox);
        free(p);
        return NULL;
}

void pool_configs_free(PoolConfig **l, size_t n) {
        for (size_t i = 0; i < n; i++)
                pool_config_free(l[i]);
        free(l);
}

typedef struct Parser {
        PoolConfig *p;
        bool in_pool, seen_size;
        char *error;
} Parser;

#define parser_fail(q, ...) message_set_first(&(q)->error, 0, __VA_ARGS__)

static int set_string(Parser *q, char **field, const char *key, const char *value, size_t max) {
        char *v;

        if (strempty(value) || strlen(value) > max)
                return parser_fail(q, "%s= must name something (at most %zu characters)", key, max);
        if (!(v = strdup(value)))
                return parser_fail(q, "out of memory");
        free(*field);
        *field = v;
        return 1;
}

/* What useradd takes (and a plain uid): letters, digits, '_', '-', '.', not starting with '-'. */
static bool account_name_ok(const char *s) {
        size_t n = strlen(s);

        if (n == 0 || n > 32 || s[0] == '-')
                return false;
        for (size_t i = 0; i < n; i++)
                if (!(s[i] >= 'a' && s[i] <= 'z') && !(s[i] >= 'A' && s[i] <= 'Z') && !(s[i] >= '0' && s[i] <= '9') &&
                    !strchr("_-.", s[i]))
                        return false;
        return true;
}

static int pool_key(Parser *q, const char *key, const char *value) {
        SandboxConfig *c = q->p->sandbox;
        uint64_t v;

        if (streq(key, "Size")) {
                if (parse_count(value, 0, POOL_MAX_SIZE, &v) < 0 || v == AGENTD_UNLIMITED)
                        return parser_fail(q, "Size=%s is not a number of sandboxes from 0 to %d", value, POOL_MAX_SIZE);
                q->p->size = v;
                q->seen_size = true;
                return 1;
        }
        if (streq(key, "Image"))
                return set_string(q, &c->image, key, value, 256);
        if (streq(key, "Bundle"))
                return set_string(q, &c->bundle, key, value, 256);
        if (streq(key, "Platform"))
                return set_string(q, &c->platform, key, value, 64);
        if (streq(key, "Network")) {
                if (streq(value, "host"))
                        return parser_fail(q, "Network=host: the host's network is not a sandbox's");
                return set_string(q, &c->network, key, value, 256);
        }
        if (streq(key, "Runtime")) {
                if (!runtime_name_ok(value))
                        return parser_fail(q, "Runtime=%s is not a runtime name", value);
                return set_string(q, &c->runtime, key, value, 64);
        }
        if (streq(key, "CPUs")) {
                if (parse_cpus(value, &c->limits.cpus) < 0)
                        return parser_fail(q, "CPUs=%s is not a number of CPUs from 0.01 to 4096", value);
                q->p->limits_set[0] = true;
                return 1;
        }
        if (streq(key, "Memory")) {
                if (parse_size(value, &c->limits.memory) < 0 || c->limits.memory < SANDBOX_MIN_MEMORY ||
                    c->limits.memory == AGENTD_UNLIMITED)
                        return parser_fail(q, "Memory=%s is not a size of at least 32M (like 512M, 2G)", value);
                q->p->limits_set[1] = true;
                return 1;
        }
        if (streq(key, "Pids")) {
                if (parse_count(value, SANDBOX_MIN_PIDS, 1ULL << 22, &c->limits.pids) < 0 ||
                    c->limits.pids == AGENTD_UNLIMITED)
                        return parser_fail(q, "Pids=%s is not a number of processes from 32 to 4194304", value);
                q->p->limits_set[2] = true;
                return 1;
        }
        if (streq(key, "DefaultUser")) {
                if (!account_name_ok(value))
                        return parser_fail(q, "DefaultUser=%s is not an account name or uid", value);
                return set_string(q, &q->p->default_user, key, value, 32);
        }
        return parser_fail(q, "unknown key %s= in [Pool] (Size, Image, Bundle, CPUs, Memory, Pids, Runtime, Network, "
                           "Platform, DefaultUser)", key);
}

static int on_entry(void *userdata, const char *section, const char *key, const char *value) {
        Parser *q = userdata;

        if (q->error)
                return 0;
        if (streq(section, "Pool"))
                return pool_key(q, key, value);
        if (strempty(section))
                return parser_fail(q, "%s= comes before [Pool]", key);
        return parser_fail(q, "unknown section [%s] (a pool file has one: [Pool])", section);
}

/* A pool is named by its file: the names agentixctl pools and the journal show. */
static bool pool_name_ok(const char *s) {
        return backend_name_ok(s);
}

int pool_config_parse_file(FILE *f, const char *name, const char *path, PoolConfig **ret, char **ret_error) {
        _cleanup_free_ PoolConfig *p = calloc(1, sizeof(PoolConfig));
        Parser q = {};
        const char *what = NULL;
        int line;

        if (!p || !(p->sandbox = calloc(1, sizeof(SandboxConfig))) || !(p->name = strdup(name))) {
                if (p) {
                        free(p->sandbox);
                        free(p->name);
                }
                return -ENOMEM;
        }
        q.p = p;
        line = ini_parse_file(f, on_entry, &q);
        if (line < 0) {
                pool_config_free(TAKE_PTR(p));
                return -EIO;
        }
        if (line > 0) {
                if (asprintf(ret_error, "%s:%d: %s", path, line, q.error ?: "not a key=value line or [Section]") < 0)
                        *ret_error = NULL;
                free(q.error);
                pool_config_free(TAKE_PTR(p));
                return -EINVAL;
        }
        if (!pool_name_ok(name))
                what = "the file name (without .pool) is not a pool name (lowercase letters, digits, '-' and '_')";
        else if (!q.seen_size)
                what = "Size= is required (how many sandboxes to keep ready)";
        else if (!p->sandbox->image)
                what = "Image= is required (the task image)";
        else if (!p->sandbox->bundle)
                what = "Bundle= is required (the bundle image)";
        if (what) {
                if (asprintf(ret_error, "%s: %s", path, what) < 0)
                        *ret_error = NULL;
                pool_config_free(TAKE_PTR(p));
                return -EINVAL;
        }
        *ret = TAKE_PTR(p);
        return 0;
}

int pool_configs_load_dir(const char *dir, PoolConfig ***ret, size_t *ret_n, char **ret_error) {
        _cleanup_strv_free_ char **paths = NULL;
        PoolConfig **pools = NULL;
        size_t n_pools = 0;
        int n, r;

        r = config_dir_list(dir, ".pool", POOL_MAX_FILES, &paths, &n, ret_error);
        if (r < 0)
                return r;
        if (n > 0 && !(pools = calloc(n, sizeof(*pools))))
                return -ENOMEM;
        for (int i = 0; r >= 0 && i < n; i++) {
                const char *file = strrchr(paths[i], '/') + 1;
                _cleanup_free_ char *name = strndup(file, strlen(file) - 5);
                _cleanup_fclose_ FILE *f = NULL;

                if (!name)
                        r = -ENOMEM;
                else if (!(f = fopen(paths[i], "re"))) {
                        r = -errno;
                        if (asprintf(ret_error, "%s: %s", paths[i], strerror(-r)) < 0)
                                *ret_error = NULL;
                } else {
                        r = pool_config_parse_file(f, name, paths[i], &pools[n_pools], ret_error);
                        if (r >= 0)
                                n_pools++;
                }
        }
        if (r < 0) {
                pool_configs_free(pools, n_pools);
                return r;
        }
        *ret = pools;
        *ret_n = n_pools;
        return 0;
}

void pool_config_format(const PoolConfig *p, FILE *out) {
        const SandboxConfig *c = p->sandbox;

        fprintf(out, "[Pool]\nSize=%llu\nImage=%s\nBundle=%s\n", (unsigned long long) p->size, c->image, c->bundle);
        if (p->limits_set[0])
                fprintf(out, "CPUs=%g\n", c->limits.cpus);
        if (p->limits_set[1])
                config_put_size(out, "Memory", c->limits.memory);
        if (p->limits_set[2])
                config_put_count(out, "Pids", c->limits.pids);
        if (c->runtime)
                fprintf(out, "Runtime=%s\n", c->runtime);
        if (c->network)
                fprintf(out, "Network=%s\n", c->network);
        if (c->platform)
                fprintf(out, "Platform=%s\n", c->platform);
        if (p->default_user)
                fprintf(out, "DefaultUser=%s\n", p->default_user);
}

/* SPDX-License-Identifier: MIT */
#include <dirent.h>
#include <stdio.h>
#include <unistd.h>

#include "backend.h"
#include "macro.h"
#include "manager.h"
#include "metrics.h"
#include "pool.h"
#include "strmap.h"

const double metrics_create_bounds[METRICS_CREATE_BUCKETS] = {
        0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120,
};

static const char *const source_names[_METRICS_SOURCE_MAX] = { "cold", "pool" };

static void observe(MetricsHistogram *h, double seconds) {
        for (size_t i = 0; i < METRICS_CREATE_BUCKETS; i++)
                if (seconds <= metrics_create_bounds[i]) {
                        h->buckets[i]++;
                        break;
                }
        h->count++;
        h->sum += seconds;
}

void metrics_create_done(Metrics *m, MetricsSource source, bool ok, double seconds) {
        m->creates[source][ok ? 0 : 1]++;
        if (ok)
                observe(&m->create_seconds[source], seconds);
}

void metrics_live_done(Metrics *m, MetricsLive what, bool ok, double seconds) {
        m->lives[what][ok ? 0 : 1]++;
        if (ok)
                observe(&m->live_seconds[what], seconds);
}

void metrics_backend_error(Metrics *m, const char *backend) {
        for (size_t i = 0; i < m->n_backends; i++)
                if (streq(m->backends[i].name, backend)) {
                        m->backends[i].errors++;
                        return;
                }
        if (m->n_backends < METRICS_BACKENDS_MAX) {
                snprintf(m->backends[m->n_backends].name, sizeof(m->backends[0].name), "%s", backend);
                m->backends[m->n_backends++].errors = 1;
        }
}

void metrics_call(Metrics *m, const char *method, bool error) {
        size_t i;

        for (i = 0; i < m->n_calls && m->calls[i].method != method; i++)
                ;
        if (i == m->n_calls) {
                if (m->n_calls == METRICS_METHODS_MAX)
                        return;
                m->calls[m->n_calls++] = (MetricsCall) { .method = method };
        }
        if (error)
                m->calls[i].error++;
        else
                m->calls[i].ok++;
}

/* ---- rendering ----------------------------------------------------------------------------- */

static int family(Buffer *b, const char *name, const char *type, const char *unit, const char *help) {
        int r = buffer_printf(b, "# TYPE %s %s\n", name, type);

        if (r >= 0 && unit)
                r = buffer_printf(b, "# UNIT %s %s\n", name, unit);
        return r < 0 ? r : buffer_printf(b, "# HELP %s %s\n", name, help);
}

/* Label values agentd writes are ids, names and runtimes: no quote or backslash in them, but a
 * pool or backend name is the operator's, so escape all the same. */
static int label(Buffer *b, const char *key, const char *value, bool first) {
        int r = buffer_printf(b, "%s%s=\"", first ? "" : ",", key);

        for (const char *p = value ?: ""; r >= 0 && *p; p++)
                r = *p == '"' || *p == '\\' ? buffer_printf(b, "\\%c", *p)
                  : *p == '\n'               ? buffer_append(b, "\\n", 2)
                                             : buffer_append(b, p, 1);
        return r < 0 ? r : buffer_append(b, "\"", 1);
}

typedef struct StateKey {
        const char *state, *backend, *runtime;
        uint64_t n;
} StateKey;

#define STATE_KEYS_MAX 256

static int render_sandboxes(Manager *m, Buffer *b) {
        StateKey keys[STATE_KEYS_MAX];
        size_t n = 0, state = 0;
        Sandbox *s;
        int r;

        while ((s = strmap_iterate(m->sandboxes, &state))) {
                const char *st = sandbox_state_to_string(s->state), *be = s->backend ? s->backend->name : "",
                           *rt = s->config && s->config->runtime ? s->config->runtime : "";
                size_t i;

                for (i = 0; i < n; i++)
                        if (streq(keys[i].state, st) && streq(keys[i].backend, be) && streq(keys[i].runtime, rt))
                                break;
                if (i == n) {
                        if (n == STATE_KEYS_MAX)
                                continue;
                        keys[n++] = (StateKey) { st, be, rt, 0 };
                }
                keys[i].n++;
        }
        r = family(b, "agentix_sandboxes", "gauge", NULL,
                   "Sandboxes agentd holds (warm pool members not among them), by state, backend and runtime.");
        for (size_t i = 0; r >= 0 && i < n; i++) {
                r = buffer_printf(b, "agentix_sandboxes{");
                r = r < 0 ? r : label(b, "state", keys[i].state, true);
                r = r < 0 ? r : label(b, "backend", keys[i].backend, false);
                r = r < 0 ? r : label(b, "runtime", keys[i].runtime, false);
                r = r < 0 ? r : buffer_printf(b, "} %llu\n", (unsigned long long) keys[i].n);
        }
        return r;
}

/* One histogram's series, with one label (key NULL: none). */
static int render_histogram(Buffer *b, const char *name, const char *key, const char *value, const MetricsHistogram *h) {
        char with[96] = "", only[96] = "";
        uint64_t cumulative = 0;
        int r = 0;

        if (key) {
                snprintf(with, sizeof(with), "%s=\"%s\",", key, value);
                snprintf(only, sizeof(only), "{%s=\"%s\"}", key, value);
        }
        for (size_t i = 0; r >= 0 && i < METRICS_CREATE_BUCKETS; i++) {
                cumulative += h->buckets[i];
                r = buffer_printf(b, "%s_bucket{%sle=\"%g\"} %llu\n", name, with, metrics_create_bounds[i],
                                  (unsigned long long) cumulative);
        }
        return r < 0 ? r :
                       buffer_printf(b, "%s_bucket{%sle=\"+Inf\"} %llu\n%s_sum%s %.6f\n%s_count%s %llu\n", name, with,
                                     (unsigned long long) h->count, name, only, h->sum, name, only,
                                     (unsigned long long) h->count);
}

static int render_creates(Manager *m, Buffer *b) {
        const Metrics *x = &m->metrics;
        int r;

        r = family(b, "agentix_creates", "counter", NULL,
                   "Creates answered since agentd started, by source (made cold, or claimed from a warm pool) and "
                   "result.");
        for (int s = 0; r >= 0 && s < _METRICS_SOURCE_MAX; s++)
                for (int ok = 0; r >= 0 && ok < 2; ok++)
                        r = buffer_printf(b, "agentix_creates_total{source=\"%s\",result=\"%s\"} %llu\n", source_names[s],
                                          ok == 0 ? "ok" : "error", (unsigned long long) x->creates[s][ok]);
        r = r < 0 ? r :
                    family(b, "agentix_create_duration_seconds", "histogram", "seconds",
                           "How long a create took until its runtime answered, by source (successful creates).");
        for (int s = 0; r >= 0 && s < _METRICS_SOURCE_MAX; s++)
                r = render_histogram(b, "agentix_create_duration_seconds", "source", source_names[s], &x->create_seconds[s]);
        return r;
}

/* Hibernates and resumes of hibernated sandboxes: how many, how they ended, how long they took. */
static int render_lives(Manager *m, Buffer *b) {
        static const struct {
                const char *counter, *counter_help, *histogram, *histogram_help;
        } f[_METRICS_LIVE_MAX] = {
                [METRICS_HIBERNATE] = { "agentix_hibernates", "Hibernate() calls, by result.",
                                        "agentix_hibernate_duration_seconds",
                                        "How long a successful Hibernate() took, from the call to the checkpoint on disk." },
                [METRICS_RESUME] = { "agentix_resumes", "Resume() calls of hibernated sandboxes, by result.",
                                     "agentix_resume_duration_seconds",
                                     "How long a successful Resume() of a hibernated sandbox took, until its runtime "
                                     "answered." },
        };
        const Metrics *x = &m->metrics;
        int r = 0;

        for (int w = 0; r >= 0 && w < _METRICS_LIVE_MAX; w++) {
                r = family(b, f[w].counter, "counter", NULL, f[w].counter_help);
                for (int ok = 0; r >= 0 && ok < 2; ok++)
                        r = buffer_printf(b, "%s_total{result=\"%s\"} %llu\n", f[w].counter, ok == 0 ? "ok" : "error",
                                          (unsigned long long) x->lives[w][ok]);
                r = r < 0 ? r : family(b, f[w].histogram, "histogram", "seconds", f[w].histogram_help);
                r = r < 0 ? r : render_histogram(b, f[w].histogram, NULL, NULL, &x->live_seconds[w]);
        }
        return r;
}

static int render_pools(Manager *m, Buffer *b) {
        int r = family(b, "agentix_pool_ready", "gauge", NULL, "Warm pool members ready to be claimed.");

        for (size_t i = 0; r >= 0 && i < m->n_pools; i++) {
                r = buffer_printf(b, "agentix_pool_ready{");
                r = r < 0 ? r : label(b, "pool", m->pools[i]->name, true);
                r = r < 0 ? r : buffer_printf(b, "} %zu\n", m->pools[i]->n_ready);
        }
        r = r < 0 ? r : family(b, "agentix_pool_size", "gauge", NULL, "Warm pool members a pool keeps (Size=).");
        for (size_t i = 0; r >= 0 && i < m->n_pools; i++) {
                if (!m->pools[i]->config)
                        continue; /* its file went: draining */
                r = buffer_printf(b, "agentix_pool_size{");
                r = r < 0 ? r : label(b, "pool", m->pools[i]->name, true);
                r = r < 0 ? r : buffer_printf(b, "} %llu\n", (unsigned long long) m->pools[i]->config->size);
        }
        return r;
}

typedef struct UserSum {
        uid_t uid;
        uint64_t sandboxes, memory;
        double cpus;
} UserSum;

#define USERS_MAX 4096

static int render_users(Manager *m, Buffer *b) {
        _cleanup_free_ UserSum *u = calloc(USERS_MAX, sizeof(UserSum));
        size_t n = 0, state = 0;
        Sandbox *s;
        int r;

        if (!u)
                return -ENOMEM;
        while ((s = strmap_iterate(m->sandboxes, &state))) {
                size_t i;

                for (i = 0; i < n && u[i].uid != s->owner; i++)
                        ;
                if (i == n) {
                        if (n == USERS_MAX)
                                continue;
                        u[n++] = (UserSum) { .uid = s->owner };
                }
                u[i].sandboxes++;
                if (s->config) {
                        u[i].cpus += s->config->limits.cpus;
                        u[i].memory += s->config->limits.memory;
                }
        }
        r = family(b, "agentix_user_sandboxes", "gauge", NULL, "Each user's sandboxes (creating ones included).");
        for (size_t i = 0; r >= 0 && i < n; i++)
                r = buffer_printf(b, "agentix_user_sandboxes{uid=\"%u\"} %llu\n", (unsigned) u[i].uid,
                                  (unsigned long long) u[i].sandboxes);
        r = r < 0 ? r : family(b, "agentix_user_cpus", "gauge", NULL, "The CPUs each user's sandboxes reserve (limits).");
        for (size_t i = 0; r >= 0 && i < n; i++)
                r = buffer_printf(b, "agentix_user_cpus{uid=\"%u\"} %g\n", (unsigned) u[i].uid, u[i].cpus);
        r = r < 0 ? r :
                    family(b, "agentix_user_memory_bytes", "gauge", "bytes",
                           "The memory each user's sandboxes reserve (limits).");
        for (size_t i = 0; r >= 0 && i < n; i++)
                r = buffer_printf(b, "agentix_user_memory_bytes{uid=\"%u\"} %llu\n", (unsigned) u[i].uid,
                                  (unsigned long long) u[i].memory);
        return r;
}

static int render_calls(Manager *m, Buffer *b) {
        const Metrics *x = &m->metrics;
        int r;

        r = family(b, "agentix_backend_errors", "counter", NULL,
                   "Backend calls that failed (creates, removes) since agentd started, by backend.");
        for (size_t i = 0; r >= 0 && i < m->n_backends; i++) {
                uint64_t errors = 0;

                for (size_t j = 0; j < x->n_backends; j++)
                        if (streq(x->backends[j].name, m->backends[i]->name))
                                errors = x->backends[j].errors;
                r = buffer_printf(b, "agentix_backend_errors_total{");
                r = r < 0 ? r : label(b, "backend", m->backends[i]->name, true);
                r = r < 0 ? r : buffer_printf(b, "} %llu\n", (unsigned long long) errors);
        }
        r = r < 0 ? r :
                    family(b, "agentix_dbus_calls", "counter", NULL,
                           "D-Bus method calls since agentd started, by method and how they were answered at once.");
        for (size_t i = 0; r >= 0 && i < x->n_calls; i++)
                r = buffer_printf(b,
                                  "agentix_dbus_calls_total{method=\"%s\",result=\"ok\"} %llu\n"
                                  "agentix_dbus_calls_total{method=\"%s\",result=\"error\"} %llu\n",
                                  x->calls[i].method, (unsigned long long) x->calls[i].ok, x->calls[i].method,
                                  (unsigned long long) x->calls[i].error);
        return r;
}

static int render_self(Buffer *b) {
        unsigned long long pages = 0, resident = 0;
        uint64_t fds = 0;
        FILE *f = fopen("/proc/self/statm", "re");
        DIR *d;
        int r;

        if (f) {
                if (fscanf(f, "%llu %llu", &pages, &resident) != 2)
                        resident = 0;
                fclose(f);
        }
        d = opendir("/proc/self/fd");
        for (struct dirent *e = d ? readdir(d) : NULL; e; e = readdir(d))
                fds += e->d_name[0] != '.';
        if (d) {
                closedir(d);
                fds--; /* the directory's own */
        }
        r = family(b, "agentix_agentd_resident_memory_bytes", "gauge", "bytes", "agentd's resident memory.");
        r = r < 0 ? r :
                    buffer_printf(b, "agentix_agentd_resident_memory_bytes %llu\n",
                                  resident * (unsigned long long) sysconf(_SC_PAGESIZE));
        r = r < 0 ? r : family(b, "agentix_agentd_open_fds", "gauge", NULL, "agentd's open file descriptors.");
        return r < 0 ? r : buffer_printf(b, "agentix_agentd_open_fds %llu\n", (unsigned long long) fds);
}

/* One per-sandbox family: sandboxes whose backend could not tell the number are left out. */
static int render_usage_family(Buffer *b, const MetricsSandboxUsage *u, size_t n, const char *name, const char *type,
                               const char *unit, const char *help, size_t offset, double scale) {
        int r = family(b, name, type, unit, help);

        for (size_t i = 0; r >= 0 && i < n; i++) {
                uint64_t v = *(const uint64_t *) ((const uint8_t *) &u[i].stats + offset);

                if (v == AGENTD_STATS_UNKNOWN)
                        continue;
                r = buffer_printf(b, "%s%s{id=\"%s\",uid=\"%u\"} %.17g\n", name, streq(type, "counter") ? "_total" : "",
                                  u[i].id, (unsigned) u[i].owner, (double) v * scale);
        }
        return r;
}

static int render_usage(const MetricsSandboxUsage *u, size_t n, Buffer *b) {
        static const struct {
                const char *name, *type, *unit, *help;
                size_t offset;
                double scale;
        } series[] = {
                { "agentix_sandbox_cpu_seconds", "counter", "seconds", "CPU time a sandbox used.",
                  offsetof(AgentdSandboxStats, cpu_usec), 1e-6 },
                { "agentix_sandbox_memory_bytes", "gauge", "bytes", "Memory charged to a sandbox now.",
                  offsetof(AgentdSandboxStats, memory_current), 1 },
                { "agentix_sandbox_memory_limit_bytes", "gauge", "bytes", "A sandbox's memory limit.",
                  offsetof(AgentdSandboxStats, memory_limit), 1 },
                { "agentix_sandbox_pids", "gauge", NULL, "Processes in a sandbox now.", offsetof(AgentdSandboxStats, pids_current),
                  1 },
                { "agentix_sandbox_network_receive_bytes", "counter", "bytes", "Bytes a sandbox received.",
                  offsetof(AgentdSandboxStats, net_rx_bytes), 1 },
                { "agentix_sandbox_network_transmit_bytes", "counter", "bytes", "Bytes a sandbox sent.",
                  offsetof(AgentdSandboxStats, net_tx_bytes), 1 },
                { "agentix_sandbox_io_read_bytes", "counter", "bytes", "Bytes a sandbox read from block devices.",
                  offsetof(AgentdSandboxStats, io_read_bytes), 1 },
                { "agentix_sandbox_io_write_bytes", "counter", "bytes", "Bytes a sandbox wrote to block devices.",
                  offsetof(AgentdSandboxStats, io_write_bytes), 1 },
        };
        int r = 0;

        for (size_t i = 0; r >= 0 && i < ELEMENTSOF(series); i++)
                r = render_usage_family(b, u, n, series[i].name, series[i].type, series[i].unit, series[i].help,
                                        series[i].offset, series[i].scale);
        return r;
}

int metrics_render(Manager *m, const MetricsSandboxUsage *usage, size_t n, Buffer *out) {
        int r = render_sandboxes(m, out);

        r = r < 0 ? r : render_creates(m, out);
        r = r < 0 ? r : render_lives(m, out);
        r = r < 0 ? r : render_pools(m, out);
        r = r < 0 ? r : render_users(m, out);
        r = r < 0 ? r : render_calls(m, out);
        r = r < 0 ? r : render_self(out);
        if (r >= 0 && n > 0)
                r = render_usage(usage, n, out);
        return r < 0 ? r : buffer_printf(out, "# EOF\n");
}

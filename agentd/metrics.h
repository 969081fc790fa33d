/* SPDX-License-Identifier: MIT */
#pragma once

/* What agentd counts for Prometheus (metrics.c renders it as OpenMetrics text, with what it
 * reads of its records at that moment; metrics-endpoint.c serves it). The counters live in the
 * Manager and count from agentd's start: creates by where they came from (made cold, or a
 * claim from a warm pool) and how they ended, with their latency as a histogram; failed
 * backend calls by backend; D-Bus method calls by method and how the handler answered (at
 * once; a create that fails later counts in the creates). Bounded: the method names are those
 * of agentd's own vtables, the backends those agentd.conf loads. */

#include <stdbool.h>
#include <stdint.h>

#include <sys/types.h>

#include "agentix/agentd-backend.h"
#include "buffer.h"

#define METRICS_CREATE_BUCKETS 14
#define METRICS_METHODS_MAX 48
#define METRICS_BACKENDS_MAX 16

typedef enum MetricsSource {
        METRICS_COLD,
        METRICS_POOL,
        _METRICS_SOURCE_MAX,
} MetricsSource;

typedef struct MetricsHistogram {
        uint64_t buckets[METRICS_CREATE_BUCKETS]; /* cumulative at render time, per bucket here */
        uint64_t count;
        double sum;
} MetricsHistogram;

typedef struct MetricsCall {
        const char *method;     /* static: the vtable's name */
        uint64_t ok, error;
} MetricsCall;

typedef enum MetricsLive {
        METRICS_HIBERNATE,
        METRICS_RESUME,       /* of a hibernated sandbox */
        _METRICS_LIVE_MAX,
} MetricsLive;

typedef struct Metrics {
        uint64_t creates[_METRICS_SOURCE_MAX][2];      /* [source][0: ok, 1: error] */
        MetricsHistogram create_seconds[_METRICS_SOURCE_MAX];
        uint64_t lives[_METRICS_LIVE_MAX][2];          /* hibernates and resumes: [0: ok, 1: error] */
        MetricsHistogram live_seconds[_METRICS_LIVE_MAX];
        MetricsCall calls[METRICS_METHODS_MAX];
        size_t n_calls;
        struct {
                char name[32];
                uint64_t errors;
        } backends[METRICS_BACKENDS_MAX];
        size_t n_backends;
} Metrics;

extern const double metrics_create_bounds[METRICS_CREATE_BUCKETS]; /* seconds; +Inf after */

void metrics_create_done(Metrics *m, MetricsSource source, bool ok, double seconds);
/* A Hibernate() or a Resume() of a hibernated sandbox ended (hibernate.c). */
void metrics_live_done(Metrics *m, MetricsLive what, bool ok, double seconds);
void metrics_backend_error(Metrics *m, const char *backend);
/* A D-Bus call of method (a static string) answered at once with an error or not. */
void metrics_call(Metrics *m, const char *method, bool error);

/* One sandbox's usage for the per-sandbox series ([Metrics] PerSandbox=yes). */
typedef struct MetricsSandboxUsage {
        char id[32];
        uid_t owner;
        AgentdSandboxStats stats;
} MetricsSandboxUsage;

struct Manager;
/* The whole exposition, "# EOF" included: the counters, what agentd's records say now
 * (sandboxes by state, backend and runtime; pools; each user's sandboxes, CPUs and memory),
 * agentd's own memory and fds, and the per-sandbox series of usage (n may be 0). */
int metrics_render(struct Manager *mgr, const MetricsSandboxUsage *usage, size_t n, Buffer *out);

/* SPDX-License-Identifier: MIT */
#pragma once

/* /metrics over HTTP (OpenMetrics text, metrics.c): on the socket systemd passes under the name
 * "metrics" (agentix-metrics.socket), else on agentd.conf's [Metrics] Listen=, else not at all.
 * With [Metrics] PerSandbox=yes a scrape first asks each running sandbox's backend for its
 * usage (stats()), then answers. */

typedef struct MetricsEndpoint MetricsEndpoint;
struct Manager;

/* 0 with *ret NULL when there is nothing to serve on; a socket that cannot be listened on is
 * one log line naming the file, the line and the key, and no endpoint (agentd runs on). */
int metrics_endpoint_start(struct Manager *m, MetricsEndpoint **ret);
MetricsEndpoint *metrics_endpoint_free(MetricsEndpoint *e);

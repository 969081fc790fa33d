/* SPDX-License-Identifier: MIT */
#include <stdio.h>
#include <string.h>
#include <systemd/sd-daemon.h>

#include "backend.h"
#include "http-server.h"
#include "log.h"
#include "macro.h"
#include "manager.h"
#include "metrics-endpoint.h"
#include "tls.h"
#include "metrics.h"
#include "sandbox.h"
#include "strmap.h"

#define CONTENT_TYPE "application/openmetrics-text; version=1.0.0; charset=utf-8"
#define SCRAPE_SANDBOXES_MAX 8192 /* per-sandbox series at most: bounded like agentd's own records */
#define SCRAPE_CONNECTIONS_MAX 64
#define SCRAPE_REQUEST_TIMEOUT_MS 10000

struct MetricsEndpoint {
        Manager *manager;
        HttpServer *http;
};

/* A scrape with PerSandbox=yes: answered once every asked backend has answered. Its array is
 * sized when the sandboxes are read and asked, in one turn of the loop, and filled only by
 * those answers: sandboxes made meanwhile are not in this scrape. */
typedef struct Scrape {
        Manager *manager;
        HttpConn *conn;         /* NULL once the client left */
        MetricsSandboxUsage *usage;
        size_t n, size, pending;
} Scrape;

static void scrape_answer(Scrape *s) {
        _cleanup_buffer_ Buffer out = BUFFER_NULL;

        if (!s->conn)
                return;
        if (metrics_render(s->manager, s->usage, s->n, &out) < 0) {
                (void) http_conn_respond(s->conn, 500, "text/plain", NULL);
        } else
                (void) http_conn_respond(s->conn, 200, CONTENT_TYPE, &out);
        http_conn_detach_handler(s->conn);
        s->conn = NULL;
}

static void scrape_unref(Scrape *s) {
        if (--s->pending > 0)
                return;
        scrape_answer(s);
        free(s->usage);
        free(s);
}

typedef struct ScrapeOne {
        Scrape *scrape;
        char id[32];
        uid_t owner;
} ScrapeOne;

static void on_stats(void *userdata, const AgentdSandboxStats *stats, const char *error_name, const char *message) {
        _cleanup_free_ ScrapeOne *one = userdata;
        Scrape *s = one->scrape;

        /* One answer per sandbox asked, and no more were asked than there are places. */
        if (stats && s->n < s->size) {
                MetricsSandboxUsage *u = &s->usage[s->n++];

                snprintf(u->id, sizeof(u->id), "%s", one->id);
                u->owner = one->owner;
                u->stats = *stats;
        }
        scrape_unref(s);
}

static void on_closed(HttpConn *c, void *data) {
        Scrape *s = data;

        if (s->pending == 0) {
                /* Gone before its request was whole: nothing was asked. */
                free(s);
                return;
        }
        s->conn = NULL; /* the backends' answers still come: the last one frees it */
}

static bool scraped(const Sandbox *sb) {
        return sb->state == SANDBOX_RUNNING || (sb->state == SANDBOX_PAUSED && sb->backend->ops->stats);
}

static void on_request(HttpConn *c, void *data) {
        Scrape *s = data;
        size_t state = 0;
        Sandbox *sb;

        /* Sized now, from the sandboxes asked now. */
        s->size = MIN(strmap_size(s->manager->sandboxes), (size_t) SCRAPE_SANDBOXES_MAX);
        s->usage = calloc(MAX(s->size, (size_t) 1), sizeof(MetricsSandboxUsage));
        if (!s->usage) {
                (void) http_conn_respond_error(c, 500, 0, "out of memory");
                http_conn_detach_handler(c);
                free(s);
                return;
        }
        /* Held until every backend answered (some answer before stats() returns). */
        s->pending = 1;
        for (size_t asked = 0; asked < s->size && (sb = strmap_iterate(s->manager->sandboxes, &state));) {
                ScrapeOne *one;

                if (!scraped(sb))
                        continue;
                one = calloc(1, sizeof(*one));
                if (!one)
                        break;
                *one = (ScrapeOne) { .scrape = s, .owner = sb->owner };
                snprintf(one->id, sizeof(one->id), "%s", sb->id);
                s->pending++;
                asked++;
                if (sandbox_read_stats(s->manager->event, sb, on_stats, one) < 0) {
                        free(one);
                        s->pending--;
                }
        }
        scrape_unref(s);
}

static const HttpHandler scrape_handler = {
        .request = on_request,
        .closed = on_closed,
};

static void route(HttpConn *c, const char *path, void *userdata) {
        MetricsEndpoint *e = userdata;
        _cleanup_buffer_ Buffer out = BUFFER_NULL;
        Scrape *s;

        if (!streq(path, "/metrics")) {
                (void) http_conn_respond_error(c, 404, 0, "agentd serves /metrics only");
                return;
        }
        if (c->method != HTTP_METHOD_GET) {
                (void) http_conn_respond_error(c, 405, 0, "/metrics takes GET");
                return;
        }
        if (c->body_pending) {
                /* A scrape has nothing to send: a body is refused at its head, never waited
                 * for, and the connection ends with the answer. */
                c->close_after_response = true;
                (void) http_conn_respond_error(c, 400, 0, "/metrics takes no body");
                return;
        }
        if (!e->manager->config->metrics_per_sandbox) {
                if (metrics_render(e->manager, NULL, 0, &out) < 0) {
                        (void) http_conn_respond_error(c, 500, 0, "out of memory");
                        return;
                }
                (void) http_conn_respond(c, 200, CONTENT_TYPE, &out);
                return;
        }
        s = calloc(1, sizeof(*s));
        if (!s) {
                (void) http_conn_respond_error(c, 500, 0, "out of memory");
                return;
        }
        *s = (Scrape) { .manager = e->manager, .conn = c };
        http_conn_set_handler(c, &scrape_handler, s, 0);
}

/* The line of the last KEY= in [SECTION] of path, for a message: 0 when not found. */
static unsigned line_of(const char *path, const char *section, const char *key) {
        _cleanup_fclose_ FILE *f = fopen(path, "re");
        char buf[1024], want[64];
        unsigned line = 0, found = 0;
        bool in = false;

        if (!f)
                return 0;
        snprintf(want, sizeof(want), "[%s]", section);
        while (fgets(buf, sizeof(buf), f)) {
                char *p = buf + strspn(buf, " \t");

                line++;
                if (*p == '[')
                        in = strneq(p, want, strlen(want));
                else if (in && strneq(p, key, strlen(key)) && (p[strlen(key)] == '=' || p[strlen(key)] == ' '))
                        found = line;
        }
        return found;
}

int metrics_endpoint_start(Manager *m, MetricsEndpoint **ret) {
        _cleanup_free_ char *host = NULL;
        const char *listen = m->config->metrics_listen, *colon;
        char **names = NULL;
        MetricsEndpoint *e;
        int fd = -1, n, r;

        *ret = NULL;
        /* systemd's socket, named "metrics" (agentd may be given others in time). */
        n = sd_listen_fds_with_names(false, &names);
        for (int i = 0; i < n; i++) {
                if (names && names[i] && streq(names[i], "metrics"))
                        fd = SD_LISTEN_FDS_START + i;
                free(names ? names[i] : NULL);
        }
        free(names);
        if (fd < 0 && !listen)
                return 0;

        e = calloc(1, sizeof(*e));
        if (!e)
                return -ENOMEM;
        e->manager = m;
        r = http_server_new(m->event,
                            &(HttpServerConfig) {
                                    /* A scraper sends a request whole and at once: one that
                                     * trickles its head loses its place soon. */
                                    .max_connections = SCRAPE_CONNECTIONS_MAX,
                                    .request_timeout_ms = SCRAPE_REQUEST_TIMEOUT_MS,
                            },
                            &e->http);
        if (r >= 0)
                r = http_server_add_route(e->http, "/", route, e);
        if (r < 0) {
                metrics_endpoint_free(e);
                return r;
        }
        if (m->config->metrics_tls_cert) {
                _cleanup_(SSL_CTX_freep) SSL_CTX *ctx = NULL;
                _cleanup_free_ char *error = NULL;

                /* HTTPS, so that /metrics may be scraped from beyond this machine. */
                r = tls_server_context_from_files(m->config->metrics_tls_cert, m->config->metrics_tls_key, &ctx, &error);
                if (r >= 0)
                        r = http_server_set_tls(e->http, ctx);
                if (r < 0) {
                        log_error("[Metrics] TLSCertificate=%s TLSKey=%s: %s; agentd runs without /metrics.",
                                  m->config->metrics_tls_cert, m->config->metrics_tls_key, error ?: strerror(-r));
                        metrics_endpoint_free(e);
                        return 0;
                }
        }
        if (fd >= 0) {
                r = http_server_listen_fd(e->http, fd);
                if (r < 0) {
                        log_error_errno(r, "Cannot serve /metrics on the socket systemd passed: %m");
                        metrics_endpoint_free(e);
                        return 0;
                }
                log_info("Serving /metrics on the socket systemd passed (agentix-metrics.socket).");
                *ret = e;
                return 0;
        }
        colon = strrchr(listen, ':');
        host = listen[0] == '[' ? strndup(listen + 1, (size_t) (colon - listen - 2)) : strndup(listen, (size_t) (colon - listen));
        if (!host) {
                metrics_endpoint_free(e);
                return -ENOMEM;
        }
        r = http_server_listen(e->http, host, colon + 1);
        if (r < 0) {
                const char *file = m->config->metrics_listen_where ?: m->config_path;

                log_error_errno(r, "%s:%u: [Metrics] Listen=%s: cannot listen there: %m; agentd runs without /metrics.",
                                file, line_of(file, "Metrics", "Listen"), listen);
                metrics_endpoint_free(e);
                return 0;
        }
        log_info("Serving /metrics on %s%s.", listen, m->config->metrics_tls_cert ? " over HTTPS" : "");
        *ret = e;
        return 0;
}

MetricsEndpoint *metrics_endpoint_free(MetricsEndpoint *e) {
        if (!e)
                return NULL;
        http_server_free(e->http);
        free(e);
        return NULL;
}

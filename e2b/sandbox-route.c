/* SPDX-License-Identifier: MIT */
/* Sandbox traffic (sandbox-route.h). http-conn.c parses a request's head as for any request; one
 * that names a sandbox is handed here with the bytes read so far. Its runtime (address and
 * token, from agentd's GetRuntimeAccess, kept until agentd says the sandbox went) decides:
 * the access token is checked, the head rewritten for the runtime, and the port proxy
 * (http-proxy.h) moves the bytes from then on. A runtime that serves TLS (https:// URL) is
 * reached over TLS verified against agentd's runtime CA (Manager.RuntimeCA, read at start and
 * again after a certificate did not verify: agentd's CA may have changed). */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include <jansson.h>
#include <openssl/crypto.h>

#include "control-api.h"
#include "http-head.h"
#include "http-proxy.h"
#include "log.h"
#include "macro.h"
#include "proxy-request.h"
#include "proxy-token.h"
#include "sandbox-route.h"
#include "strmap.h"
#include "tls-front.h"
#include "tls.h"

#define LOOKUP_TIMEOUT_USEC (30ULL * 1000 * 1000)
#define PENDING_MAX 1024        /* requests waiting for a runtime's address */
#define RUNTIMES_MAX 8192       /* runtimes remembered (then forgotten all at once) */
#define ID_MAX 64

typedef struct Runtime {
        char id[ID_MAX];
        struct sockaddr_in addr;
        bool tls;
        char host[INET_ADDRSTRLEN];
        char token[128];
        char access[65];        /* e2b_access_token(token) */
} Runtime;

typedef struct Pending Pending;

struct SandboxRoute {
        sd_event *event;
        HttpServer *http;
        char *domain;
        Proxy *proxy;
        sd_bus *bus;
        sd_bus_slot *removed_match;
        StrMap *runtimes;       /* id → Runtime */
        Pending *pending;
        unsigned n_pending;
        SSL_CTX *runtime_tls;   /* verifies runtimes against agentd's CA; NULL: not read (yet) */
        sd_bus_slot *ca_slot;   /* reading Manager.RuntimeCA */
        TlsFronts fronts;       /* TLS connections to runtimes */
};

/* A request on its way to an https:// runtime: the TLS connection is being made. */
typedef struct Forwarding {
        SandboxRoute *route;
        int fd;
        Buffer out;             /* the head for the runtime, and what followed */
} Forwarding;

static void refuse(int fd, unsigned status, const char *message);

static int on_runtime_ca(sd_bus_message *reply, void *userdata, sd_bus_error *ret_error) {
        SandboxRoute *route = userdata;
        const char *pem = NULL;
        SSL_CTX *ctx = NULL;
        _cleanup_free_ char *error = NULL;

        route->ca_slot = sd_bus_slot_unref(route->ca_slot);
        if (sd_bus_message_is_method_error(reply, NULL) || sd_bus_message_enter_container(reply, 'v', "s") < 0 ||
            sd_bus_message_read(reply, "s", &pem) < 0)
                return 0; /* asked again at the next TLS runtime */
        if (strempty(pem))
                return 0; /* agentd serves no runtime over TLS */
        if (tls_client_context_new(pem, strlen(pem), &ctx, &error) < 0) {
                log_warning("agentd's runtime CA cannot be used: %s", strna(error));
                return 0;
        }
        SSL_CTX_free(route->runtime_tls);
        route->runtime_tls = ctx;
        return 0;
}

static void read_runtime_ca(SandboxRoute *route) {
        if (route->ca_slot)
                return;
        if (sd_bus_call_method_async(route->bus, &route->ca_slot, AGENTD_NAME, MANAGER_PATH,
                                     "org.freedesktop.DBus.Properties", "Get", on_runtime_ca, route, "ss",
                                     MANAGER_IFACE, "RuntimeCA") < 0)
                log_warning("Cannot ask agentd for its runtime CA.");
}

static int on_runtime_tls_ready(int plain_fd, void *userdata) {
        Forwarding *f = userdata;

        proxy_forward_connected(f->route->proxy, f->fd, plain_fd, &f->out);
        free(f);
        return 0;
}

static void on_runtime_tls_failed(const char *why, void *userdata) {
        Forwarding *f = userdata;
        _cleanup_free_ char *msg = NULL;

        if (why && asprintf(&msg, "the sandbox's runtime cannot be reached over TLS: %s", why) < 0)
                msg = NULL;
        if (why && strstr(why, "certificate"))
                read_runtime_ca(f->route); /* agentd's CA may be a new one */
        refuse(f->fd, 502, msg ?: "the sandbox's runtime cannot be reached over TLS");
        buffer_done(&f->out);
        free(f);
}

/* Forward to an https:// runtime: a TLS connection of ours, verified, then the port proxy on
 * its plain end. fd and out's bytes are taken. */
static void forward_tls(SandboxRoute *route, int fd, Buffer *out, const Runtime *rt) {
        Forwarding *f;

        if (!route->runtime_tls) {
                read_runtime_ca(route);
                refuse(fd, 503, "agentd's runtime CA is not known yet (the sandbox's runtime serves TLS): try again");
                buffer_done(out);
                return;
        }
        f = calloc(1, sizeof(*f));
        if (!f) {
                refuse(fd, 500, "out of memory");
                buffer_done(out);
                return;
        }
        *f = (Forwarding) { .route = route, .fd = fd, .out = *out };
        *out = BUFFER_NULL;
        if (tls_front_connect(route->event, route->runtime_tls, (const struct sockaddr *) &rt->addr, sizeof(rt->addr),
                              rt->host, &route->fronts, on_runtime_tls_ready, on_runtime_tls_failed, f) < 0) {
                refuse(fd, 502, "cannot connect to the sandbox's runtime");
                buffer_done(&f->out);
                free(f);
        }
}

/* A request waiting for its sandbox's runtime to be looked up. */
struct Pending {
        SandboxRoute *route;
        Pending *prev, *next;
        int fd;
        Buffer bytes;           /* the head and whatever followed */
        char id[ID_MAX];
        unsigned port;
        sd_bus_slot *slot;
};

/* ---- answers of the gateway's own ------------------------------------------------------------ */

/* E2B's error shape, on fd (closed then). */
static void refuse(int fd, unsigned status, const char *message) {
        json_t *j = json_pack("{s:i, s:s}", "code", (int) status, "message", message);
        char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;

        log_notice("E2B sandbox traffic: %u %s", status, message);
        proxy_answer(fd, status, http_reason_phrase(status), "application/json", text ?: "{}");
        free(text);
        json_decref(j);
}

/* ---- the request ------------------------------------------------------------------------------ */

static bool id_ok(const char *s, size_t n) {
        return n > 0 && n < ID_MAX && strspn(s, "abcdefghijklmnopqrstuvwxyz0123456789") >= n;
}

/* PORT-ID.DOMAIN[:N] → port, id. */
static bool host_names_sandbox(const char *domain, const char *host, size_t n, unsigned *ret_port, char *ret_id) {
        const char *dash = memchr(host, '-', n), *dot, *colon = memchr(host, ':', n);
        size_t d = strlen(domain);
        char *end;
        unsigned long port;

        if (colon)
                n = (size_t) (colon - host);
        if (!dash || !(dot = memchr(dash, '.', (size_t) (host + n - dash))))
                return false;
        if ((size_t) (host + n - dot - 1) != d || strncasecmp(dot + 1, domain, d) != 0 ||
            !id_ok(dash + 1, (size_t) (dot - dash - 1)))
                return false;
        port = strtoul(host, &end, 10);
        if (end != dash || port == 0 || port > 65535)
                return false;
        memcpy(ret_id, dash + 1, (size_t) (dot - dash - 1));
        ret_id[dot - dash - 1] = 0;
        *ret_port = (unsigned) port;
        return true;
}

/* Which sandbox and port the head names. -ENOENT: none (not sandbox traffic); -EINVAL: badly. */
static int target(const SandboxRoute *route, const HttpHead *h, char ret_id[static ID_MAX], unsigned *ret_port) {
        const char *v, *p;
        size_t n, pn;

        if (http_head_find(h, "E2b-Sandbox-Id", &v, &n)) {
                char digits[8];
                char *end;
                unsigned long port;

                if (!id_ok(v, n) || !http_head_find(h, "E2b-Sandbox-Port", &p, &pn) || pn == 0 || pn >= sizeof(digits))
                        return -EINVAL;
                memcpy(digits, p, pn);
                digits[pn] = 0;
                port = strtoul(digits, &end, 10);
                if (*end || port == 0 || port > 65535)
                        return -EINVAL;
                memcpy(ret_id, v, n);
                ret_id[n] = 0;
                *ret_port = (unsigned) port;
                return 0;
        }
        if (route->domain && http_head_find(h, "Host", &v, &n) && host_names_sandbox(route->domain, v, n, ret_port, ret_id))
                return 0;
        return -ENOENT;
}

static bool wants(HttpConn *c, const char *path, void *userdata) {
        SandboxRoute *route = userdata;
        char v[256], id[ID_MAX];
        unsigned port;
        int n;

        if (http_conn_header(c, "E2b-Sandbox-Id", v, sizeof(v)) >= 0)
                return true;
        n = route->domain ? http_conn_header(c, "Host", v, sizeof(v)) : -ENOENT;
        return n > 0 && host_names_sandbox(route->domain, v, (size_t) n, &port, id);
}

/* The head the runtime gets: the gateway's headers gone, the runtime's token for envd and the
 * code interpreter (checked against the E2B access token first), the port proxy's path and
 * cookie for any other port; Connection: close; then what followed the head. */
static int upstream_bytes(const HttpHead *h, const uint8_t *data, size_t size, const Runtime *rt, unsigned port,
                          Buffer *out) {
        bool own_port = port == E2B_ENVD_PORT || port == E2B_CODE_INTERPRETER_PORT, upgrade = false;
        char proxy[PROXY_TOKEN_LEN + 1];
        int r;

        HTTP_HEAD_FOREACH(h, line, n)
                if (http_head_line_is(line, n, "upgrade"))
                        upgrade = true;
        if (!own_port && proxy_token(rt->token, port, proxy) < 0)
                return -EINVAL;
        r = buffer_append(out, h->method, h->method_len);
        r = r ?: buffer_append(out, " ", 1);
        if (!own_port && r >= 0)
                r = buffer_printf(out, "/proxy/%u", port);
        r = r ?: buffer_append(out, h->target, h->target_len);
        r = r ?: buffer_append(out, " ", 1);
        r = r ?: buffer_append(out, h->version, h->version_len);
        r = r ?: buffer_append(out, "\r\n", 2);
        HTTP_HEAD_FOREACH(h, line, n) {
                if (r < 0)
                        break;
                if (http_head_line_is(line, n, "e2b-sandbox-id") || http_head_line_is(line, n, "e2b-sandbox-port") ||
                    (own_port && http_head_line_is(line, n, "x-access-token")) ||
                    http_head_line_is(line, n, "e2b-traffic-access-token") ||
                    (!upgrade && (http_head_line_is(line, n, "connection") || http_head_line_is(line, n, "keep-alive"))) ||
                    http_head_line_is(line, n, "proxy-connection"))
                        continue;
                r = buffer_append(out, line, n);
                r = r ?: buffer_append(out, "\r\n", 2);
        }
        if (r >= 0 && own_port)
                r = buffer_printf(out, "X-Access-Token: %s\r\n", rt->token);
        /* The port proxy takes its token from a cookie of its own, and passes the app's cookies on. */
        if (r >= 0 && !own_port)
                r = buffer_printf(out, "Cookie: " PROXY_COOKIE_PREFIX "%u=%s\r\n", port, proxy);
        if (r >= 0 && !upgrade)
                r = buffer_append(out, "Connection: close\r\n", 19);
        r = r ?: buffer_append(out, "\r\n", 2);
        r = r ?: buffer_append(out, data + h->size, size - h->size);
        return r;
}

/* Send the request on to its runtime, or refuse it. fd and the bytes are taken. */
static void forward(SandboxRoute *route, int fd, const uint8_t *data, size_t size, const Runtime *rt, unsigned port) {
        _cleanup_buffer_ Buffer out = BUFFER_NULL;
        const char *token;
        size_t token_len;
        HttpHead h;

        if (http_head_parse(data, size, &h) < 0) {
                refuse(fd, 400, "not an HTTP request head");
                return;
        }
        if (port == E2B_ENVD_PORT || port == E2B_CODE_INTERPRETER_PORT) {
                /* envd's calls carry the envdAccessToken, some of the code interpreter's the
                 * trafficAccessToken only: the create answered the same value for both. Compared
                 * in constant time: how long a refusal takes says nothing of the token. */
                if ((!http_head_find(&h, "X-Access-Token", &token, &token_len) &&
                     !http_head_find(&h, "E2B-Traffic-Access-Token", &token, &token_len)) ||
                    token_len != 64 || CRYPTO_memcmp(token, rt->access, 64) != 0) {
                        refuse(fd, 401, "this request needs the sandbox's access token (X-Access-Token or "
                                        "E2B-Traffic-Access-Token)");
                        return;
                }
        }
        if (upstream_bytes(&h, data, size, rt, port, &out) < 0) {
                refuse(fd, 500, "out of memory");
                return;
        }
        if (rt->tls)
                forward_tls(route, fd, &out, rt);
        else
                proxy_forward(route->proxy, fd, (const struct sockaddr *) &rt->addr, sizeof(rt->addr), &out);
}

/* ---- runtimes --------------------------------------------------------------------------------- */

/* http://ADDR:PORT or https://ADDR:PORT (what agentd's RuntimeUrl and GetRuntimeAccess say) as
 * an address, and whether it serves TLS. */
static int runtime_address(const char *url, Runtime *rt) {
        struct sockaddr_in *ret = &rt->addr;
        const char *host = startswith(url, "http://") ?: startswith(url, "https://"), *colon;
        char *addr = rt->host;
        unsigned long port;
        char *end;

        rt->tls = startswith(url, "https://");
        if (!host || !(colon = strrchr(host, ':')) || (size_t) (colon - host) >= sizeof(rt->host))
                return -EINVAL;
        memcpy(addr, host, (size_t) (colon - host));
        addr[colon - host] = 0;
        port = strtoul(colon + 1, &end, 10);
        if ((*end && *end != '/') || port == 0 || port > 65535)
                return -EINVAL;
        *ret = (struct sockaddr_in) { .sin_family = AF_INET, .sin_port = htons((uint16_t) port) };
        return inet_pton(AF_INET, addr, &ret->sin_addr) == 1 ? 0 : -EINVAL;
}

static void runtimes_forget_all(SandboxRoute *route) {
        size_t state = 0;
        Runtime *rt;

        while ((rt = strmap_iterate(route->runtimes, &state)))
                free(rt);
        strmap_free(route->runtimes);
        route->runtimes = strmap_new();
}

static Pending *pending_free(Pending *p) {
        if (!p)
                return NULL;
        if (p->prev)
                p->prev->next = p->next;
        else if (p->route->pending == p)
                p->route->pending = p->next;
        if (p->next)
                p->next->prev = p->prev;
        p->route->n_pending--;
        sd_bus_slot_unref(p->slot);
        safe_close(p->fd);
        buffer_done(&p->bytes);
        free(p);
        return NULL;
}

static int on_runtime_access(sd_bus_message *reply, void *userdata, sd_bus_error *ret_error) {
        Pending *p = userdata;
        SandboxRoute *route = p->route;
        const sd_bus_error *e = sd_bus_message_get_error(reply);
        const char *url, *token;
        Runtime *rt = NULL;
        int fd;

        p->slot = sd_bus_slot_unref(p->slot);
        if (e) {
                /* E2B's edge says 502 for a sandbox that is not there (the SDK's isRunning() reads
                 * it as "not running"). */
                if (sd_bus_error_has_names(e, "org.agentix.Agentd1.NoSuchSandbox"))
                        refuse(TAKE_FD(p->fd), 502, "the sandbox is not running (no such sandbox)");
                else
                        refuse(TAKE_FD(p->fd), 502, e->message ?: e->name);
                pending_free(p);
                return 0;
        }
        rt = calloc(1, sizeof(Runtime));
        if (!rt || sd_bus_message_read(reply, "ss", &url, &token) < 0 || strlen(token) >= sizeof(rt->token) ||
            runtime_address(url, rt) < 0 || e2b_access_token(token, rt->access) < 0) {
                free(rt);
                refuse(TAKE_FD(p->fd), 502, "agentd's answer about the sandbox's runtime could not be read");
                pending_free(p);
                return 0;
        }
        strcpy(rt->id, p->id);
        strcpy(rt->token, token);
        /* Another request for it may have been answered first. */
        free(strmap_remove(route->runtimes, rt->id, strlen(rt->id)));
        if (strmap_size(route->runtimes) >= RUNTIMES_MAX)
                runtimes_forget_all(route);
        if (strmap_put(route->runtimes, rt->id, strlen(rt->id), rt) < 0) {
                free(rt);
                refuse(TAKE_FD(p->fd), 500, "out of memory");
                pending_free(p);
                return 0;
        }
        fd = TAKE_FD(p->fd);
        forward(route, fd, buffer_data(&p->bytes), p->bytes.len, rt, p->port);
        pending_free(p);
        return 0;
}

/* A sandbox gone: its runtime's address may be another's soon. */
static int on_sandbox_removed(sd_bus_message *m, void *userdata, sd_bus_error *ret_error) {
        SandboxRoute *route = userdata;
        const char *id, *path;

        if (sd_bus_message_read(m, "so", &id, &path) >= 0)
                free(strmap_remove(route->runtimes, id, strlen(id)));
        return 0;
}

static void take(int fd, const uint8_t *data, size_t size, void *userdata) {
        SandboxRoute *route = userdata;
        char id[ID_MAX];
        unsigned port;
        Runtime *rt;
        Pending *p;
        HttpHead h;
        int r;

        if (http_head_parse(data, size, &h) < 0) {
                refuse(fd, 400, "not an HTTP request head");
                return;
        }
        r = target(route, &h, id, &port);
        if (r < 0) {
                refuse(fd, 400, "E2b-Sandbox-Id and E2b-Sandbox-Port must name a sandbox and a port");
                return;
        }
        rt = strmap_get(route->runtimes, id, strlen(id));
        if (rt) {
                forward(route, fd, data, size, rt, port);
                return;
        }

        if (route->n_pending >= PENDING_MAX) {
                refuse(fd, 503, "too many requests wait for their sandbox to be looked up");
                return;
        }
        p = calloc(1, sizeof(Pending));
        if (!p) {
                safe_close(fd);
                return;
        }
        *p = (Pending) { .route = route, .fd = fd, .port = port, .next = route->pending };
        strcpy(p->id, id);
        if (route->pending)
                route->pending->prev = p;
        route->pending = p;
        route->n_pending++;
        if (buffer_append(&p->bytes, data, size) < 0) {
                pending_free(p);
                return;
        }
        r = sd_bus_call_method_async(route->bus, &p->slot, AGENTD_NAME, MANAGER_PATH, MANAGER_IFACE, "GetRuntimeAccess",
                                     on_runtime_access, p, "s", id);
        if (r < 0) {
                refuse(TAKE_FD(p->fd), 503, "cannot ask agentd for the sandbox");
                pending_free(p);
        }
}

int sandbox_route_new(sd_event *event, HttpServer *http, const char *domain, SandboxRoute **ret) {
        SandboxRoute *route = calloc(1, sizeof(SandboxRoute));
        int r;

        if (!route)
                return -ENOMEM;
        *route = (SandboxRoute) { .event = sd_event_ref(event), .http = http, .runtimes = strmap_new() };
        r = route->runtimes ? 0 : -ENOMEM;
        if (r >= 0 && domain && !(route->domain = strdup(domain)))
                r = -ENOMEM;
        if (r >= 0)
                r = proxy_new(event, NULL, NULL, &route->proxy);
        if (r >= 0)
                r = sd_bus_open_system(&route->bus);
        if (r >= 0)
                r = sd_bus_attach_event(route->bus, event, SD_EVENT_PRIORITY_NORMAL);
        if (r >= 0)
                r = sd_bus_match_signal_async(route->bus, &route->removed_match, AGENTD_NAME, MANAGER_PATH,
                                              MANAGER_IFACE, "SandboxRemoved", on_sandbox_removed, NULL, route);
        if (r < 0) {
                sandbox_route_free(route);
                return log_error_errno(r, "Cannot set up the sandbox route: %m");
        }
        http_server_set_takeover(http, &(HttpTakeover) { .wants = wants, .take = take, .userdata = route });
        read_runtime_ca(route);
        *ret = route;
        return 0;
}

SandboxRoute *sandbox_route_free(SandboxRoute *route) {
        if (!route)
                return NULL;
        while (route->pending)
                pending_free(route->pending);
        tls_fronts_free_all(&route->fronts); /* their requests are refused */
        sd_bus_slot_unref(route->ca_slot);
        SSL_CTX_free(route->runtime_tls);
        if (route->runtimes)
                runtimes_forget_all(route);
        strmap_free(route->runtimes);
        sd_bus_slot_unref(route->removed_match);
        sd_bus_flush_close_unref(route->bus);
        proxy_free(route->proxy);
        free(route->domain);
        sd_event_unref(route->event);
        free(route);
        return NULL;
}

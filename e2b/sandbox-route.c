/* SPDX-License-Identifier: MIT */
/* Sandbox traffic (sandbox-route.h). http-conn.c parses a request's head as for any request; one
 * that names a sandbox (sandbox-target.h) is handed here with the bytes read so far. The
 * gateway routes only to sandboxes made through it (the E2B_TEMPLATE_LABEL label, read from
 * agentd with the sandbox's owner, state and E2B_PUBLIC_LABEL), and answers for any other as
 * for an id that does not exist. What it looked up (the runtime's address and token, from
 * GetRuntimeAccess) is kept a while: until agentd says the sandbox changed (PropertiesChanged:
 * its RuntimeUrl, State, ...) or went, agentd itself changed, the bus dropped, or a minute
 * passed. Then the token the port needs is checked, the head rewritten for the runtime, and the
 * port proxy (http-proxy.h) moves the bytes, bounded per sandbox and per owner. A runtime that
 * serves TLS (https:// URL) is reached over TLS verified against agentd's runtime CA
 * (Manager.RuntimeCA, read at start and again after a certificate did not verify: agentd's CA
 * may have changed). */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <jansson.h>
#include <openssl/crypto.h>

#include "agentd-names.h"
#include "e2b-token.h"
#include "http-head.h"
#include "http-proxy.h"
#include "log.h"
#include "macro.h"
#include "proxy-request.h"
#include "proxy-token.h"
#include "sandbox-info.h"
#include "sandbox-route.h"
#include "sandbox-target.h"
#include "strmap.h"
#include "tls-front.h"
#include "tls.h"

#define LOOKUP_TIMEOUT_USEC (30ULL * 1000 * 1000) /* each of a lookup's calls to agentd */
#define PENDING_MAX 1024        /* requests waiting for a runtime's address */
#define PENDING_PER_SANDBOX_MAX 128 /* of them for one sandbox: one sandbox's crowd leaves room */
#define RUNTIMES_MAX 8192       /* runtimes remembered (then forgotten all at once) */
#define RUNTIME_MAX_AGE_USEC (60ULL * 1000 * 1000) /* then looked up again, signals or not */
#define RECONNECT_USEC (1000ULL * 1000) /* between attempts to reach the bus again */
#define SANDBOX_PATH_PREFIX "/org/agentix/Agentd1/sandbox" /* org.agentix.Agentd1(5) */
#define NOT_THERE "the sandbox is not running (no such sandbox)"

typedef struct Runtime {
        char id[SANDBOX_ID_MAX];
        struct sockaddr_in addr;
        bool tls;
        char host[INET_ADDRSTRLEN];
        char token[128];
        char access[65];        /* e2b_access_token(token) */
        char traffic[65];       /* e2b_traffic_token(token) */
        bool public_traffic;
        uid_t owner;
        uint64_t looked_up_usec;
} Runtime;

typedef struct Pending Pending;
typedef struct Lookup Lookup;

struct SandboxRoute {
        sd_event *event;
        HttpServer *http;
        char *domain;
        Proxy *proxy;
        sd_bus *bus;            /* NULL while the bus is away */
        sd_bus_slot *removed_match, *changed_match, *owner_match, *filter;
        sd_event_source *reconnect; /* a timer while the bus is away */
        StrMap *runtimes;       /* id → Runtime */
        StrMap *lookups;        /* id → Lookup */
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
        char id[SANDBOX_ID_MAX];
        uid_t owner;
} Forwarding;

/* A request waiting for its sandbox to be looked up. */
struct Pending {
        Pending *next;
        int fd;
        Buffer bytes;           /* the head and whatever followed */
        HttpHead head;          /* parsed, in bytes */
        unsigned port;
};

/* Looking a sandbox up: GetSandbox, its properties, GetRuntimeAccess; the requests for it wait. */
struct Lookup {
        SandboxRoute *route;
        char id[SANDBOX_ID_MAX];
        sd_bus_slot *slot;
        SandboxInfo info;
        Pending *waiting;
        unsigned n_waiting;
        bool stale;             /* agentd said it changed meanwhile: serve, but do not keep */
};

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
        if (route->ca_slot || !route->bus)
                return;
        if (sd_bus_call_method_async(route->bus, &route->ca_slot, AGENTD_NAME, MANAGER_PATH,
                                     "org.freedesktop.DBus.Properties", "Get", on_runtime_ca, route, "ss",
                                     MANAGER_IFACE, "RuntimeCA") < 0)
                log_warning("Cannot ask agentd for its runtime CA.");
}

static int on_runtime_tls_ready(int plain_fd, void *userdata) {
        Forwarding *f = userdata;

        proxy_forward_connected(f->route->proxy, f->fd, plain_fd, &f->out, f->id, f->owner);
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
        *f = (Forwarding) { .route = route, .fd = fd, .out = *out, .owner = rt->owner };
        strcpy(f->id, rt->id);
        *out = BUFFER_NULL;
        /* The certificate must name this sandbox too: on a swarm node every runtime has the
         * node's address. */
        if (tls_front_connect_sandbox(route->event, route->runtime_tls, (const struct sockaddr *) &rt->addr,
                                      sizeof(rt->addr), rt->host, rt->id, &route->fronts, on_runtime_tls_ready,
                                      on_runtime_tls_failed, f) < 0) {
                refuse(fd, 502, "cannot connect to the sandbox's runtime");
                buffer_done(&f->out);
                free(f);
        }
}

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

static bool wants(HttpConn *c, const char *path, void *userdata) {
        SandboxRoute *route = userdata;
        char v[256], id[SANDBOX_ID_MAX];
        unsigned port;
        int n;

        if (http_conn_header(c, "E2b-Sandbox-Id", v, sizeof(v)) >= 0)
                return true;
        n = route->domain ? http_conn_header(c, "Host", v, sizeof(v)) : -ENOENT;
        return n > 0 && host_names_sandbox(route->domain, v, (size_t) n, &port, id);
}

/* Does header `name` carry secret (64 characters)? Compared in constant time: how long a
 * refusal takes says nothing of the secret. */
static bool carries(const HttpHead *h, const char *name, const char secret[static 65]) {
        const char *v;
        size_t n;

        return http_head_find(h, name, &v, &n) && n == 64 && CRYPTO_memcmp(v, secret, 64) == 0;
}

/* Who may use the port: envd's wants the envd access token (X-Access-Token, as the create
 * answered); the code interpreter's that or the traffic token (the SDK's context calls carry
 * only e2b-traffic-access-token); any other port is open when the sandbox was made with public
 * traffic (E2B's default), else wants the traffic token. NULL: it may; else why not. */
static const char *denied(const HttpHead *h, const Runtime *rt, unsigned port) {
        if (port == E2B_ENVD_PORT)
                return carries(h, "X-Access-Token", rt->access) ? NULL :
                       "this request needs the sandbox's access token (X-Access-Token)";
        if (port == E2B_CODE_INTERPRETER_PORT)
                return carries(h, "X-Access-Token", rt->access) || carries(h, "E2B-Traffic-Access-Token", rt->traffic) ?
                               NULL :
                               "this request needs the sandbox's access token (X-Access-Token or "
                               "E2B-Traffic-Access-Token)";
        if (rt->public_traffic)
                return NULL;
        return carries(h, "E2B-Traffic-Access-Token", rt->traffic) ? NULL :
               "this sandbox's ports are not public: the request needs its traffic access token "
               "(E2B-Traffic-Access-Token)";
}

/* The head the runtime gets: the gateway's headers gone, the runtime's token for envd and the
 * code interpreter, the port proxy's path and cookie for any other port; Connection: close;
 * then what followed the head. */
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

/* Send the request (h, parsed in data) on to its runtime, or refuse it. fd is taken. */
static void forward(SandboxRoute *route, int fd, const HttpHead *h, const uint8_t *data, size_t size,
                    const Runtime *rt, unsigned port) {
        _cleanup_buffer_ Buffer out = BUFFER_NULL;
        const char *why;

        why = denied(h, rt, port);
        if (why) {
                refuse(fd, 401, why);
                return;
        }
        /* The runtime's own control (POST /runtime/hold: agentd's, before a checkpoint) is no
         * E2B face: a traffic token must not make the runtime hold still. */
        if ((port == E2B_ENVD_PORT || port == E2B_CODE_INTERPRETER_PORT) && h->target_len >= 9 &&
            strneq(h->target, "/runtime/", 9)) {
                refuse(fd, 404, "no such path");
                return;
        }
        if (upstream_bytes(h, data, size, rt, port, &out) < 0) {
                refuse(fd, 500, "out of memory");
                return;
        }
        if (rt->tls)
                forward_tls(route, fd, &out, rt);
        else
                proxy_forward(route->proxy, fd, (const struct sockaddr *) &rt->addr, sizeof(rt->addr), &out, rt->id,
                              rt->owner);
}

/* ---- runtimes --------------------------------------------------------------------------------- */

static uint64_t loop_usec(SandboxRoute *route) {
        uint64_t t = 0;

        (void) sd_event_now(route->event, CLOCK_MONOTONIC, &t);
        return t;
}

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

/* What agentd said of the sandbox may no longer be so: look it up again at its next request. */
static void runtime_forget(SandboxRoute *route, const char *id) {
        Lookup *l = strmap_get(route->lookups, id, strlen(id));

        free(strmap_remove(route->runtimes, id, strlen(id)));
        if (l)
                l->stale = true;
}

/* Everything agentd said may no longer be so (the bus went, agentd restarted). */
static void forget_everything(SandboxRoute *route) {
        size_t state = 0;
        Lookup *l;

        if (route->runtimes)
                runtimes_forget_all(route);
        while ((l = strmap_iterate(route->lookups, &state)))
                l->stale = true;
}

/* The lookup is over: answer each request waiting for it (forward with rt, else refuse with
 * status and message), and free it. */
static void lookup_finish(Lookup *l, const Runtime *rt, unsigned status, const char *message) {
        SandboxRoute *route = l->route;
        Pending *p;

        strmap_remove(route->lookups, l->id, strlen(l->id));
        while ((p = l->waiting)) {
                l->waiting = p->next;
                route->n_pending--;
                if (rt)
                        forward(route, TAKE_FD(p->fd), &p->head, buffer_data(&p->bytes), p->bytes.len, rt, p->port);
                else
                        refuse(TAKE_FD(p->fd), status, message);
                buffer_done(&p->bytes);
                free(p);
        }
        sd_bus_slot_unref(l->slot);
        sandbox_info_done(&l->info);
        free(l);
}

/* agentd's error: E2B's edge says 502 for a sandbox that is not there (the SDK's isRunning()
 * reads it as "not running"). */
static void lookup_failed(Lookup *l, const sd_bus_error *e) {
        if (sd_bus_error_has_names(e, "org.agentix.Agentd1.NoSuchSandbox", "org.agentix.Agentd1.NotOwner"))
                lookup_finish(l, NULL, 502, NOT_THERE);
        else
                lookup_finish(l, NULL, 502, e->message ?: e->name);
}

/* Call agentd for a lookup, each call with LOOKUP_TIMEOUT_USEC: a hung agentd frees the requests.
 * Each takes one string argument, arg. */
static int lookup_call(Lookup *l, const char *path, const char *iface, const char *member,
                       sd_bus_message_handler_t callback, const char *arg) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL;
        sd_bus *bus = l->route->bus;
        int r;

        if (!bus)
                return -ENOTCONN;
        r = sd_bus_message_new_method_call(bus, &m, AGENTD_NAME, path, iface, member);
        if (r >= 0)
                r = sd_bus_message_append(m, "s", arg);
        if (r >= 0)
                r = sd_bus_call_async(bus, &l->slot, m, callback, l, LOOKUP_TIMEOUT_USEC);
        return r;
}

static int on_runtime_access(sd_bus_message *reply, void *userdata, sd_bus_error *ret_error) {
        Lookup *l = userdata;
        SandboxRoute *route = l->route;
        const sd_bus_error *e = sd_bus_message_get_error(reply);
        const char *url, *token;
        Runtime *rt = NULL;

        l->slot = sd_bus_slot_unref(l->slot);
        if (e) {
                lookup_failed(l, e);
                return 0;
        }
        rt = calloc(1, sizeof(Runtime));
        if (!rt || sd_bus_message_read(reply, "ss", &url, &token) < 0 || strlen(token) >= sizeof(rt->token) ||
            runtime_address(url, rt) < 0 || e2b_access_token(token, rt->access) < 0 ||
            e2b_traffic_token(token, rt->traffic) < 0) {
                free(rt);
                lookup_finish(l, NULL, 502, "agentd's answer about the sandbox's runtime could not be read");
                return 0;
        }
        strcpy(rt->id, l->id);
        strcpy(rt->token, token);
        rt->public_traffic = l->info.public_traffic;
        rt->owner = (uid_t) l->info.owner;
        rt->looked_up_usec = loop_usec(route);
        /* Another request for it may have been answered first. */
        free(strmap_remove(route->runtimes, rt->id, strlen(rt->id)));
        if (strmap_size(route->runtimes) >= RUNTIMES_MAX)
                runtimes_forget_all(route);
        if (l->stale || strmap_put(route->runtimes, rt->id, strlen(rt->id), rt) < 0) {
                /* Not kept: what it says may have changed already (or no memory to keep it). */
                lookup_finish(l, rt, 0, NULL);
                free(rt);
                return 0;
        }
        lookup_finish(l, rt, 0, NULL);
        return 0;
}

static int on_properties(sd_bus_message *reply, void *userdata, sd_bus_error *ret_error) {
        Lookup *l = userdata;
        const sd_bus_error *e = sd_bus_message_get_error(reply);
        int r;

        l->slot = sd_bus_slot_unref(l->slot);
        if (e) {
                lookup_failed(l, e);
                return 0;
        }
        r = sandbox_info_read(reply, l->id, &l->info);
        if (r < 0) {
                lookup_finish(l, NULL, 502, "agentd's properties of the sandbox could not be read");
                return 0;
        }
        /* Not made through the gateway: as if it were not there at all. */
        if (!l->info.e2b) {
                lookup_finish(l, NULL, 502, NOT_THERE);
                return 0;
        }
        /* A hibernated sandbox is as a paused one here: only a call with the API key (connect,
         * resume) runs it again; traffic, which is checked against its runtime's token, must
         * not wake it before it is checked. */
        if (!streq(l->info.state, "running")) {
                _cleanup_free_ char *msg = NULL;

                if (asprintf(&msg, "the sandbox is not running (%s)", l->info.state) < 0)
                        msg = NULL;
                lookup_finish(l, NULL, 502, msg ?: "the sandbox is not running");
                return 0;
        }
        r = lookup_call(l, MANAGER_PATH, MANAGER_IFACE, "GetRuntimeAccess", on_runtime_access, l->id);
        if (r < 0)
                lookup_finish(l, NULL, 503, "cannot ask agentd for the sandbox");
        return 0;
}

static int on_sandbox_path(sd_bus_message *reply, void *userdata, sd_bus_error *ret_error) {
        Lookup *l = userdata;
        const sd_bus_error *e = sd_bus_message_get_error(reply);
        const char *path;
        int r;

        l->slot = sd_bus_slot_unref(l->slot);
        if (e) {
                lookup_failed(l, e);
                return 0;
        }
        if (sd_bus_message_read(reply, "o", &path) < 0) {
                lookup_finish(l, NULL, 502, "agentd's answer to GetSandbox was not an object path");
                return 0;
        }
        r = lookup_call(l, path, "org.freedesktop.DBus.Properties", "GetAll", on_properties, SANDBOX_IFACE);
        if (r < 0)
                lookup_finish(l, NULL, 503, "cannot ask agentd for the sandbox");
        return 0;
}


/* The sandbox's or its owner's properties changed: RuntimeUrl (a restart, a TLS certificate
 * re-issued, another node), State (paused, going), ... Any of them: it is looked up again. */
static int on_properties_changed(sd_bus_message *m, void *userdata, sd_bus_error *ret_error) {
        SandboxRoute *route = userdata;
        _cleanup_free_ char *id = NULL;

        if (sd_bus_path_decode(sd_bus_message_get_path(m), SANDBOX_PATH_PREFIX, &id) > 0 && id)
                runtime_forget(route, id);
        return 0;
}

/* A sandbox gone: its runtime's address may be another's soon. */
static int on_sandbox_removed(sd_bus_message *m, void *userdata, sd_bus_error *ret_error) {
        SandboxRoute *route = userdata;
        const char *id, *path;

        if (sd_bus_message_read(m, "so", &id, &path) >= 0)
                runtime_forget(route, id);
        return 0;
}

/* agentd left the bus or came (a restart): what the old one said is forgotten. */
static int on_agentd_owner_changed(sd_bus_message *m, void *userdata, sd_bus_error *ret_error) {
        forget_everything(userdata);
        return 0;
}

static void take(int fd, const uint8_t *data, size_t size, void *userdata) {
        SandboxRoute *route = userdata;
        char id[SANDBOX_ID_MAX];
        unsigned port;
        Runtime *rt;
        Pending *p;
        Lookup *l;
        HttpHead h;
        int r;

        if (http_head_parse(data, size, &h) < 0) {
                refuse(fd, 400, "not an HTTP request head");
                return;
        }
        r = sandbox_target(route->domain, &h, id, &port);
        if (r < 0) {
                refuse(fd, 400, "E2b-Sandbox-Id and E2b-Sandbox-Port must name a sandbox and a port");
                return;
        }
        rt = strmap_get(route->runtimes, id, strlen(id));
        if (rt && loop_usec(route) - rt->looked_up_usec < RUNTIME_MAX_AGE_USEC) {
                forward(route, fd, &h, data, size, rt, port);
                return;
        }
        if (rt)
                runtime_forget(route, id);

        l = strmap_get(route->lookups, id, strlen(id));
        if (route->n_pending >= PENDING_MAX || (l && l->n_waiting >= PENDING_PER_SANDBOX_MAX)) {
                refuse(fd, 503, "too many requests wait for their sandbox to be looked up");
                return;
        }
        p = calloc(1, sizeof(Pending));
        if (!p || buffer_append(&p->bytes, data, size) < 0) {
                if (p)
                        buffer_done(&p->bytes);
                free(p);
                refuse(fd, 500, "out of memory");
                return;
        }
        p->fd = fd;
        p->port = port;
        p->head = h;
        http_head_move(&p->head, data, buffer_data(&p->bytes));
        if (l) {
                /* Its lookup is under way: the request waits for that one. */
                p->next = l->waiting;
                l->waiting = p;
                l->n_waiting++;
                route->n_pending++;
                return;
        }
        l = calloc(1, sizeof(Lookup));
        if (l) {
                *l = (Lookup) { .route = route, .waiting = p, .n_waiting = 1 };
                strcpy(l->id, id);
        }
        if (!l || strmap_put(route->lookups, l->id, strlen(l->id), l) < 0) {
                free(l);
                buffer_done(&p->bytes);
                free(p);
                refuse(fd, 500, "out of memory");
                return;
        }
        route->n_pending++;
        if (lookup_call(l, MANAGER_PATH, MANAGER_IFACE, "GetSandbox", on_sandbox_path, l->id) < 0)
                lookup_finish(l, NULL, 503, "cannot ask agentd for the sandbox");
}

/* ---- the bus ----------------------------------------------------------------------------------- */

static void bus_drop(SandboxRoute *route) {
        route->removed_match = sd_bus_slot_unref(route->removed_match);
        route->changed_match = sd_bus_slot_unref(route->changed_match);
        route->owner_match = sd_bus_slot_unref(route->owner_match);
        route->filter = sd_bus_slot_unref(route->filter);
        route->ca_slot = sd_bus_slot_unref(route->ca_slot);
        route->bus = sd_bus_flush_close_unref(route->bus);
}

static int bus_connect(SandboxRoute *route);

static int on_reconnect(sd_event_source *s, uint64_t usec, void *userdata) {
        SandboxRoute *route = userdata;

        bus_drop(route);
        forget_everything(route);
        if (bus_connect(route) >= 0) {
                log_info("Back on the bus: sandboxes are looked up again.");
                route->reconnect = sd_event_source_disable_unref(route->reconnect);
                return 0;
        }
        bus_drop(route);
        (void) sd_event_source_set_time_relative(s, RECONNECT_USEC);
        (void) sd_event_source_set_enabled(s, SD_EVENT_ONESHOT);
        return 0;
}

/* Try the bus again soon (not from within its own dispatch: the bus is dropped there). */
static void reconnect_later(SandboxRoute *route) {
        if (route->reconnect)
                return;
        if (sd_event_add_time_relative(route->event, &route->reconnect, CLOCK_MONOTONIC, 0, 0, on_reconnect, route) < 0)
                log_error("Cannot arrange to reach the bus again: sandbox traffic fails until a restart.");
}

/* The bus went (dbus-daemon restarted): the calls under way were answered with errors already
 * (sd-bus does so before saying Disconnected). */
static int on_bus_message(sd_bus_message *m, void *userdata, sd_bus_error *ret_error) {
        SandboxRoute *route = userdata;

        if (sd_bus_message_is_signal(m, "org.freedesktop.DBus.Local", "Disconnected")) {
                log_warning("The bus went away: sandbox traffic waits until it is back.");
                forget_everything(route);
                reconnect_later(route);
        }
        return 0;
}

static int bus_connect(SandboxRoute *route) {
        int r;

        r = sd_bus_open_system(&route->bus);
        if (r >= 0)
                r = sd_bus_attach_event(route->bus, route->event, SD_EVENT_PRIORITY_NORMAL);
        if (r >= 0)
                r = sd_bus_add_filter(route->bus, &route->filter, on_bus_message, route);
        if (r >= 0)
                r = sd_bus_match_signal_async(route->bus, &route->removed_match, AGENTD_NAME, MANAGER_PATH,
                                              MANAGER_IFACE, "SandboxRemoved", on_sandbox_removed, NULL, route);
        if (r >= 0)
                r = sd_bus_add_match_async(route->bus, &route->changed_match,
                                           "type='signal',sender='" AGENTD_NAME "',"
                                           "interface='org.freedesktop.DBus.Properties',member='PropertiesChanged',"
                                           "arg0='" SANDBOX_IFACE "'",
                                           on_properties_changed, NULL, route);
        if (r >= 0)
                r = sd_bus_add_match_async(route->bus, &route->owner_match,
                                           "type='signal',sender='org.freedesktop.DBus',"
                                           "interface='org.freedesktop.DBus',member='NameOwnerChanged',"
                                           "arg0='" AGENTD_NAME "'",
                                           on_agentd_owner_changed, NULL, route);
        if (r < 0)
                return r;
        read_runtime_ca(route);
        return 0;
}

int sandbox_route_new(sd_event *event, HttpServer *http, const char *domain, SandboxRoute **ret) {
        SandboxRoute *route = calloc(1, sizeof(SandboxRoute));
        int r;

        if (!route)
                return -ENOMEM;
        *route = (SandboxRoute) { .event = sd_event_ref(event), .http = http, .runtimes = strmap_new(),
                                  .lookups = strmap_new() };
        r = route->runtimes && route->lookups ? 0 : -ENOMEM;
        if (r >= 0 && domain && !(route->domain = strdup(domain)))
                r = -ENOMEM;
        if (r >= 0)
                r = proxy_new(event, NULL, NULL, &route->proxy);
        if (r >= 0)
                r = bus_connect(route);
        if (r < 0) {
                sandbox_route_free(route);
                return log_error_errno(r, "Cannot set up the sandbox route: %m");
        }
        http_server_set_takeover(http, &(HttpTakeover) { .wants = wants, .take = take, .userdata = route });
        *ret = route;
        return 0;
}

SandboxRoute *sandbox_route_free(SandboxRoute *route) {
        size_t state = 0;
        Lookup *l;

        if (!route)
                return NULL;
        while (route->lookups && (state = 0, l = strmap_iterate(route->lookups, &state)))
                lookup_finish(l, NULL, 503, "agentix-e2b is stopping");
        strmap_free(route->lookups);
        tls_fronts_free_all(&route->fronts); /* their requests are refused */
        SSL_CTX_free(route->runtime_tls);
        if (route->runtimes)
                runtimes_forget_all(route);
        strmap_free(route->runtimes);
        route->reconnect = sd_event_source_disable_unref(route->reconnect);
        bus_drop(route);
        proxy_free(route->proxy);
        free(route->domain);
        sd_event_unref(route->event);
        free(route);
        return NULL;
}

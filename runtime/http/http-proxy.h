/* SPDX-License-Identifier: MIT */
#pragma once

/* The port proxy: a request for /proxy/PORT/REST that carries PORT's token (proxy-token.h;
 * `Authorization: Bearer TOKEN`, the cookie agentix_proxy_PORT, or once ?agentix_token=TOKEN,
 * which answers with a redirect that sets the cookie, scoped to /proxy/PORT/) goes to
 * 127.0.0.1:PORT inside the sandbox as REST. Bytes then pass both ways as they come — request
 * and response bodies stream, and a WebSocket upgrade simply carries on — one request per
 * connection (the upstream is told Connection: close). No token: 401; nothing listening: 502,
 * with one line. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/types.h>

#include <systemd/sd-event.h>

#include "buffer.h"
#include "http-server.h"

typedef struct Proxy Proxy;

/* Places, and who may take them. Every connection frees its place when either side closes, after
 * IDLE_TIMEOUT_USEC without a byte either way (PROXY_HEADLESS_TIMEOUT_USEC before the upstream's
 * response head), or, when a place is wanted and none is free (in all, or in its sandbox's or
 * owner's share), as the one idle longest once idle PROXY_EVICT_IDLE_USEC. */
#define PROXY_MAX_CONNECTIONS 512
#define PROXY_PER_SANDBOX_MAX (PROXY_MAX_CONNECTIONS / 8)
#define PROXY_PER_OWNER_MAX (PROXY_MAX_CONNECTIONS / 4)

/* token(userdata): the runtime's token now (it changes at a claim), or NULL: the proxy is off. */
int proxy_new(sd_event *event, const char *(*token)(void *userdata), void *userdata, Proxy **ret);
Proxy *proxy_free(Proxy *p);

/* Close-by-reset mode (HttpServerConfig.close_by_reset says why): the proxy never sends a
 * client the first FIN: a response the upstream ended is followed, once the client has
 * acknowledged all of it, by a reset instead (so a response that only the connection's end
 * delimits ends with a reset too), and so is every other end of a client's connection. The
 * upstream side (127.0.0.1 in the sandbox) is closed as before. */
int proxy_set_close_by_reset(Proxy *p);
/* End every connection now with a reset, both sides (a checkpoint is to be taken). */
void proxy_reset_connections(Proxy *p);

/* Take a client connection (non-blocking fd) whose request head, and whatever followed it, are
 * data. The fd is the proxy's from now on, whatever happens. */
void proxy_take(Proxy *p, int fd, const uint8_t *data, size_t size);

/* Forward a client connection (non-blocking fd) to addr: `upstream` (the request's head as the
 * upstream gets it, and whatever followed) goes first, then bytes pass both ways as for the port
 * proxy, one request per connection, its response told Connection: close. fd and upstream's
 * bytes are the proxy's from now on. The connection counts against sandbox's and owner's shares
 * (PROXY_PER_SANDBOX_MAX, PROXY_PER_OWNER_MAX of PROXY_MAX_CONNECTIONS): one sandbox's or one
 * user's crowd leaves the others room. */
struct sockaddr;
void proxy_forward(Proxy *p, int fd, const struct sockaddr *addr, unsigned addr_len, Buffer *upstream,
                   const char *sandbox, uid_t owner);
/* The same to an upstream connected already (upstream_fd, taken): the plain end of a TLS
 * connection to an https:// runtime (tls-front.h). */
void proxy_forward_connected(Proxy *p, int fd, int upstream_fd, Buffer *upstream, const char *sandbox, uid_t owner);
/* A short answer of one's own on fd (body: content_type), which is closed then. */
void proxy_answer(int fd, unsigned status, const char *reason, const char *content_type, const char *body);

/* Is this request path one for the proxy? */
static inline bool proxy_path(const char *path) {
        return strncmp(path, "/proxy/", 7) == 0;
}

/* The proxy as the HTTP server's takeover (http_server_set_takeover()): /proxy/ paths. */
bool proxy_takeover_wants(HttpConn *c, const char *path, void *proxy);
void proxy_takeover_take(int fd, const uint8_t *data, size_t size, void *proxy);
#define PROXY_TAKEOVER(proxy) { .wants = proxy_takeover_wants, .take = proxy_takeover_take, .userdata = (proxy) }

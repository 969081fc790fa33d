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

#include <systemd/sd-event.h>

#include "buffer.h"
#include "http-server.h"

typedef struct Proxy Proxy;

/* token(userdata): the runtime's token now (it changes at a claim), or NULL: the proxy is off. */
int proxy_new(sd_event *event, const char *(*token)(void *userdata), void *userdata, Proxy **ret);
Proxy *proxy_free(Proxy *p);

/* Take a client connection (non-blocking fd) whose request head, and whatever followed it, are
 * data. The fd is the proxy's from now on, whatever happens. */
void proxy_take(Proxy *p, int fd, const uint8_t *data, size_t size);

/* Forward a client connection (non-blocking fd) to addr: `upstream` (the request's head as the
 * upstream gets it, and whatever followed) goes first, then bytes pass both ways as for the port
 * proxy, one request per connection, its response told Connection: close. fd and upstream's
 * bytes are the proxy's from now on. */
struct sockaddr;
void proxy_forward(Proxy *p, int fd, const struct sockaddr *addr, unsigned addr_len, Buffer *upstream);
/* The same to an upstream connected already (upstream_fd, taken): the plain end of a TLS
 * connection to an https:// runtime (tls-front.h). */
void proxy_forward_connected(Proxy *p, int fd, int upstream_fd, Buffer *upstream);
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

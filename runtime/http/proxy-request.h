/* SPDX-License-Identifier: MIT */
#pragma once

/* A request for the port proxy (http-proxy.h), read and decided without any I/O: the head is
 * parsed again as text, the port's token looked for (Authorization: Bearer, the cookie
 * agentix_proxy_PORT, the query's agentix_token), and the result is either the head the
 * upstream gets (with whatever followed the client's head) or the proxy's own short answer. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buffer.h"

#define PROXY_COOKIE_PREFIX "agentix_proxy_"
#define PROXY_QUERY_TOKEN "agentix_token"

typedef struct ProxyRequest {
        unsigned port;
        bool forward;           /* true: send `upstream` to 127.0.0.1:port; false: answer */
        Buffer upstream;        /* the upstream's request head, then the bytes that followed */
        unsigned status;        /* the answer: 302, 400, 401, 403, 404 */
        const char *reason;
        char *headers;          /* extra header lines (each ending in CRLF), or NULL */
        const char *text;       /* one line */
} ProxyRequest;

/* data: the request head (whole) and what followed. runtime_token: the runtime's token now
 * (NULL or "": the proxy is off). 0, or -ENOMEM. */
int proxy_request_read(const uint8_t *data, size_t size, const char *runtime_token, ProxyRequest *ret);
void proxy_request_done(ProxyRequest *r);

/* The upstream's response, whose head starts buf (nothing of it sent yet), with that head
 * rewritten for the client: its Connection and Keep-Alive headers replaced by Connection:
 * close, since the proxy takes one request per connection (a client that kept the connection
 * for another request would have it swallowed). A 101 (an upgrade) is left as it is.
 * 1 when done, 0 while the head is not whole yet, -EBADMSG for no HTTP head (passed on as it
 * is), -ENOMEM. */
int proxy_response_rewrite(Buffer *buf);

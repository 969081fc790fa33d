/* SPDX-License-Identifier: MIT */
#pragma once

/* The HTTP/WebSocket front of agentix-server: our own listening sockets (any address family,
 * several addresses), accepted connections adopted into a libwebsockets vhost running on the
 * uv loop embedded in sd-event, and routing: GET /health, and Engine.IO endpoints by path. */

#include <libwebsockets.h>
#include <systemd/sd-event.h>

#include "buffer.h"

typedef struct HttpServer HttpServer;
typedef struct EioServer EioServer;
typedef struct EioSession EioSession;

typedef enum HttpMethod {
        HTTP_METHOD_OTHER,
        HTTP_METHOD_GET,
        HTTP_METHOD_POST,
        HTTP_METHOD_OPTIONS,
} HttpMethod;

#define HTTP_QUERY_VALUE_MAX 64

/* Per-connection state (lws per-session user data). One HTTP/1.1 connection carries several
 * requests in turn; the request part is reset at each new request. */
typedef struct HttpConn {
        struct lws *wsi;
        HttpServer *server;
        EioServer *eio; /* route of the current request / websocket */
        bool is_ws;

        /* request */
        HttpMethod method;
        char origin[256];
        char sid[HTTP_QUERY_VALUE_MAX];
        Buffer body;
        bool body_pending; /* a POST whose body has not been read completely */
        bool body_too_large;
        bool post_stream;       /* Engine.IO POST: the body is decoded as it arrives */
        int post_error;
        size_t post_packet_len; /* bytes of the packet being received */
        bool post_oversized;

        /* response */
        bool responding;
        unsigned status;
        const char *content_type;
        Buffer response; /* LWS_PRE headroom */
        size_t response_sent;
        bool headers_sent;
        bool close_after_response;

        /* Engine.IO */
        EioSession *session; /* parked long-poll GET, or the websocket's session */
        bool parked;
        bool probe_pong_pending;

        /* websocket receive */
        Buffer rx;
        bool rx_binary;
        bool rx_oversized;
        size_t rx_total;
        /* websocket send progress within the head packet of the session queue */
        size_t tx_offset;
        bool close_requested;
} HttpConn;

typedef struct HttpServerConfig {
        size_t max_http_body;        /* bound for bodies of routes that take none */
        unsigned max_connections;
} HttpServerConfig;

int http_server_new(sd_event *event, const HttpServerConfig *config, HttpServer **ret);
HttpServer *http_server_free(HttpServer *s);

/* Listen on every address `host` resolves to (numeric or name; "0.0.0.0", "::", "localhost"). */
int http_server_listen(HttpServer *s, const char *host, const char *port);
/* The port actually bound by the first listener (useful with port "0"). */
unsigned http_server_port(HttpServer *s);

/* Route requests whose path starts with eio's path to it. */
int http_server_add_eio(HttpServer *s, EioServer *eio);

/* Stop accepting and close every connection. */
void http_server_shutdown(HttpServer *s);

/* Respond to the current request with a body (taken over; may be NULL for no body). */
int http_conn_respond(HttpConn *c, unsigned status, const char *content_type, Buffer *body);
/* Respond with an Engine.IO style JSON error body {"code":…,"message":…}. */
int http_conn_respond_error(HttpConn *c, unsigned status, int code, const char *message);

/* Copy a query argument's value (URL-decoded by lws). Returns length, or -ENOENT / -E2BIG. */
int http_conn_query(HttpConn *c, const char *name, char *buf, size_t size);

/* Ask lws to call back when the websocket can take more data. */
void http_conn_want_write(HttpConn *c);

/* SPDX-License-Identifier: MIT */
#pragma once

/* The HTTP/WebSocket front of agentix-server and agentix-e2b: our own listening sockets (any
 * address family, several addresses), plain HTTP/1.1 served by http-conn.c (persistent
 * connections, pipelining, chunked bodies; requests framed by libhttp-parser), WebSocket
 * upgrades handed to a libwebsockets vhost running on the uv loop embedded in sd-event, and
 * routing: GET /health, a takeover (a program that wants the socket itself once a head is in:
 * the port proxy, the E2B gateway), handlers by path prefix, and Engine.IO endpoints by path
 * (through HttpEioOps: this library knows nothing of Engine.IO). */

#include <stdbool.h>

#include <systemd/sd-event.h>

#include "buffer.h"

/* libwebsockets.h and http_parser.h cannot be included together (both define enum
 * http_status): each .c file includes the one it uses. */
struct lws;
struct http_parser;

typedef struct HttpServer HttpServer;
typedef struct EioServer EioServer;
typedef struct EioSession EioSession;

typedef enum HttpMethod {
        HTTP_METHOD_OTHER,
        HTTP_METHOD_GET,
        HTTP_METHOD_POST,
        HTTP_METHOD_OPTIONS,
        HTTP_METHOD_DELETE,
} HttpMethod;

#define HTTP_QUERY_VALUE_MAX 64
/* Request line plus headers; Node's default bound too. Larger heads get 431. */
#define HTTP_MAX_HEAD (16u * 1024u)

/* One client connection. Either a plain HTTP/1.1 connection of ours (http-conn.c: fd, parser,
 * one request at a time, the request part reset at each new request), or a WebSocket that
 * libwebsockets runs (wsi set; this struct is then lws's per-session data). */
typedef struct HttpConn {
        HttpServer *server;
        EioServer *eio; /* route of the current request / websocket */
        struct lws *wsi; /* WebSocket only */
        bool is_ws;

        /* plain HTTP: the connection (http-conn.c) */
        int fd;
        sd_event_source *io, *timer, *defer;
        /* HttpServer's list: of plain connections, or (ws_listed) of WebSockets */
        struct HttpConn *prev, *next;
        bool ws_listed;
        struct http_parser *parser;
        Buffer in;        /* received, from the start of the current request's head */
        size_t in_parsed; /* bytes of `in` the parser has taken */
        bool in_message;  /* between the first byte of a request and its end */
        bool head_done;   /* the current request's head is parsed */
        bool lingering;   /* final response out, write side shut, waiting for the peer's close */
        bool request_done;
        bool keep_alive;
        bool peer_closed;
        bool dead;
        uint64_t progress_usec; /* last byte in or out, for the timeouts */
        uint64_t idle_since_usec;    /* accepted, or the last response out: the idle timeout's
                                      * start (bytes that begin no request do not move it) */
        uint64_t request_since_usec; /* the current request's first byte */
        uint64_t cutoff_usec;        /* 0, or when the current request (its head; its body when it
                                      * was answered at its head) or a linger ends whatever comes */
        size_t discarded;            /* body bytes of a request answered at its head, dropped */
        bool value_unusable;         /* the header value being received was too long: no later
                                      * piece of it may count */
        Buffer url;
        char path[256];          /* of the request target, once its head is parsed */
        size_t query_off, query_len; /* the query's place in url */
        int target_error;        /* the target could not be split (-EINVAL, -E2BIG) */
        char header_name[32];
        size_t header_name_len;
        int header_kind; /* which header the value being received belongs to */
        char upgrade_proto[16];
        char expect[16];
        Buffer out_head;  /* status lines and headers, in order */
        size_t out_head_sent;
        Buffer out_body;  /* body of the response being sent */
        size_t out_body_sent;
        bool response_queued;

        /* request */
        HttpMethod method;
        char origin[256];
        char sid[HTTP_QUERY_VALUE_MAX];
        Buffer body;       /* Engine.IO: the polling packet being received */
        bool body_pending; /* a request body has not been read completely */
        bool post_stream;       /* Engine.IO POST: the body is decoded as it arrives */
        int post_error;
        size_t post_packet_len; /* bytes of the packet being received */
        bool post_oversized;

        /* response */
        bool responding;
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
        /* close-by-reset mode: being ended with a reset (once drained, by this time) */
        bool ws_ending;
        uint64_t ws_ending_deadline;

        /* the takeover (http_server_set_takeover()) has the socket once its head is parsed */
        bool takeover_requested;

        /* a request for a route of a handler of ours (http_server_add_route()) */
        const struct HttpHandler *handler;
        void *handler_data;
        size_t body_max;        /* bytes of body kept for the handler (0: none) */
        bool body_oversized;    /* … and it had more */
        bool streaming;         /* a chunked response under way (http_conn_stream_*()) */
        char authorization[256]; /* the Authorization header (http_conn_bearer_token()) */
        char access_token[256];  /* the X-Access-Token header */
        Buffer extra_headers;    /* header lines for the response (http_conn_add_header()) */
} HttpConn;

/* What a route's handler is told about its request. `request` runs once the whole request
 * (its body in c->body, at most c->body_max bytes) is in; it answers then or later, with
 * http_conn_respond() or a stream. `drained` (optional) runs when a stream's data went out;
 * `closed` (optional) when the connection ends before the handler detached itself
 * (http_conn_detach_handler()), which it does once it answered. */
typedef struct HttpHandler {
        void (*request)(HttpConn *c, void *data);
        void (*drained)(HttpConn *c, void *data);
        void (*closed)(HttpConn *c, void *data);
} HttpHandler;

/* A route: called with each request whose path starts with its prefix, once the head is in.
 * It either answers at once, or takes the request with http_conn_set_handler(). */
typedef void (*HttpRouteFn)(HttpConn *c, const char *path, void *userdata);

typedef struct HttpServerConfig {
        unsigned max_connections;
        unsigned idle_timeout_ms;    /* a kept-alive connection with no request (default 60 s) */
        unsigned request_timeout_ms; /* no progress while a request arrives or a response
                                      * leaves (default 30 s) */
        /* Never send the first FIN of a connection, so that no TCP connection of ours is ever
         * left in TIME_WAIT (gVisor cannot checkpoint a sandbox that holds one): a connection
         * the server ends is reset (SO_LINGER {1, 0}) once the peer has acknowledged all of it
         * (socket-drain.h), none is shut down for writing, and listening sockets are made
         * without SO_REUSEADDR (else another listener could join ours on the port while we
         * hold still, http_server_set_accepting()). */
        bool close_by_reset;
} HttpServerConfig;

int http_server_new(sd_event *event, const HttpServerConfig *config, HttpServer **ret);
HttpServer *http_server_free(HttpServer *s);

/* Listen on every address `host` resolves to (numeric or name; "0.0.0.0", "::", "localhost"). */
int http_server_listen(HttpServer *s, const char *host, const char *port);
/* Serve on fd, a socket listening already (systemd's socket activation); it is the server's
 * from now on. */
int http_server_listen_fd(HttpServer *s, int fd);
/* The port actually bound by the first listener (useful with port "0"). */
unsigned http_server_port(HttpServer *s);
/* The TCP ports of its listening sockets (at most max, into ret; a port twice when it listens
 * on two addresses). */
size_t http_server_ports(HttpServer *s, uint16_t *ret, size_t max);

/* A program that takes a connection itself once a request's head is in (the port proxy,
 * http-proxy.h; the E2B gateway): `wants` is asked at each head (c's path, method and headers
 * are read, http_conn_header()); when it says yes, `take` owns fd from then on, with the
 * request's head and whatever followed it. */
typedef struct HttpTakeover {
        bool (*wants)(HttpConn *c, const char *path, void *userdata);
        void (*take)(int fd, const uint8_t *data, size_t size, void *userdata);
        void *userdata;
} HttpTakeover;
void http_server_set_takeover(HttpServer *s, const HttpTakeover *takeover);

/* Engine.IO's side of its routes (eio-server.c's eio_http_ops): the HTTP code calls it
 * through this table and needs nothing of Engine.IO itself. */
typedef struct HttpEioOps {
        const char *(*path)(const EioServer *eio);
        void (*handle_request)(EioServer *eio, HttpConn *c);
        void (*post_chunk)(HttpConn *c, const uint8_t *data, size_t size);
        void (*handle_body)(EioServer *eio, HttpConn *c);
        void (*http_closed)(HttpConn *c);
        int (*ws_check)(EioServer *eio, HttpConn *c);
        int (*ws_established)(EioServer *eio, HttpConn *c);
        int (*ws_receive)(HttpConn *c, const uint8_t *data, size_t size);
        int (*ws_writeable)(HttpConn *c);
        void (*ws_closed)(HttpConn *c);
} HttpEioOps;

/* Route requests whose path starts with eio's path to it (every Engine.IO route of a server
 * has the same ops). */
int http_server_add_eio(HttpServer *s, EioServer *eio, const HttpEioOps *ops);
/* Route requests whose path starts with prefix to fn (after /health, before Engine.IO). */
int http_server_add_route(HttpServer *s, const char *prefix, HttpRouteFn fn, void *userdata);

/* Serve TLS (tls-front.h) on every connection accepted from now on, with ctx (a reference is
 * taken); NULL: plain HTTP again. */
struct ssl_ctx_st;
int http_server_set_tls(HttpServer *s, struct ssl_ctx_st *ctx);
bool http_server_is_tls(const HttpServer *s);
/* End every plain connection (after its current response): a server that now serves TLS
 * keeps none it accepted in the clear. */
void http_server_end_connections(HttpServer *s);

/* Asked at each request's head (before the takeover, upgrades and routes, /health aside):
 * NULL admits it; a message refuses it with 503 and that message. */
typedef const char *(*HttpAdmitFn)(HttpConn *c, const char *path, void *userdata);
void http_server_set_admit(HttpServer *s, HttpAdmitFn fn, void *userdata);

/* Stop accepting; idle connections close, the others after their current response. */
void http_server_shutdown(HttpServer *s);

/* false: stop accepting on every listening socket and keep its port: its event source is
 * disabled (out of epoll) and it is shut down for reading, which ends its listening (what
 * waited in its queue is reset) but keeps it bound. true: listen() again and accept. */
int http_server_set_accepting(HttpServer *s, bool accepting);
/* End every connection but keep (NULL: all) at once with a reset: plain ones, WebSockets, TLS
 * connections, and sockets waiting to be drained (socket-drain.h). */
void http_server_reset_connections(HttpServer *s, HttpConn *keep);
/* The TCP socket c's bytes travel over: its own, or its TLS connection's. -EBADF for none (a
 * WebSocket, libwebsockets' own). */
int http_server_conn_socket(const HttpServer *s, const HttpConn *c);

/* The reason phrase of an HTTP status ("Not Found"), "Unknown" for one it does not know. */
const char *http_reason_phrase(unsigned status);

/* Respond to the current request with a body (taken over; may be NULL for no body). */
int http_conn_respond(HttpConn *c, unsigned status, const char *content_type, Buffer *body);
/* One more header for the response to the current request (before it is answered). */
int http_conn_add_header(HttpConn *c, const char *name, const char *value);
/* Respond with body as compact JSON (taken over; NULL or unprintable: 500). */
struct json_t;
int http_conn_respond_json(HttpConn *c, unsigned status, struct json_t *body);
/* Respond with an Engine.IO style JSON error body {"code":…,"message":…}. */
int http_conn_respond_error(HttpConn *c, unsigned status, int code, const char *message);

/* Take the current request for a handler: its body is kept (at most body_max bytes) and
 * handler->request runs once it is complete. */
void http_conn_set_handler(HttpConn *c, const HttpHandler *handler, void *data, size_t body_max);
/* The handler is done with the connection (it answered, or gives up): no more callbacks. */
void http_conn_detach_handler(HttpConn *c);
/* A response whose body comes in pieces (Transfer-Encoding: chunked), e.g. NDJSON lines as
 * they are made. write queues one piece (no size limit: the caller paces itself by
 * `drained`); end finishes the response. */
int http_conn_stream_begin(HttpConn *c, unsigned status, const char *content_type);
int http_conn_stream_write(HttpConn *c, const void *data, size_t size);
int http_conn_stream_end(HttpConn *c);
/* T of "Authorization: Bearer T", or NULL (none, or another scheme: E2B's SDK names a user
 * with "Basic", beside its X-Access-Token). */
const char *http_conn_bearer_token(const HttpConn *c);

/* Bytes of the response queued and not yet sent. */
size_t http_conn_pending(const HttpConn *c);

/* Copy a request header's value (the first of that name, case-insensitive, without the
 * blanks around it) while the request's head is being routed (a route, a takeover's wants).
 * Returns its length, or -ENOENT / -E2BIG. */
int http_conn_header(const HttpConn *c, const char *name, char *buf, size_t size);

/* The nth (from 0) value of a query argument given more than once (state=a&state=b), plain
 * HTTP only. Returns length, or -ENOENT / -E2BIG. */
int http_conn_query_nth(const HttpConn *c, const char *name, unsigned nth, char *buf, size_t size);

/* s (n bytes) with %XX escapes and '+' for a space decoded, NUL-terminated, in buf. Returns
 * the length, or -E2BIG. */
int http_url_decode(const char *s, size_t n, char *buf, size_t size);

/* Copy a query argument's value (URL-decoded). Returns length, or -ENOENT / -E2BIG. */
int http_conn_query(HttpConn *c, const char *name, char *buf, size_t size);

/* Ask lws to call back when the websocket can take more data. */
void http_conn_want_write(HttpConn *c);

/* For http-conn.c. */
int http_conn_own_query(HttpConn *c, const char *name, char *buf, size_t size);
const HttpServerConfig *http_server_config(const HttpServer *s);
sd_event *http_server_event(const HttpServer *s);
bool http_server_is_shutting_down(const HttpServer *s);
/* A complete request head arrived (path without the query). Routes it. */
void http_server_dispatch(HttpServer *s, HttpConn *c, const char *path);
/* The request asks for a WebSocket: check it and hand the socket, with `head` (the request's
 * bytes, and whatever followed), to libwebsockets. Returns 0 when lws has the socket; <0 when
 * the request was answered with an error instead (the connection then closes). */
int http_server_upgrade(HttpServer *s, HttpConn *c, const char *path, const uint8_t *head, size_t size);
/* Does the takeover want this request (its head is in)? */
bool http_server_takeover_wants(HttpServer *s, HttpConn *c, const char *path);
/* Give the socket, with `head` (the request's bytes and whatever followed), to the takeover. The
 * connection is no longer http-conn.c's. */
void http_server_takeover(HttpServer *s, HttpConn *c, const uint8_t *head, size_t size);
/* Engine.IO's ops, for http-conn.c (NULL: no Engine.IO route). */
const HttpEioOps *http_server_eio_ops(const HttpServer *s);
void http_server_conn_added(HttpServer *s, HttpConn *c);
/* Is c waiting for a request (idle, its head still arriving, a refused request's body being
 * dropped, lingering)? Then ret_since says since when: at the connection cap, the one that has
 * waited longest gives its place to a new connection. */
bool http_conn_waiting(const HttpConn *c, uint64_t *ret_since);
void http_server_conn_removed(HttpServer *s, HttpConn *c);
/* Close a connection's socket the server is done with (its event source is gone already): in
 * close-by-reset mode through the drain (socket-drain.h), else at once. */
void http_server_close_socket(HttpServer *s, int fd);

/* http-conn.c */
int http_conn_new(HttpServer *server, int fd, HttpConn **ret);
HttpConn *http_conn_free(HttpConn *c);
/* Close now if idle, else after the response in progress (server shutdown). */
void http_conn_shutdown(HttpConn *c);
/* End the connection now with a reset, whatever it was doing. */
void http_conn_reset(HttpConn *c);

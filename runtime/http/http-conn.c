/* SPDX-License-Identifier: MIT */
/* One plain HTTP/1.1 connection: persistent (keep-alive), pipelined requests answered in order,
 * bodies of any framing (Content-Length or chunked, arriving in any pieces), `Connection: close`
 * and HTTP/1.0 honoured, `Expect: 100-continue` answered. libhttp-parser frames the requests;
 * this file owns the socket, the order of responses and the timeouts.
 *
 * One request is handled at a time: the parser pauses at the end of each request and resumes
 * once its response has been written, so a parked long-poll GET holds back what was pipelined
 * behind it, as HTTP/1.1 requires. A request asking for a WebSocket is handed, with its bytes,
 * to libwebsockets (http_server_upgrade()). */

#include <inttypes.h>
#include <limits.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <http_parser.h>
#include <jansson.h>

#include "http-head.h"
#include "http-server.h"
#include "log.h"

/* Unparsed input kept at most (pipelined requests behind one that waits). */
#define IN_MAX (256u * 1024u)
#define READ_CHUNK (64u * 1024u)
/* A body still to come after an early answer is read and dropped up to this, else we close
 * (whatever its framing: a chunked one says no length to refuse at the head). */
#define DISCARD_MAX (1024u * 1024u)
/* After a final response with "Connection: close": time the peer gets to read it and close. */
#define USEC_PER_SEC 1000000ULL
#define USEC_PER_MSEC 1000ULL
#define LINGER_USEC (2 * USEC_PER_SEC)

enum {
        HEADER_OTHER,
        HEADER_ORIGIN,
        HEADER_UPGRADE,
        HEADER_EXPECT,
        HEADER_AUTHORIZATION,
        HEADER_ACCESS_TOKEN,
};

static void conn_kick(HttpConn *c);
static void conn_step(HttpConn *c);

static uint64_t loop_now(HttpConn *c) {
        uint64_t t = 0;
        (void) sd_event_now(http_server_event(c->server), CLOCK_MONOTONIC, &t);
        return t;
}

/* ---- the request -------------------------------------------------------------------------- */

static void conn_reset_request(HttpConn *c) {
        c->method = HTTP_METHOD_OTHER;
        c->eio = NULL;
        c->origin[0] = 0;
        c->sid[0] = 0;
        c->upgrade_proto[0] = 0;
        c->expect[0] = 0;
        buffer_clear(&c->url);
        c->path[0] = 0;
        c->query_off = c->query_len = 0;
        c->header_name_len = 0;
        c->header_kind = -1;
        buffer_done(&c->body);
        c->body_pending = false;
        c->post_stream = false;
        c->post_error = 0;
        c->post_packet_len = 0;
        c->post_oversized = false;
        c->responding = false;
        c->response_queued = false;
        c->request_done = false;
        c->handler = NULL;
        c->handler_data = NULL;
        c->body_max = 0;
        c->body_oversized = false;
        c->streaming = false;
        buffer_clear(&c->extra_headers);
        c->access_token[0] = 0;
        c->authorization[0] = 0;
        c->cutoff_usec = 0;
        c->discarded = 0;
        c->value_unusable = false;
}

static bool header_name_is(HttpConn *c, const char *name) {
        return c->header_name_len == strlen(name) && strncasecmp(c->header_name, name, c->header_name_len) == 0;
}

static int on_message_begin(http_parser *p) {
        HttpConn *c = p->data;

        conn_reset_request(c);
        c->in_message = true;
        c->head_done = false;
        /* The whole head has this long, however it trickles in: a peer that sends a byte now and
         * then (no token needed for that) must not keep a connection's place for ever. */
        c->request_since_usec = loop_now(c);
        c->cutoff_usec = c->request_since_usec + http_server_config(c->server)->request_timeout_ms * USEC_PER_MSEC;
        return 0;
}

static int on_url(http_parser *p, const char *at, size_t n) {
        HttpConn *c = p->data;

        if (c->url.len + n > HTTP_MAX_HEAD)
                return -1; /* the parser's header bound stops it first */
        return buffer_append(&c->url, at, n) < 0 ? -1 : 0;
}

static int on_header_field(http_parser *p, const char *at, size_t n) {
        HttpConn *c = p->data;

        if (c->header_kind >= 0) { /* a value came before: this is a new header */
                c->header_name_len = 0;
                c->header_kind = -1;
        }
        /* Longer names are none we look at: keep the first bytes, they cannot match. */
        n = MIN(n, sizeof(c->header_name) - c->header_name_len);
        memcpy(c->header_name + c->header_name_len, at, n);
        c->header_name_len += n;
        return 0;
}

/* false: the value is too long to be one we can use (dst is then empty). */
static bool append_value(char *dst, size_t size, const char *at, size_t n) {
        size_t len = strlen(dst);

        if (len + n >= size) {
                dst[0] = 0;
                return false;
        }
        memcpy(dst + len, at, n);
        dst[len + n] = 0;
        return true;
}

static int on_header_value(http_parser *p, const char *at, size_t n) {
        HttpConn *c = p->data;

        if (c->header_kind < 0) {
                c->header_kind = header_name_is(c, "origin")           ? HEADER_ORIGIN
                               : header_name_is(c, "upgrade")        ? HEADER_UPGRADE
                               : header_name_is(c, "expect")         ? HEADER_EXPECT
                               : header_name_is(c, "authorization")  ? HEADER_AUTHORIZATION
                               : header_name_is(c, "x-access-token") ? HEADER_ACCESS_TOKEN
                                                                     : HEADER_OTHER;
                if (c->header_kind == HEADER_ORIGIN)
                        c->origin[0] = 0;
                /* One of each per request: the last one wins. */
                if (c->header_kind == HEADER_AUTHORIZATION)
                        c->authorization[0] = 0;
                if (c->header_kind == HEADER_ACCESS_TOKEN)
                        c->access_token[0] = 0;
                c->value_unusable = false;
        }
        /* A value comes in as many pieces as the peer's packets make: once it is too long, the
         * pieces after that must not start it again (its tail could then pass for a token). */
        if (c->value_unusable)
                return 0;
        switch (c->header_kind) {
        case HEADER_ORIGIN:
                c->value_unusable = !append_value(c->origin, sizeof(c->origin), at, n);
                break;
        case HEADER_UPGRADE:
                c->value_unusable = !append_value(c->upgrade_proto, sizeof(c->upgrade_proto), at, n);
                break;
        case HEADER_EXPECT:
                c->value_unusable = !append_value(c->expect, sizeof(c->expect), at, n);
                break;
        case HEADER_AUTHORIZATION:
                c->value_unusable = !append_value(c->authorization, sizeof(c->authorization), at, n);
                break;
        case HEADER_ACCESS_TOKEN:
                c->value_unusable = !append_value(c->access_token, sizeof(c->access_token), at, n);
                break;
        }
        return 0;
}

const char *http_conn_bearer_token(const HttpConn *c) {
        static const char bearer[] = "Bearer ";
        size_t n = sizeof(bearer) - 1;

        if (strncasecmp(c->authorization, bearer, n) != 0 || !c->authorization[n])
                return NULL;
        return c->authorization + n;
}

static bool request_has_body(const http_parser *p) {
        return (p->flags & F_CHUNKED) || (p->content_length > 0 && p->content_length != ULLONG_MAX);
}

static HttpMethod method_of(const http_parser *p) {
        switch (p->method) {
        case HTTP_GET:
                return HTTP_METHOD_GET;
        case HTTP_POST:
                return HTTP_METHOD_POST;
        case HTTP_OPTIONS:
                return HTTP_METHOD_OPTIONS;
        case HTTP_DELETE:
                return HTTP_METHOD_DELETE;
        default:
                return HTTP_METHOD_OTHER;
        }
}

/* Split the request target once: the path into c->path, the query's place in c->url. */
static int parse_target(HttpConn *c) {
        struct http_parser_url u;
        const char *url = (const char *) buffer_data(&c->url);

        http_parser_url_init(&u);
        if (c->url.len == 0 || http_parser_parse_url(url, c->url.len, false, &u) != 0 || !(u.field_set & (1 << UF_PATH)))
                return -EINVAL;
        if (u.field_data[UF_PATH].len >= sizeof(c->path))
                return -E2BIG;
        memcpy(c->path, url + u.field_data[UF_PATH].off, u.field_data[UF_PATH].len);
        c->path[u.field_data[UF_PATH].len] = 0;
        if (u.field_set & (1 << UF_QUERY)) {
                c->query_off = u.field_data[UF_QUERY].off;
                c->query_len = u.field_data[UF_QUERY].len;
        }
        return 0;
}

static int on_headers_complete(http_parser *p) {
        HttpConn *c = p->data;

        c->header_kind = -1;
        c->head_done = true;
        c->method = method_of(p);
        c->keep_alive = http_should_keep_alive(p) && !http_server_is_shutting_down(c->server);
        c->body_pending = request_has_body(p);
        c->target_error = parse_target(c);
        if (c->target_error == 0 && http_server_takeover_wants(c->server, c, c->path)) {
                /* conn_parse() hands the connection over, head and all. */
                c->takeover_requested = true;
                http_parser_pause(p, 1);
                return 0;
        }
        if (p->upgrade)
                return 0; /* the parser stops here; conn_parse() hands the connection over */

        if (c->target_error == -E2BIG)
                (void) http_conn_respond_error(c, 414, 3, "URI too long");
        else if (c->target_error < 0)
                (void) http_conn_respond_error(c, 400, 3, "Bad request");
        else
                http_server_dispatch(c->server, c, c->path);

        /* A client waiting for leave to send its body gets it, unless it was answered already. */
        if (strcasecmp(c->expect, "100-continue") == 0 && c->body_pending && !c->responding)
                (void) buffer_append(&c->out_head, "HTTP/1.1 100 Continue\r\n\r\n", 25);
        /* A request being served may take its time (a large upload, a parked poll): only a
         * request answered at its head (refused, not found) keeps the cut-off for its body. */
        if (!c->responding)
                c->cutoff_usec = 0;
        return 0;
}

/* Only an Engine.IO POST takes a body; any other request was answered (or parked) at its
 * headers, and its body is read and dropped. */
static int on_body(http_parser *p, const char *at, size_t n) {
        HttpConn *c = p->data;

        /* What follows an early answer is dropped, and only so much of it: then we close. */
        if (c->responding && (c->discarded += n) > DISCARD_MAX)
                return -1;
        if (c->post_stream && !c->responding)
                http_server_eio_ops(c->server)->post_chunk(c, (const uint8_t *) at, n);
        else if (c->handler && !c->responding) {
                if (c->body_oversized || c->body.len + n > c->body_max)
                        c->body_oversized = true;
                else if (buffer_append(&c->body, at, n) < 0)
                        c->dead = true;
        }
        return 0;
}

static int on_message_complete(http_parser *p) {
        HttpConn *c = p->data;

        c->in_message = false;
        c->body_pending = false;
        c->request_done = true;
        http_parser_pause(p, 1);
        if (p->upgrade || c->responding || c->parked)
                return 0;
        if (c->handler) {
                c->handler->request(c, c->handler_data);
                return 0;
        }
        if (c->eio && c->method == HTTP_METHOD_POST)
                http_server_eio_ops(c->server)->handle_body(c->eio, c);
        else
                (void) http_conn_respond_error(c, 400, 3, "Bad request");
        return 0;
}

static const http_parser_settings parser_settings = {
        .on_message_begin = on_message_begin,
        .on_url = on_url,
        .on_header_field = on_header_field,
        .on_header_value = on_header_value,
        .on_headers_complete = on_headers_complete,
        .on_body = on_body,
        .on_message_complete = on_message_complete,
};

/* ---- query arguments ------------------------------------------------------------------------ */

static int hex_value(char ch) {
        if (ch >= '0' && ch <= '9')
                return ch - '0';
        if (ch >= 'a' && ch <= 'f')
                return ch - 'a' + 10;
        if (ch >= 'A' && ch <= 'F')
                return ch - 'A' + 10;
        return -1;
}

/* application/x-www-form-urlencoded: %XX escapes and '+' for a space. */
int http_url_decode(const char *s, size_t n, char *buf, size_t size) {
        size_t k = 0;

        for (size_t i = 0; i < n; i++) {
                char ch = s[i];
                if (ch == '%' && i + 2 < n && hex_value(s[i + 1]) >= 0 && hex_value(s[i + 2]) >= 0) {
                        ch = (char) (hex_value(s[i + 1]) << 4 | hex_value(s[i + 2]));
                        i += 2;
                } else if (ch == '+')
                        ch = ' ';
                if (k + 1 >= size)
                        return -E2BIG;
                buf[k++] = ch;
        }
        buf[k] = 0;
        return (int) k;
}

/* The head is whole at the start of c->in while it is routed (conn_parse() keeps it). */
int http_conn_header(const HttpConn *c, const char *name, char *buf, size_t size) {
        const uint8_t *p = buffer_data(&c->in);
        size_t n = c->in.len, len;
        const char *v;
        HttpHead h;

        if (!c->head_done || c->is_ws)
                return -ENOENT;
        /* The blank lines a parser allows before a request. */
        while (n > 0 && (*p == '\r' || *p == '\n'))
                p++, n--;
        if (http_head_parse(p, n, &h) < 0 || !http_head_find(&h, name, &v, &len))
                return -ENOENT;
        if (len >= size)
                return -E2BIG;
        memcpy(buf, v, len);
        buf[len] = 0;
        return (int) len;
}

int http_conn_query_nth(const HttpConn *c, const char *name, unsigned nth, char *buf, size_t size) {
        const char *q = (const char *) buffer_data(&c->url) + c->query_off, *end = q + c->query_len;
        size_t name_len = strlen(name);

        while (q < end) {
                const char *amp = memchr(q, '&', (size_t) (end - q)) ?: end;
                const char *eq = memchr(q, '=', (size_t) (amp - q));
                size_t key_len = (size_t) ((eq ?: amp) - q);

                if (key_len == name_len && memcmp(q, name, name_len) == 0 && nth-- == 0)
                        return eq ? http_url_decode(eq + 1, (size_t) (amp - eq - 1), buf, size)
                                  : http_url_decode("", 0, buf, size);
                q = amp + 1;
        }
        return -ENOENT;
}

int http_conn_own_query(HttpConn *c, const char *name, char *buf, size_t size) {
        return http_conn_query_nth(c, name, 0, buf, size);
}

/* ---- the response --------------------------------------------------------------------------- */

const char *http_reason_phrase(unsigned status) {
        switch (status) {
        case 200: return "OK";
        case 204: return "No Content";
        case 400: return "Bad Request";
        case 401: return "Unauthorized";
        case 403: return "Forbidden";
        case 404: return "Not Found";
        case 405: return "Method Not Allowed";
        case 409: return "Conflict";
        case 408: return "Request Timeout";
        case 413: return "Payload Too Large";
        case 414: return "URI Too Long";
        case 415: return "Unsupported Media Type";
        case 429: return "Too Many Requests";
        case 431: return "Request Header Fields Too Large";
        case 500: return "Internal Server Error";
        case 502: return "Bad Gateway";
        case 503: return "Service Unavailable";
        default: return "Unknown";
        }
}

/* The status line and headers; content_length < 0: a chunked body follows. */
static int write_head(HttpConn *c, unsigned status, const char *content_type, int64_t content_length) {
        Buffer *h = &c->out_head;
        int r;

        /* A body still on its way is read and dropped when small, else not worth waiting for. */
        if (c->in_message && c->body_pending &&
            !(c->parser->flags & F_CHUNKED) && c->parser->content_length > DISCARD_MAX)
                c->close_after_response = true;
        if (!c->keep_alive || c->peer_closed || http_server_is_shutting_down(c->server))
                c->close_after_response = true;

        r = buffer_printf(h, "HTTP/1.1 %u %s\r\n", status, http_reason_phrase(status));
        if (r >= 0 && status != 204 && content_length >= 0)
                r = buffer_printf(h, "Content-Type: %s\r\nContent-Length: %" PRIi64 "\r\n",
                                  content_type ?: "text/plain; charset=UTF-8", content_length);
        else if (r >= 0 && status != 204)
                r = buffer_printf(h, "Content-Type: %s\r\nTransfer-Encoding: chunked\r\n",
                                  content_type ?: "text/plain; charset=UTF-8");
        /* Socket.IO clients run in browsers too: answer CORS for any origin. */
        if (r >= 0) {
                if (c->origin[0])
                        r = buffer_printf(h, "Access-Control-Allow-Origin: %s\r\n"
                                             "Access-Control-Allow-Credentials: true\r\nVary: Origin\r\n", c->origin);
                else
                        r = buffer_printf(h, "Access-Control-Allow-Origin: *\r\n");
        }
        if (r >= 0 && c->method == HTTP_METHOD_OPTIONS)
                r = buffer_printf(h, "Access-Control-Allow-Methods: GET, POST, DELETE, OPTIONS\r\n"
                                     "Access-Control-Allow-Headers: content-type, authorization, x-access-token\r\n");
        if (r >= 0)
                r = buffer_printf(h, "Cache-Control: no-store\r\n");
        if (r >= 0 && c->extra_headers.len > 0)
                r = buffer_append(h, buffer_data(&c->extra_headers), c->extra_headers.len);
        if (r >= 0) {
                if (c->close_after_response)
                        r = buffer_printf(h, "Connection: close\r\n");
                else if (c->parser->http_major == 1 && c->parser->http_minor == 0)
                        r = buffer_printf(h, "Connection: keep-alive\r\n");
        }
        if (r >= 0)
                r = buffer_printf(h, "\r\n");
        if (r < 0) {
                c->dead = true;
                conn_kick(c);
        }
        return r;
}

int http_conn_respond(HttpConn *c, unsigned status, const char *content_type, Buffer *body) {
        _cleanup_buffer_ Buffer taken = BUFFER_NULL;
        int r;

        if (body) {
                taken = *body;
                *body = BUFFER_NULL;
        }
        if (c->responding || c->wsi || c->dead)
                return -EBUSY;
        c->responding = true;
        r = write_head(c, status, content_type, (int64_t) taken.len);
        if (r < 0)
                return r;
        buffer_done(&c->out_body);
        c->out_body = taken;
        taken = BUFFER_NULL;
        c->out_body_sent = 0;
        c->response_queued = true;
        c->parked = false;
        conn_kick(c);
        return 0;
}

void http_conn_set_handler(HttpConn *c, const HttpHandler *handler, void *data, size_t body_max) {
        c->handler = handler;
        c->handler_data = data;
        c->body_max = body_max;
}

void http_conn_detach_handler(HttpConn *c) {
        c->handler = NULL;
        c->handler_data = NULL;
}

int http_conn_stream_begin(HttpConn *c, unsigned status, const char *content_type) {
        int r;

        if (c->responding || c->wsi || c->dead)
                return -EBUSY;
        c->responding = true;
        r = write_head(c, status, content_type, -1);
        if (r < 0)
                return r;
        c->streaming = true;
        c->parked = false;
        conn_kick(c);
        return 0;
}

int http_conn_stream_write(HttpConn *c, const void *data, size_t size) {
        int r;

        if (!c->streaming || c->dead)
                return -EPIPE;
        if (size == 0)
                return 0; /* an empty chunk would end the body */
        r = buffer_printf(&c->out_body, "%zx\r\n", size);
        if (r >= 0)
                r = buffer_append(&c->out_body, data, size);
        if (r >= 0)
                r = buffer_append(&c->out_body, "\r\n", 2);
        if (r < 0) {
                c->dead = true;
                conn_kick(c);
                return r;
        }
        conn_kick(c);
        return 0;
}

int http_conn_stream_end(HttpConn *c) {
        if (!c->streaming || c->dead)
                return -EPIPE;
        if (buffer_append(&c->out_body, "0\r\n\r\n", 5) < 0) {
                c->dead = true;
                conn_kick(c);
                return -ENOMEM;
        }
        c->streaming = false;
        c->response_queued = true;
        conn_kick(c);
        return 0;
}

size_t http_conn_pending(const HttpConn *c) {
        return (c->out_head.len - c->out_head_sent) + (c->out_body.len - c->out_body_sent);
}

int http_conn_add_header(HttpConn *c, const char *name, const char *value) {
        /* A name or value that could end the line would let a caller's data make headers. */
        if (c->responding || strpbrk(name, "\r\n:") || strpbrk(value, "\r\n"))
                return -EINVAL;
        return buffer_printf(&c->extra_headers, "%s: %s\r\n", name, value);
}

int http_conn_respond_json(HttpConn *c, unsigned status, json_t *body) {
        _cleanup_buffer_ Buffer b = BUFFER_NULL;
        char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;

        json_decref(body);
        if (!text || buffer_append(&b, text, strlen(text)) < 0) {
                free(text);
                return http_conn_respond_error(c, 500, 500, "out of memory");
        }
        free(text);
        return http_conn_respond(c, status, "application/json", &b);
}

int http_conn_respond_error(HttpConn *c, unsigned status, int code, const char *message) {
        _cleanup_buffer_ Buffer b = BUFFER_NULL;
        int r;

        r = buffer_printf(&b, "{\"code\":%d,\"message\":\"%s\"}", code, message);
        if (r < 0)
                return r;
        return http_conn_respond(c, status, "application/json", &b);
}

static bool output_pending(const HttpConn *c) {
        return c->out_head_sent < c->out_head.len || c->out_body_sent < c->out_body.len;
}

/* Write what is queued. 0: all out; -EAGAIN: the socket is full; other <0: the peer is gone. */
static int conn_flush(HttpConn *c) {
        while (output_pending(c)) {
                struct iovec iov[2];
                struct msghdr mh = { .msg_iov = iov };
                size_t head_left = c->out_head.len - c->out_head_sent;
                ssize_t n;

                if (head_left > 0)
                        iov[mh.msg_iovlen++] = (struct iovec) { buffer_data(&c->out_head) + c->out_head_sent, head_left };
                if (c->out_body_sent < c->out_body.len)
                        iov[mh.msg_iovlen++] = (struct iovec) { buffer_data(&c->out_body) + c->out_body_sent,
                                                                c->out_body.len - c->out_body_sent };
                n = sendmsg(c->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return errno == EAGAIN ? -EAGAIN : -errno;
                }
                c->progress_usec = loop_now(c);
                size_t k = MIN((size_t) n, head_left);
                c->out_head_sent += k;
                c->out_body_sent += (size_t) n - k;
        }
        buffer_clear(&c->out_head);
        c->out_head_sent = 0;
        buffer_done(&c->out_body);
        c->out_body_sent = 0;
        return 0;
}

/* ---- driving the connection ----------------------------------------------------------------- */

/* Feed buffered input to the parser until it pauses (a request is complete), needs more, or
 * fails. */
static void conn_parse(HttpConn *c) {
        while (!c->dead && !c->request_done && c->in_parsed < c->in.len) {
                size_t n;
                enum http_errno e;

                /* Drop what the parser has taken, but keep a head whole while it arrives: it may
                 * turn out to be a WebSocket upgrade, which libwebsockets reads from the start. */
                if (!c->in_message || c->head_done) {
                        buffer_consume(&c->in, c->in_parsed);
                        c->in_parsed = 0;
                }
                n = http_parser_execute(c->parser, &parser_settings,
                                        (const char *) buffer_data(&c->in) + c->in_parsed, c->in.len - c->in_parsed);
                c->in_parsed += n;
                e = HTTP_PARSER_ERRNO(c->parser);

                if (c->takeover_requested) {
                        const uint8_t *head = buffer_data(&c->in);
                        size_t size = c->in.len;

                        while (size > 0 && (*head == '\r' || *head == '\n'))
                                head++, size--;
                        c->request_done = true;
                        http_server_takeover(c->server, c, head, size);
                        c->dead = true; /* the takeover has the socket now */
                        return;
                }
                if (c->parser->upgrade) {
                        const uint8_t *head = buffer_data(&c->in);
                        size_t size = c->in.len;

                        /* Skip the blank lines the parser allows before a request. */
                        while (size > 0 && (*head == '\r' || *head == '\n'))
                                head++, size--;
                        c->request_done = true;
                        c->close_after_response = true;
                        if (c->target_error < 0)
                                (void) http_conn_respond_error(c, 400, 3, "Bad request");
                        else if (http_server_upgrade(c->server, c, c->path, head, size) >= 0) {
                                /* libwebsockets has the socket now. */
                                c->fd = -1;
                                c->dead = true;
                        }
                        return;
                }
                if (e == HPE_PAUSED || (e == HPE_OK && n > 0))
                        continue;
                if (e == HPE_OK)
                        return;

                /* Not HTTP we can answer: say so once, then close. */
                if (!c->responding) {
                        if (e == HPE_HEADER_OVERFLOW)
                                (void) http_conn_respond_error(c, 431, 3, "Request header fields too large");
                        else
                                (void) http_conn_respond_error(c, 400, 3, "Bad request");
                }
                c->close_after_response = true;
                c->request_done = true;
                c->in_message = false;
                return;
        }
}

static void conn_update_events(HttpConn *c) {
        uint32_t events = EPOLLRDHUP;

        if (!c->peer_closed && c->in.len - c->in_parsed < IN_MAX)
                events |= EPOLLIN;
        if (output_pending(c))
                events |= EPOLLOUT;
        (void) sd_event_source_set_io_events(c->io, events);
}

/* When to give up on the connection, or 0 for never (a parked poll waits for Engine.IO). */
static uint64_t conn_deadline(HttpConn *c) {
        const HttpServerConfig *cfg = http_server_config(c->server);
        uint64_t d;

        if (c->lingering)
                return c->cutoff_usec; /* whatever the peer still sends */
        if (output_pending(c) || c->in_message) {
                d = c->progress_usec + cfg->request_timeout_ms * USEC_PER_MSEC;
                return c->in_message && c->cutoff_usec > 0 ? MIN(d, c->cutoff_usec) : d;
        }
        if (c->request_done)
                return 0;
        /* From the last response, not the last byte: blank lines between requests (which the
         * parser skips) do not keep an idle connection. */
        return c->idle_since_usec + cfg->idle_timeout_ms * USEC_PER_MSEC;
}

bool http_conn_waiting(const HttpConn *c, uint64_t *ret_since) {
        uint64_t since;

        if (c->dead || c->is_ws || c->fd < 0 || c->takeover_requested)
                return false;
        if (c->lingering)
                since = 0; /* closing anyway: the first to go */
        else if (c->in_message && (!c->head_done || c->responding))
                since = c->request_since_usec;
        else if (!c->in_message && !c->request_done && !output_pending(c))
                since = c->idle_since_usec;
        else
                return false;
        *ret_since = since;
        return true;
}

static void conn_update_timer(HttpConn *c) {
        uint64_t deadline = conn_deadline(c);

        if (deadline == 0) {
                (void) sd_event_source_set_enabled(c->timer, SD_EVENT_OFF);
                return;
        }
        (void) sd_event_source_set_time(c->timer, deadline);
        (void) sd_event_source_set_enabled(c->timer, SD_EVENT_ONESHOT);
}

static void conn_step(HttpConn *c) {
        while (!c->dead) {
                int r = conn_flush(c);
                if (r == -EAGAIN)
                        break;
                if (r < 0) {
                        c->dead = true;
                        break;
                }
                if (c->streaming && c->handler && c->handler->drained) {
                        /* A stream's data went out: its maker may make more. It only queues
                         * (and kicks the connection), so this loop flushes it next. */
                        c->handler->drained(c, c->handler_data);
                        if (output_pending(c))
                                continue;
                }
                if (c->lingering) {
                        /* Read and drop until the peer closes (or the linger time is up). */
                        buffer_clear(&c->in);
                        c->in_parsed = 0;
                        if (c->peer_closed)
                                c->dead = true;
                        break;
                }
                if (c->response_queued && c->close_after_response &&
                    http_server_config(c->server)->close_by_reset) {
                        /* No FIN of ours: the drain resets the socket once the peer has
                         * acknowledged the whole response. */
                        c->io = sd_event_source_disable_unref(c->io);
                        http_server_close_socket(c->server, TAKE_FD(c->fd));
                        c->dead = true;
                        break;
                }
                if (c->response_queued && c->close_after_response) {
                        /* Say we are done and let the peer read it: a close() with unread input
                         * would reset the connection, and the peer could lose the answer. */
                        c->lingering = true;
                        c->cutoff_usec = loop_now(c) + LINGER_USEC;
                        if (c->peer_closed || shutdown(c->fd, SHUT_WR) < 0)
                                c->dead = true;
                        continue;
                }
                if (c->response_queued && c->request_done) {
                        /* Answered: on to the next request. */
                        conn_reset_request(c);
                        c->idle_since_usec = loop_now(c);
                        http_parser_pause(c->parser, 0);
                }
                if (c->request_done)
                        break; /* waiting for Engine.IO (a parked poll) */

                conn_parse(c);
                if (!(c->response_queued && c->request_done) && !output_pending(c))
                        break; /* the parser needs more input */
        }

        /* The client is gone for good: nothing it asked for is owed any more, except a
         * response already on its way out (a half-closed client can still read it). */
        if (!c->dead && c->peer_closed && !output_pending(c))
                c->dead = true;
        if (c->dead) {
                http_conn_free(c);
                return;
        }
        conn_update_events(c);
        conn_update_timer(c);
}

static int on_io(sd_event_source *source, int fd, uint32_t revents, void *userdata) {
        HttpConn *c = userdata;

        if (revents & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) {
                while (!c->peer_closed && c->in.len - c->in_parsed < IN_MAX) {
                        ssize_t n;

                        if (buffer_reserve(&c->in, READ_CHUNK) < 0) {
                                c->dead = true;
                                break;
                        }
                        n = recv(fd, buffer_data(&c->in) + c->in.len, READ_CHUNK, MSG_DONTWAIT);
                        if (n < 0) {
                                if (errno == EINTR)
                                        continue;
                                if (errno != EAGAIN)
                                        c->peer_closed = true;
                                break;
                        }
                        if (n == 0) {
                                c->peer_closed = true;
                                break;
                        }
                        c->in.len += (size_t) n;
                        c->progress_usec = loop_now(c);
                        if ((size_t) n < READ_CHUNK)
                                break;
                }
                if (revents & (EPOLLHUP | EPOLLERR))
                        c->peer_closed = true;
        }
        conn_step(c);
        return 0;
}

static int on_defer(sd_event_source *source, void *userdata) {
        conn_step(userdata);
        return 0;
}

static int on_timer(sd_event_source *source, uint64_t usec, void *userdata) {
        HttpConn *c = userdata;
        uint64_t deadline = conn_deadline(c);

        if (deadline == 0 || deadline > usec) {
                conn_update_timer(c);
                return 0;
        }
        if (c->in_message && !c->responding && !c->lingering) {
                /* The request stopped arriving. */
                (void) http_conn_respond_error(c, 408, 3, "Request timeout");
                c->close_after_response = true;
                c->request_done = true;
                c->in_message = false;
                conn_step(c);
                return 0;
        }
        http_conn_free(c);
        return 0;
}

static void conn_kick(HttpConn *c) {
        if (c->defer)
                (void) sd_event_source_set_enabled(c->defer, SD_EVENT_ONESHOT);
}

/* ---- life ------------------------------------------------------------------------------------ */

int http_conn_new(HttpServer *server, int fd, HttpConn **ret) {
        sd_event *event = http_server_event(server);
        HttpConn *c;
        int r;

        static bool bound_set = false;

        /* The parser's own bound on a request head (a process-wide setting). */
        if (!bound_set) {
                http_parser_set_max_header_size(HTTP_MAX_HEAD);
                bound_set = true;
        }

        c = calloc(1, sizeof(*c));
        if (!c)
                return -ENOMEM;
        c->server = server;
        c->fd = fd;
        c->header_kind = -1;
        c->parser = malloc(sizeof(http_parser));
        if (!c->parser) {
                free(c);
                return -ENOMEM;
        }
        http_parser_init(c->parser, HTTP_REQUEST);
        c->parser->data = c;
        c->progress_usec = c->idle_since_usec = loop_now(c);
        http_server_conn_added(server, c);

        r = sd_event_add_io(event, &c->io, fd, EPOLLIN | EPOLLRDHUP, on_io, c);
        if (r >= 0)
                r = sd_event_add_time(event, &c->timer, CLOCK_MONOTONIC, 0, 10 * USEC_PER_MSEC, on_timer, c);
        if (r >= 0)
                r = sd_event_add_defer(event, &c->defer, on_defer, c);
        if (r >= 0)
                r = sd_event_source_set_enabled(c->defer, SD_EVENT_OFF);
        if (r < 0) {
                c->fd = -1; /* the caller still owns it */
                http_conn_free(c);
                return r;
        }
        conn_update_timer(c);
        *ret = c;
        return 0;
}

HttpConn *http_conn_free(HttpConn *c) {
        if (!c)
                return NULL;
        if (c->handler && c->handler->closed) {
                const HttpHandler *h = c->handler;

                c->handler = NULL;
                h->closed(c, c->handler_data);
        }
        if (http_server_eio_ops(c->server))
                http_server_eio_ops(c->server)->http_closed(c);
        /* Out of epoll before the socket is closed: a registration outlives the close while the
         * socket lives on elsewhere (a child forked meanwhile), and sd-event would then get
         * events for a source it freed. */
        c->io = sd_event_source_disable_unref(c->io);
        c->timer = sd_event_source_disable_unref(c->timer);
        c->defer = sd_event_source_disable_unref(c->defer);
        if (c->fd >= 0)
                http_server_close_socket(c->server, TAKE_FD(c->fd));
        buffer_done(&c->in);
        buffer_done(&c->url);
        buffer_done(&c->out_head);
        buffer_done(&c->out_body);
        buffer_done(&c->body);
        buffer_done(&c->rx);
        buffer_done(&c->extra_headers);
        free(c->parser);
        http_server_conn_removed(c->server, c);
        free(c);
        return NULL;
}

void http_conn_reset(HttpConn *c) {
        c->io = sd_event_source_disable_unref(c->io);
        if (c->fd >= 0) {
                (void) socket_reset_on_close(c->fd);
                c->fd = safe_close(c->fd);
        }
        http_conn_free(c);
}

void http_conn_shutdown(HttpConn *c) {
        c->keep_alive = false;
        if (!c->in_message && !c->request_done && !output_pending(c)) {
                c->dead = true;
                conn_kick(c);
                return;
        }
        c->close_after_response = true;
}

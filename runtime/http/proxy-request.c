/* SPDX-License-Identifier: MIT */
/* The port proxy's reading of a request (proxy-request.h). The head is at most HTTP_MAX_HEAD
 * bytes and whole (http-conn.c parsed it already); nothing here trusts that beyond bounds. */
#include <strings.h>

#include "http-head.h"
#include "macro.h"
#include "proxy-request.h"
#include "proxy-token.h"

#define COOKIE_PREFIX PROXY_COOKIE_PREFIX
#define QUERY_TOKEN PROXY_QUERY_TOKEN

/* The value of cookie `name` in a Cookie header value, or NULL. */
static const char *cookie_value(const char *v, size_t n, const char *name, size_t *ret_len) {
        size_t k = strlen(name);

        for (const char *p = v, *e = v + n; p < e;) {
                const char *semi = memchr(p, ';', (size_t) (e - p)) ?: e;
                while (p < semi && *p == ' ')
                        p++;
                if ((size_t) (semi - p) > k && strneq(p, name, k) && p[k] == '=') {
                        *ret_len = (size_t) (semi - p - k - 1);
                        return p + k + 1;
                }
                p = semi + 1;
        }
        return NULL;
}

/* The value of query parameter `name` in a query (after '?'), or NULL (not decoded: a token is
 * hex). */
static const char *query_value(const char *q, size_t n, const char *name, size_t *ret_len) {
        size_t k = strlen(name);

        for (const char *p = q, *e = q + n; p < e;) {
                const char *amp = memchr(p, '&', (size_t) (e - p)) ?: e;
                if ((size_t) (amp - p) > k && strneq(p, name, k) && p[k] == '=') {
                        *ret_len = (size_t) (amp - p - k - 1);
                        return p + k + 1;
                }
                p = amp + 1;
        }
        return NULL;
}

/* The query without parameter `name`, appended to b (with its '?' when anything is left). */
static int append_query_without(Buffer *b, const char *q, size_t n, const char *name) {
        size_t k = strlen(name);
        bool first = true;

        for (const char *p = q, *e = q + n; p < e;) {
                const char *amp = memchr(p, '&', (size_t) (e - p)) ?: e;
                bool drop = (size_t) (amp - p) >= k && strneq(p, name, k) && (p + k == amp || p[k] == '=');
                if (!drop && amp > p) {
                        if (buffer_append(b, first ? "?" : "&", 1) < 0 || buffer_append(b, p, (size_t) (amp - p)) < 0)
                                return -ENOMEM;
                        first = false;
                }
                p = amp + 1;
        }
        return 0;
}

typedef enum Auth {
        AUTH_NONE,
        AUTH_HEADER,    /* Authorization: Bearer */
        AUTH_COOKIE,
        AUTH_QUERY,
} Auth;

static Auth authorize(const HttpHead *h, const char *runtime_token, unsigned port, const char *query, size_t query_len) {
        char cookie[32];
        const char *v;
        size_t n;

        snprintf(cookie, sizeof(cookie), COOKIE_PREFIX "%u", port);
        HTTP_HEAD_FOREACH(h, line, len) {
                const char *value;
                size_t value_len;

                if (http_head_line_is(line, len, "authorization")) {
                        http_head_line_value(line, len, &value, &value_len);
                        if (value_len > 7 && strncasecmp(value, "Bearer ", 7) == 0 &&
                            proxy_token_valid(runtime_token, port, value + 7, value_len - 7))
                                return AUTH_HEADER;
                } else if (http_head_line_is(line, len, "cookie")) {
                        http_head_line_value(line, len, &value, &value_len);
                        v = cookie_value(value, value_len, cookie, &n);
                        if (v && proxy_token_valid(runtime_token, port, v, n))
                                return AUTH_COOKIE;
                }
        }
        v = query ? query_value(query, query_len, QUERY_TOKEN, &n) : NULL;
        if (v && proxy_token_valid(runtime_token, port, v, n))
                return AUTH_QUERY;
        return AUTH_NONE;
}

/* What the upstream gets: the request line with REST as the target (the token parameter
 * gone), the headers without the proxy's own credentials, Connection: close unless it upgrades,
 * X-Forwarded-Prefix; then the bytes that followed the head. */
static int upstream_head(const HttpHead *h, const char *rest, size_t rest_len, const char *query, size_t query_len,
                         unsigned port, Auth auth, const uint8_t *after, size_t after_len, Buffer *out) {
        char cookie[32];
        bool upgrade = false;
        int r;

        snprintf(cookie, sizeof(cookie), COOKIE_PREFIX "%u", port);
        HTTP_HEAD_FOREACH(h, line, len)
                if (http_head_line_is(line, len, "upgrade"))
                        upgrade = true;

        r = buffer_append(out, h->method, h->method_len);
        r = r ?: buffer_append(out, " ", 1);
        r = r ?: buffer_append(out, rest_len > 0 ? rest : "/", rest_len > 0 ? rest_len : 1);
        r = r ?: (query ? append_query_without(out, query, query_len, QUERY_TOKEN) : 0);
        r = r ?: buffer_append(out, " ", 1);
        r = r ?: buffer_append(out, h->version, h->version_len);
        r = r ?: buffer_append(out, "\r\n", 2);
        HTTP_HEAD_FOREACH(h, line, len) {
                if (r < 0)
                        break;
                if ((auth == AUTH_HEADER && http_head_line_is(line, len, "authorization")) ||
                    (!upgrade && (http_head_line_is(line, len, "connection") || http_head_line_is(line, len, "keep-alive"))) ||
                    http_head_line_is(line, len, "proxy-connection") || http_head_line_is(line, len, "x-forwarded-prefix"))
                        continue;
                if (http_head_line_is(line, len, "cookie")) {
                        /* Every cookie but the proxy's own. */
                        const char *value, *e;
                        size_t value_len;
                        bool any = false;

                        http_head_line_value(line, len, &value, &value_len);
                        e = value + value_len;
                        for (const char *p = value; p < e && r >= 0;) {
                                const char *semi = memchr(p, ';', (size_t) (e - p)) ?: e;
                                while (p < semi && *p == ' ')
                                        p++;
                                size_t k = strlen(cookie);
                                bool ours = (size_t) (semi - p) > k && strneq(p, cookie, k) && p[k] == '=';

                                if (p < semi && !ours) {
                                        r = buffer_append(out, any ? "; " : "Cookie: ", any ? 2 : 8);
                                        r = r ?: buffer_append(out, p, (size_t) (semi - p));
                                        any = true;
                                }
                                p = semi + 1;
                        }
                        if (any && r >= 0)
                                r = buffer_append(out, "\r\n", 2);
                        continue;
                }
                r = buffer_append(out, line, len);
                r = r ?: buffer_append(out, "\r\n", 2);
        }
        if (r >= 0 && !upgrade)
                r = buffer_append(out, "Connection: close\r\n", 19);
        r = r ?: buffer_printf(out, "X-Forwarded-Prefix: /proxy/%u\r\n\r\n", port);
        r = r ?: buffer_append(out, after, after_len);
        return r;
}

/* ---- the decision ---------------------------------------------------------------------- */

static int decide(ProxyRequest *r, unsigned status, const char *reason, const char *text) {
        r->forward = false;
        r->status = status;
        r->reason = reason;
        r->text = text;
        return 0;
}

int proxy_request_read(const uint8_t *data, size_t size, const char *runtime_token, ProxyRequest *ret) {
        const char *rest, *query = NULL, *target_end;
        size_t rest_len, query_len = 0;
        unsigned port = 0;
        Auth auth;
        HttpHead h;
        int r;

        *ret = (ProxyRequest) {};
        if (http_head_parse(data, size, &h) < 0 || h.version_len != 8 ||
            !(strneq(h.version, "HTTP/1.1", 8) || strneq(h.version, "HTTP/1.0", 8)))
                return decide(ret, 400, "Bad Request", "The request head is not one the proxy can read.\n");
        /* /proxy/PORT/REST?QUERY (origin form only: the proxy is no forward proxy), visible
         * ASCII only: it goes into a Location header and the upstream's request line. */
        target_end = h.target + h.target_len;
        for (const char *p = h.target; p < target_end; p++)
                if ((unsigned char) *p <= 0x20 || (unsigned char) *p >= 0x7f)
                        return decide(ret, 400, "Bad Request", "The request target is not one the proxy can read.\n");
        if (h.target_len < STRLEN("/proxy/") || !strneq(h.target, "/proxy/", STRLEN("/proxy/")))
                return decide(ret, 404, "Not Found", "The proxy's paths are /proxy/PORT/…, PORT from 1 to 65535.\n");
        rest = h.target + STRLEN("/proxy/");
        while (rest < target_end && *rest >= '0' && *rest <= '9' && port <= 65535)
                port = port * 10 + (unsigned) (*rest++ - '0');
        query = memchr(rest, '?', (size_t) (target_end - rest));
        rest_len = (size_t) ((query ?: target_end) - rest);
        if (query) {
                query++;
                query_len = (size_t) (target_end - query);
        }
        if (port == 0 || port > 65535 || (rest_len > 0 && rest[0] != '/'))
                return decide(ret, 404, "Not Found", "The proxy's paths are /proxy/PORT/…, PORT from 1 to 65535.\n");
        ret->port = port;
        if (strempty(runtime_token))
                return decide(ret, 403, "Forbidden", "This runtime has no token: its port proxy is off.\n");
        auth = authorize(&h, runtime_token, port, query, query_len);
        if (auth == AUTH_NONE) {
                ret->headers = strdup("WWW-Authenticate: Bearer realm=\"agentix\"\r\n");
                if (!ret->headers)
                        return -ENOMEM;
                return decide(ret, 401, "Unauthorized",
                              "This port needs its token. On the command line, `agentixctl port ID PORT` prints\n"
                              "its URL and token (`agentixctl port --link ID PORT`, a link for a browser);\n"
                              "over D-Bus, agentd's GetPortUrl(ID, PORT) gives them.\n");
        }
        if (auth == AUTH_QUERY && ((h.method_len == 3 && strneq(h.method, "GET", 3)) ||
                                   (h.method_len == 4 && strneq(h.method, "HEAD", 4)))) {
                /* Once: the token becomes a cookie for this port's paths, and leaves the address. */
                _cleanup_buffer_ Buffer b = BUFFER_NULL;
                size_t n = 0;
                const char *v = query_value(query, query_len, QUERY_TOKEN, &n);

                r = buffer_printf(&b, "Location: /proxy/%u%.*s", port, (int) rest_len, rest_len ? rest : "/");
                r = r ?: append_query_without(&b, query, query_len, QUERY_TOKEN);
                r = r ?: buffer_printf(&b, "\r\nSet-Cookie: " COOKIE_PREFIX "%u=%.*s; Path=/proxy/%u/; HttpOnly; "
                                           "SameSite=Lax\r\n", port, (int) n, v, port);
                r = r ?: buffer_append(&b, "", 1);
                if (r < 0)
                        return -ENOMEM;
                ret->headers = strdup((const char *) buffer_data(&b));
                if (!ret->headers)
                        return -ENOMEM;
                return decide(ret, 302, "Found", "Redirecting to the same page, now with a cookie.\n");
        }
        ret->forward = true;
        r = upstream_head(&h, rest, rest_len, query, query_len, port, auth, data + h.size, size - h.size,
                          &ret->upstream);
        return r < 0 ? -ENOMEM : 0;
}

int proxy_response_rewrite(Buffer *buf) {
        _cleanup_buffer_ Buffer out = BUFFER_NULL;
        const char *s = (const char *) buffer_data(buf), *end, *line, *eol;
        int r = 0;

        if (buf->len < 4)
                return 0; /* (nothing yet from the upstream) */
        end = memmem(s, buf->len, "\r\n\r\n", 4);
        if (!end)
                return buf->len > 64 * 1024 ? -EBADMSG : 0;
        eol = memmem(s, (size_t) (end + 2 - s), "\r\n", 2);
        if (!strneq(s, "HTTP/1.", MIN((size_t) 7, buf->len)) || eol - s < 12)
                return -EBADMSG;
        if (strneq(s + 9, "101", 3))
                return 1;
        r = buffer_append(&out, s, (size_t) (eol + 2 - s));
        for (line = eol + 2; r >= 0 && line < end + 2; line = eol + 2) {
                size_t n;

                eol = memmem(line, (size_t) (end + 2 - line), "\r\n", 2);
                n = (size_t) (eol - line);
                if (http_head_line_is(line, n, "connection") || http_head_line_is(line, n, "keep-alive"))
                        continue;
                r = buffer_append(&out, line, n + 2);
        }
        r = r ?: buffer_append(&out, "Connection: close\r\n\r\n", 21);
        r = r ?: buffer_append(&out, end + 4, buf->len - (size_t) (end + 4 - s));
        if (r < 0)
                return -ENOMEM;
        buffer_done(buf);
        *buf = out;
        out = BUFFER_NULL;
        return 1;
}

void proxy_request_done(ProxyRequest *r) {
        buffer_done(&r->upstream);
        free(r->headers);
        *r = (ProxyRequest) {};
}

/* SPDX-License-Identifier: MIT */
#include <stdarg.h>
#include <strings.h>

#include <curl/curl.h>

#include "buffer.h"
#include "sio-url.h"

#define DEFAULT_PATH "/socket.io/"

static void curl_url_cleanupp(CURLU **u) {
        if (*u)
                curl_url_cleanup(*u);
}

static void curl_freep(char **p) {
        if (*p)
                curl_free(*p);
}

static char *strdup_printf(const char *fmt, ...) _printf_(1, 2);
static char *strdup_printf(const char *fmt, ...) {
        va_list ap;
        char *s;

        va_start(ap, fmt);
        if (vasprintf(&s, fmt, ap) < 0)
                s = NULL;
        va_end(ap);
        return s;
}

int sio_url_parse(const char *url, SioUrl *ret) {
        _cleanup_(curl_url_cleanupp) CURLU *u = NULL;
        _cleanup_(curl_freep) char *scheme = NULL, *host = NULL, *port = NULL, *path = NULL;
        SioUrl r = {};
        unsigned long p = 80;
        size_t n;

        if (strempty(url))
                return -EINVAL;
        u = curl_url();
        if (!u)
                return -ENOMEM;
        /* ws:// is not a scheme every libcurl knows: accept it as any other. */
        if (curl_url_set(u, CURLUPART_URL, url, CURLU_NON_SUPPORT_SCHEME) != CURLUE_OK)
                return -EINVAL;
        if (curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) != CURLUE_OK ||
            curl_url_get(u, CURLUPART_HOST, &host, 0) != CURLUE_OK)
                return -EINVAL;

        r.tls = strcasecmp(scheme, "https") == 0 || strcasecmp(scheme, "wss") == 0;
        if (r.tls)
                p = 443;
        else if (!(strcasecmp(scheme, "http") == 0) && !(strcasecmp(scheme, "ws") == 0))
                return -EINVAL;

        if (curl_url_get(u, CURLUPART_PORT, &port, 0) == CURLUE_OK) {
                char *end;
                errno = 0;
                p = strtoul(port, &end, 10);
                if (errno != 0 || *end || p == 0 || p > 65535)
                        return -EINVAL;
        }
        if (curl_url_get(u, CURLUPART_PATH, &path, 0) != CURLUE_OK)
                return -EINVAL;

        /* The host as given (IPv6 in brackets) for headers and URLs; bare for connecting. */
        n = strlen(host);
        if (n >= 2 && host[0] == '[' && host[n - 1] == ']')
                r.host = strndup(host + 1, n - 2);
        else
                r.host = strdup(host);
        r.port = (unsigned) p;
        r.host_header = strdup_printf("%s:%lu", host, p);
        if (strempty(path) || streq(path, "/"))
                r.path = strdup(DEFAULT_PATH);
        else
                r.path = strdup_printf("%s%s", path, path[strlen(path) - 1] == '/' ? "" : "/");
        if (r.path && r.path[0] != '/') {
                sio_url_done(&r);
                return -EINVAL;
        }
        if (r.path) {
                r.ws_path = strdup_printf("%s?EIO=4&transport=websocket", r.path);
                if (r.host_header)
                        r.polling_url = strdup_printf("%s://%s%s", r.tls ? "https" : "http", r.host_header, r.path);
        }
        if (!r.host || !r.host_header || !r.path || !r.ws_path || !r.polling_url) {
                sio_url_done(&r);
                return -ENOMEM;
        }
        if (strempty(r.host)) {
                sio_url_done(&r);
                return -EINVAL;
        }

        *ret = r;
        return 0;
}

void sio_url_done(SioUrl *u) {
        if (!u)
                return;
        free(u->host);
        free(u->host_header);
        free(u->path);
        free(u->ws_path);
        free(u->polling_url);
        *u = (SioUrl) {};
}

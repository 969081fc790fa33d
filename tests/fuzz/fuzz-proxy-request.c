/* SPDX-License-Identifier: MIT */
/* The port proxy's reading of a request and of a response head (proxy-request.c), with any bytes: it
 * decides or runs out of memory, never reads out of bounds; what it forwards starts with a
 * request line whose target is the path below /proxy/PORT, carries Connection: close unless
 * it upgrades, and never the proxy's own credentials. */
#include <string.h>

#include "fuzz-util.h"
#include "macro.h"
#include "proxy-request.h"
#include "proxy-token.h"

#define RUNTIME_TOKEN "fuzz-runtime-token-0123456789"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        ProxyRequest r;
        char token[PROXY_TOKEN_LEN + 1];

        if (size > 64 * 1024)
                return 0;

        /* The same bytes as an upstream's response: a head rewritten keeps what followed it. */
        Buffer resp = BUFFER_NULL;
        if (buffer_append(&resp, data, size) == 0 && proxy_response_rewrite(&resp) == 1) {
                const char *out = (const char *) buffer_data(&resp);
                CHECK(resp.len >= 4 && memmem(out, resp.len, "\r\n\r\n", 4));
                CHECK(strncmp(out + 9, "101", 3) == 0 || memmem(out, resp.len, "Connection: close\r\n\r\n", 21));
        }
        buffer_done(&resp);

        if (proxy_request_read(data, size, RUNTIME_TOKEN, &r) < 0)
                return 0;
        if (r.forward) {
                const char *out = (const char *) buffer_data(&r.upstream);
                size_t n = r.upstream.len;

                CHECK(r.port >= 1 && r.port <= 65535);
                CHECK(n > 0 && memchr(out, ' ', n) && memmem(out, n, "\r\n\r\n", 4));
                CHECK(proxy_token(RUNTIME_TOKEN, r.port, token) == 0);
                /* The target the upstream gets has no agentix_token in its query. */
                const char *eol = memmem(out, n, "\r\n", 2), *target = memchr(out, ' ', n), *end;
                CHECK(eol && target && target < eol);
                end = memchr(target + 1, ' ', (size_t) (eol - target - 1));
                CHECK(end && target[1] == '/');
                const char *q = memchr(target, '?', (size_t) (end - target));
                for (const char *p = q ? q + 1 : end; p < end;) {
                        const char *amp = memchr(p, '&', (size_t) (end - p)) ?: end;
                        size_t k = strlen(PROXY_QUERY_TOKEN);
                        CHECK(!((size_t) (amp - p) >= k && strncmp(p, PROXY_QUERY_TOKEN, k) == 0 &&
                                (p + k == amp || p[k] == '=')));
                        p = amp + 1;
                }
        } else {
                CHECK(r.status >= 300 && r.status < 500 && r.reason && r.text);
                CHECK(!r.headers || strstr(r.headers, "\r\n"));
        }
        proxy_request_done(&r);
        return 0;
}

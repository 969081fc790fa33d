/* SPDX-License-Identifier: MIT */
/* agentix-e2b's reading of which sandbox and port a request names (e2b/sandbox-target.c), with
 * any bytes: as a request head (E2b-Sandbox-Id and E2b-Sandbox-Port, or Host: PORT-ID.DOMAIN)
 * and as a Host value alone. It never reads out of bounds (ASan: the value is copied to a buffer
 * of its own size), and what it names is a port of 1 to 65535 and an id of agentd's alphabet
 * that the bytes did say: PORT-ID.DOMAIN is the host's name, before any colon. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "fuzz-util.h"
#include "http-head.h"
#include "sandbox-target.h"

#define DOMAIN "e2b.test"

static void check_named(const char *id, unsigned port) {
        CHECK(port >= 1 && port <= 65535);
        CHECK(sandbox_id_ok(id, strlen(id)));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        char id[SANDBOX_ID_MAX], name[SANDBOX_ID_MAX + 128];
        unsigned port;
        HttpHead h;
        int r;

        if (size > 64 * 1024)
                return 0;

        /* The bytes as a Host value, in a buffer of exactly their size. */
        char *host = malloc(size ?: 1);
        if (!host)
                return 0;
        memcpy(host, data, size);
        if (host_names_sandbox(DOMAIN, host, size, &port, id)) {
                const char *colon = memchr(host, ':', size);
                size_t n = colon ? (size_t) (colon - host) : size;
                int k;

                check_named(id, port);
                k = snprintf(name, sizeof(name), "%u-%s.%s", port, id, DOMAIN);
                CHECK(k > 0 && (size_t) k == n && strncasecmp(name, host, n) == 0);
        }
        free(host);

        /* The bytes as a request head. */
        if (http_head_parse(data, size, &h) < 0)
                return 0;
        r = sandbox_target(DOMAIN, &h, id, &port);
        CHECK(r == 0 || r == -EINVAL || r == -ENOENT);
        if (r == 0)
                check_named(id, port);
        r = sandbox_target(NULL, &h, id, &port);
        if (r == 0) {
                const char *v;
                size_t n;

                check_named(id, port);
                /* Without a domain only E2B's header names a sandbox, and it names that one. */
                CHECK(http_head_find(&h, "E2b-Sandbox-Id", &v, &n) && n == strlen(id) && memcmp(v, id, n) == 0);
        }
        return 0;
}

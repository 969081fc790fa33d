/* SPDX-License-Identifier: MIT */
/* Reading the sandbox a request names (sandbox-target.h). Every length is checked before it is
 * used: these bytes are anyone's. */
#include <errno.h>
#include <string.h>
#include <strings.h>

#include "sandbox-target.h"

bool sandbox_id_ok(const char *s, size_t n) {
        if (n == 0 || n >= SANDBOX_ID_MAX)
                return false;
        for (size_t i = 0; i < n; i++)
                if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9')))
                        return false;
        return true;
}

/* 1 to 65535 written as 1 to 5 digits (no sign, no blanks, no leading zero), else 0. */
static unsigned port_of(const char *s, size_t n) {
        unsigned long port = 0;

        if (n == 0 || n > 5 || s[0] == '0')
                return 0;
        for (size_t i = 0; i < n; i++) {
                if (s[i] < '0' || s[i] > '9')
                        return 0;
                port = port * 10 + (unsigned) (s[i] - '0');
        }
        return port <= 65535 ? (unsigned) port : 0;
}

bool host_names_sandbox(const char *domain, const char *host, size_t n, unsigned *ret_port,
                        char ret_id[static SANDBOX_ID_MAX]) {
        const char *colon = memchr(host, ':', n), *dash, *dot;
        size_t d = strlen(domain);
        unsigned port;

        /* The name first (the port after a colon is the gateway's, not the sandbox's): every
         * search below stays within it. */
        if (colon)
                n = (size_t) (colon - host);
        dash = memchr(host, '-', n);
        if (!dash)
                return false;
        dot = memchr(dash, '.', n - (size_t) (dash - host));
        if (!dot)
                return false;
        if (n - (size_t) (dot + 1 - host) != d || strncasecmp(dot + 1, domain, d) != 0 ||
            !sandbox_id_ok(dash + 1, (size_t) (dot - dash - 1)))
                return false;
        port = port_of(host, (size_t) (dash - host));
        if (port == 0)
                return false;
        memcpy(ret_id, dash + 1, (size_t) (dot - dash - 1));
        ret_id[dot - dash - 1] = 0;
        *ret_port = port;
        return true;
}

int sandbox_target(const char *domain, const HttpHead *h, char ret_id[static SANDBOX_ID_MAX], unsigned *ret_port) {
        const char *v, *p;
        size_t n, pn;
        unsigned port;

        if (http_head_find(h, "E2b-Sandbox-Id", &v, &n)) {
                if (!sandbox_id_ok(v, n) || !http_head_find(h, "E2b-Sandbox-Port", &p, &pn))
                        return -EINVAL;
                port = port_of(p, pn);
                if (port == 0)
                        return -EINVAL;
                memcpy(ret_id, v, n);
                ret_id[n] = 0;
                *ret_port = port;
                return 0;
        }
        if (domain && http_head_find(h, "Host", &v, &n) && host_names_sandbox(domain, v, n, ret_port, ret_id))
                return 0;
        return -ENOENT;
}

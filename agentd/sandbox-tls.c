/* SPDX-License-Identifier: MIT */
#include <time.h>

#include "manager.h"
#include "runtime-tls.h"
#include "sandbox-tls.h"

#define YEAR_SEC (366ULL * 24 * 3600)

static void on_secured(RuntimeTls *t, const char *https_url, const char *error, void *userdata) {
        Sandbox *s = userdata;
        sandbox_tls_done_t done = s->tls_done;
        Manager *m = s->manager;
        _cleanup_free_ char *url = https_url ? strdup(https_url) : NULL, *why = error ? strdup(error) : NULL;

        /* t owns https_url and error: copied before it goes. */
        s->tls_handover = runtime_tls_free(s->tls_handover);
        s->tls_done = NULL;
        if (!https_url || !url) {
                done(s, why ?: (https_url ? "out of memory" : "the runtime did not take its TLS certificate"));
                return;
        }
        if (!streq_ptr(s->runtime_url, url)) {
                free(s->runtime_url);
                s->runtime_url = TAKE_PTR(url);
                if (s->path && manager_get_sandbox(m, s->id) == s)
                        (void) sd_bus_emit_properties_changed(m->bus, s->path, SANDBOX_INTERFACE, "RuntimeUrl", NULL);
        }
        done(s, NULL);
}

int sandbox_tls_secure(Sandbox *s, bool adopted, sandbox_tls_done_t done) {
        Manager *m = s->manager;
        uint64_t not_after, max_ttl = m->config->max_ttl_sec;
        int r;

        if (!s->spec.tls) {
                done(s, NULL);
                return 0;
        }
        if (!m->runtime_ca)
                return -ENOKEY; /* TLS turned off since it was made: its runtime has a certificate */
        if (!m->curl) {
                r = curl_event_new(m->event, &m->curl);
                if (r < 0)
                        return r;
        }
        /* Valid as long as the sandbox may live: its expiry as it stands plus the most an
         * extension may add (a year when that is unbounded). */
        not_after = s->expires_at / 1000000 + (max_ttl == AGENTD_UNLIMITED || max_ttl > YEAR_SEC ? YEAR_SEC : max_ttl);
        s->tls_handover = runtime_tls_free(s->tls_handover);
        r = runtime_tls_start(m->curl, m->runtime_ca, s->runtime_url, s->token, not_after, adopted, on_secured, s,
                              &s->tls_handover);
        if (r < 0)
                return r;
        s->tls_done = done;
        return 0;
}

/* SPDX-License-Identifier: MIT */
#include <time.h>

#include "log.h"
#include "manager.h"
#include "runtime-tls.h"
#include "sandbox-tls.h"

#define RETRY_SOON_USEC (1ULL * 1000000)      /* a handover on its way, or the sandbox being made */
#define RETRY_LATER_USEC (60ULL * 1000000)    /* paused, or the last try failed */

static uint64_t now_sec(void) {
        return (uint64_t) time(NULL);
}

/* When its certificate should end: with the sandbox (plus the grace), or the longest a
 * certificate lives, whichever is first. */
static uint64_t want_not_after(const Sandbox *s) {
        return MIN(s->expires_at / 1000000 + SANDBOX_TLS_GRACE_SEC, now_sec() + SANDBOX_TLS_LIFETIME_MAX_SEC);
}

static void schedule(Sandbox *s, uint64_t at_usec);

/* Due again before it ends when the sandbox outlives its certificate; at once when the
 * certificate outlives the sandbox (the expiry was brought forward, perhaps while the handover
 * of an earlier change was on its way); not otherwise (it goes with its sandbox). */
static void schedule_next(Sandbox *s) {
        uint64_t end = s->tls_not_after, want = s->expires_at / 1000000 + SANDBOX_TLS_GRACE_SEC;

        if (end > want + RUNTIME_TLS_END_SLACK_SEC) {
                schedule(s, now_sec() * 1000000ULL);
                return;
        }
        if (end == 0 || end >= want) {
                if (s->tls_renew)
                        (void) sd_event_source_set_enabled(s->tls_renew, SD_EVENT_OFF);
                return;
        }
        schedule(s, (end > SANDBOX_TLS_RENEW_BEFORE_SEC ? end - SANDBOX_TLS_RENEW_BEFORE_SEC : 0) * 1000000ULL);
}

static void on_secured(RuntimeTls *t, const char *https_url, const char *error, void *userdata) {
        Sandbox *s = userdata;
        sandbox_tls_done_t done = s->tls_done;
        Manager *m = s->manager;
        _cleanup_free_ char *url = https_url ? strdup(https_url) : NULL, *why = error ? strdup(error) : NULL;

        /* t owns https_url and error: copied before it goes. */
        if (https_url)
                s->tls_not_after = runtime_tls_not_after(t);
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
        schedule_next(s);
        done(s, NULL);
}

static int start(Sandbox *s, RuntimeTlsHow mode, sandbox_tls_done_t done) {
        Manager *m = s->manager;
        uint64_t not_after = want_not_after(s);
        int r;

        if (!m->runtime_ca)
                return -ENOKEY; /* TLS turned off since it was made: its runtime has a certificate */
        if (!m->curl) {
                r = curl_event_new(m->event, &m->curl);
                if (r < 0)
                        return r;
        }
        s->tls_handover = runtime_tls_free(s->tls_handover);
        /* At adoption, one that ends as wanted is kept; so is one of a long-lived sandbox while
         * more than SANDBOX_TLS_RENEW_BEFORE_SEC is left. */
        r = runtime_tls_start(m->curl, m->runtime_ca, s->runtime_url, s->id, s->token, not_after,
                              MIN(not_after, now_sec() + SANDBOX_TLS_RENEW_BEFORE_SEC), mode, on_secured, s,
                              &s->tls_handover);
        if (r < 0)
                return r;
        s->tls_done = done;
        return 0;
}

int sandbox_tls_secure(Sandbox *s, bool adopted, sandbox_tls_done_t done) {
        if (!s->spec.tls) {
                done(s, NULL);
                return 0;
        }
        return start(s, adopted ? RUNTIME_TLS_HOW_ADOPT : RUNTIME_TLS_HOW_INSTALL, done);
}

static void on_renewed(Sandbox *s, const char *error) {
        if (!error) {
                log_sandbox_info(s, "Sandbox %s: its runtime has a new TLS certificate, until its expiry.", s->id);
                return;
        }
        log_sandbox_warning(s, "Sandbox %s: cannot give its runtime a new TLS certificate (trying again in %llu s): "
                            "%s", s->id, (unsigned long long) (RETRY_LATER_USEC / 1000000), error);
        schedule(s, (uint64_t) time(NULL) * 1000000ULL + RETRY_LATER_USEC);
}

static int on_due(sd_event_source *es, uint64_t usec, void *userdata) {
        Sandbox *s = userdata;
        uint64_t now = usec;

        if (s->tls_handover || s->state == SANDBOX_CREATING) {
                schedule(s, now + RETRY_SOON_USEC);
                return 0;
        }
        if (s->state != SANDBOX_RUNNING) {
                /* Paused (its runtime cannot answer), or going: later, if still wanted. */
                if (s->state != SANDBOX_REMOVING)
                        schedule(s, now + RETRY_LATER_USEC);
                return 0;
        }
        if (start(s, RUNTIME_TLS_HOW_RENEW, on_renewed) < 0)
                log_sandbox_warning(s, "Sandbox %s: cannot start giving its runtime a new TLS certificate.", s->id);
        return 0;
}

static void schedule(Sandbox *s, uint64_t at_usec) {
        Manager *m = s->manager;

        if (!s->tls_renew) {
                if (sd_event_add_time(m->event, &s->tls_renew, CLOCK_REALTIME, at_usec, 1000000, on_due, s) < 0)
                        log_sandbox_warning(s, "Sandbox %s: cannot arm its TLS certificate's renewal.", s->id);
                return;
        }
        (void) sd_event_source_set_time(s->tls_renew, at_usec);
        (void) sd_event_source_set_enabled(s->tls_renew, SD_EVENT_ONESHOT);
}

void sandbox_tls_renew(Sandbox *s) {
        if (!s->spec.tls || !s->manager || !s->manager->runtime_ca)
                return;
        schedule(s, (uint64_t) time(NULL) * 1000000ULL);
}

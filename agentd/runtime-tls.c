/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <openssl/crypto.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "buffer.h"
#include "log.h"
#include "macro.h"
#include "runtime-tls.h"
#include "tls-handover.h"
#include "tls.h"

#define REQUEST_TIMEOUT_MS 5000L

static void curl_url_cleanupp(CURLU **u) {
        if (*u)
                curl_url_cleanup(*u);
}
#define ANSWER_MAX 1024

typedef enum Step {
        STEP_CHECK,         /* GET https://…/health, verified: has it a good certificate already? */
        STEP_INSTALL_PLAIN, /* POST http://…/tls/install: a runtime waiting for its certificate */
        STEP_INSTALL_TLS,   /* POST https://…/tls/install, unverified: one whose certificate is old */
        STEP_VERIFY,        /* GET https://…/health, verified */
} Step;

struct RuntimeTls {
        CurlEvent *curl;
        CURL *easy;
        RuntimeCA *ca;
        Step step;
        bool step_fallback; /* a renewal's install over TLS may find the runtime waiting in the clear */
        char *host;         /* as the URL has it ([::1] with brackets) */
        char *bare_host;    /* as the certificate names it */
        char *https_url;
        char *sandbox_id;
        char *token;
        uint64_t not_after;     /* of the certificate to issue */
        uint64_t renew_after;   /* adoption: one that ends before this is replaced */
        uint64_t served_not_after; /* of the one the runtime serves, once seen */
        Buffer sealed;      /* the sealed certificate and key */
        Buffer answer;
        char errbuf[CURL_ERROR_SIZE];
        runtime_tls_done_t done;
        void *userdata;
        sd_event_source *later; /* done() from the loop */
};

static size_t on_write(char *data, size_t size, size_t n, void *userdata) {
        RuntimeTls *t = userdata;
        size_t len = size * n;

        if (t->answer.len < ANSWER_MAX)
                (void) buffer_append(&t->answer, data, MIN(len, ANSWER_MAX - t->answer.len));
        return len;
}

char *runtime_url_https(const char *url) {
        const char *rest = strstr(url, "://");
        char *r;

        if (!rest)
                return NULL;
        if (asprintf(&r, "https%s", rest) < 0)
                return NULL;
        return r;
}

static void finish(RuntimeTls *t, bool ok, const char *error) {
        t->done(t, ok ? t->https_url : NULL, error, t->userdata); /* last: it may free t */
}

static void run_step(RuntimeTls *t, Step step);

static const char *answer_text(RuntimeTls *t) {
        /* The runtime's error body, {"code":…,"message":"…"}: the message, roughly. */
        const char *m;

        if (buffer_append_byte(&t->answer, 0) < 0)
                return "";
        m = strstr((const char *) buffer_data(&t->answer), "\"message\":\"");
        if (!m)
                return (const char *) buffer_data(&t->answer);
        m += 11;
        ((char *) buffer_data(&t->answer))[t->answer.len - 1] = 0;
        {
                char *end = strchr(m, '"');
                if (end)
                        *end = 0;
        }
        return m;
}

/* The end of the certificate the runtime served (the leaf: curl's first), or 0. */
static uint64_t peer_not_after(CURL *easy) {
        struct curl_certinfo *ci = NULL;

        if (curl_easy_getinfo(easy, CURLINFO_CERTINFO, &ci) != CURLE_OK || !ci || ci->num_of_certs < 1)
                return 0;
        for (struct curl_slist *l = ci->certinfo[0]; l; l = l->next) {
                struct tm tm = {};
                const char *v;
                time_t end;

                if (!startswith(l->data, "Expire date:"))
                        continue;
                /* OpenSSL's ASN1_TIME_print(): "Nov 28 23:17:16 2027 GMT". */
                v = l->data + strlen("Expire date:");
                v = strptime(v, "%b %d %H:%M:%S %Y GMT", &tm);
                if (!v)
                        return 0;
                end = timegm(&tm);
                return end > 0 ? (uint64_t) end : 0;
        }
        return 0;
}

/* curl checks the URL's address; the sandbox's name is checked by OpenSSL's verification. */
static CURLcode on_ssl_ctx(CURL *easy, void *ssl_ctx, void *userdata) {
        RuntimeTls *t = userdata;

        return tls_context_require_sandbox(ssl_ctx, t->sandbox_id) < 0 ? CURLE_SSL_CERTPROBLEM : CURLE_OK;
}

static void on_done(CurlEvent *g, CURL *easy, CURLcode result, void *userdata) {
        RuntimeTls *t = userdata;
        long status = 0;
        char msg[512];

        if (result == CURLE_OK)
                curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &status);
        switch (t->step) {
        case STEP_CHECK: {
                uint64_t end = status == 200 ? peer_not_after(easy) : 0;

                if (end >= t->renew_after && end <= t->not_after + RUNTIME_TLS_END_SLACK_SEC) {
                        t->served_not_after = end;
                        return finish(t, true, NULL);
                }
                if (status == 200) {
                        /* It verifies, but ends too soon (or later than the sandbox may live: its
                         * TTL was cut while agentd was away). */
                        log_info("The runtime at %s has a certificate ending %s: issuing it a new one.", t->host,
                                 end < t->renew_after ? "soon" : "after its sandbox");
                        return run_step(t, STEP_INSTALL_TLS);
                }
                return run_step(t, STEP_INSTALL_PLAIN);
        }
        case STEP_INSTALL_PLAIN:
                if (status == 204)
                        return run_step(t, STEP_VERIFY);
                if (result != CURLE_OK)
                        return run_step(t, STEP_INSTALL_TLS); /* it speaks TLS already */
                snprintf(msg, sizeof(msg), "the runtime refused its TLS certificate: HTTP %ld %s", status, answer_text(t));
                return finish(t, false, msg);
        case STEP_INSTALL_TLS:
                if (status == 204)
                        return run_step(t, STEP_VERIFY);
                if (result != CURLE_OK && t->step_fallback) {
                        /* A renewal found it waiting for a certificate (it started again). */
                        t->step_fallback = false;
                        return run_step(t, STEP_INSTALL_PLAIN);
                }
                if (result != CURLE_OK)
                        snprintf(msg, sizeof(msg), "cannot hand the runtime its TLS certificate: %s",
                                 t->errbuf[0] ? t->errbuf : curl_easy_strerror(result));
                else
                        snprintf(msg, sizeof(msg), "the runtime refused its TLS certificate: HTTP %ld %s", status,
                                 answer_text(t));
                return finish(t, false, msg);
        case STEP_VERIFY:
                if (status == 200) {
                        t->served_not_after = t->not_after;
                        return finish(t, true, NULL);
                }
                snprintf(msg, sizeof(msg), "the runtime does not answer over TLS with its new certificate: %s",
                         result != CURLE_OK ? (t->errbuf[0] ? t->errbuf : curl_easy_strerror(result)) : "no /health");
                return finish(t, false, msg);
        }
}

static int on_later(sd_event_source *s, void *userdata) {
        RuntimeTls *t = userdata;

        t->later = sd_event_source_disable_unref(t->later);
        finish(t, false, "cannot issue the runtime a certificate");
        return 0;
}

static int seal(RuntimeTls *t) {
        char *pem = NULL;
        size_t size = 0;
        int r;

        r = runtime_ca_issue(t->ca, t->bare_host, t->sandbox_id, t->not_after, &pem, &size);
        if (r < 0)
                return r;
        OPENSSL_cleanse(buffer_data(&t->sealed), t->sealed.len);
        buffer_clear(&t->sealed);
        r = tls_handover_seal(t->token, runtime_ca_next_issue(t->ca), pem, size, &t->sealed);
        OPENSSL_clear_free(pem, size + 1);
        return r;
}

static void run_step(RuntimeTls *t, Step step) {
        _cleanup_free_ char *url = NULL;
        const char *ca = runtime_ca_pem(t->ca);
        struct curl_blob blob = { .data = (void *) ca, .len = strlen(ca), .flags = CURL_BLOB_COPY };
        bool tls = step != STEP_INSTALL_PLAIN, verify = step == STEP_CHECK || step == STEP_VERIFY;
        bool install = step == STEP_INSTALL_PLAIN || step == STEP_INSTALL_TLS;
        int r;

        t->step = step;
        t->errbuf[0] = 0;
        buffer_clear(&t->answer);
        /* A new certificate each try: one the runtime took already (its answer lost) would
         * not be taken again (tls-handover.h). */
        if (install && seal(t) < 0) {
                /* Not from inside curl's callback: from the loop. */
                if (sd_event_add_defer(curl_event_event(t->curl), &t->later, on_later, t) < 0)
                        log_oom();
                return;
        }
        if (asprintf(&url, "%s://%s%s", tls ? "https" : "http", t->host, install ? TLS_HANDOVER_PATH : "/health") < 0) {
                url = NULL;
                goto fail;
        }
        curl_easy_reset(t->easy);
        if (curl_easy_setopt(t->easy, CURLOPT_URL, url) != CURLE_OK ||
            curl_easy_setopt(t->easy, CURLOPT_WRITEFUNCTION, on_write) != CURLE_OK ||
            curl_easy_setopt(t->easy, CURLOPT_WRITEDATA, t) != CURLE_OK ||
            curl_easy_setopt(t->easy, CURLOPT_ERRORBUFFER, t->errbuf) != CURLE_OK ||
            curl_easy_setopt(t->easy, CURLOPT_NOSIGNAL, 1L) != CURLE_OK ||
            curl_easy_setopt(t->easy, CURLOPT_NOPROXY, "*") != CURLE_OK ||
            /* A connection of its own: after an install, the certificate checked is the new one. */
            curl_easy_setopt(t->easy, CURLOPT_FRESH_CONNECT, 1L) != CURLE_OK ||
            curl_easy_setopt(t->easy, CURLOPT_FORBID_REUSE, 1L) != CURLE_OK ||
            curl_easy_setopt(t->easy, CURLOPT_TIMEOUT_MS, REQUEST_TIMEOUT_MS) != CURLE_OK)
                goto fail;
        if (tls) {
                /* The runtime CA alone; not verifying only for an install, whose body is sealed. */
                if (curl_easy_setopt(t->easy, CURLOPT_CAINFO_BLOB, &blob) != CURLE_OK ||
                    curl_easy_setopt(t->easy, CURLOPT_CAPATH, NULL) != CURLE_OK ||
                    curl_easy_setopt(t->easy, CURLOPT_SSL_VERIFYPEER, verify ? 1L : 0L) != CURLE_OK ||
                    curl_easy_setopt(t->easy, CURLOPT_SSL_VERIFYHOST, verify ? 2L : 0L) != CURLE_OK)
                        goto fail;
                if (verify && (curl_easy_setopt(t->easy, CURLOPT_SSL_CTX_FUNCTION, on_ssl_ctx) != CURLE_OK ||
                               curl_easy_setopt(t->easy, CURLOPT_SSL_CTX_DATA, t) != CURLE_OK ||
                               curl_easy_setopt(t->easy, CURLOPT_CERTINFO, 1L) != CURLE_OK))
                        goto fail;
        }
        if (install && (curl_easy_setopt(t->easy, CURLOPT_POST, 1L) != CURLE_OK ||
                        curl_easy_setopt(t->easy, CURLOPT_POSTFIELDS, (char *) buffer_data(&t->sealed)) != CURLE_OK ||
                        curl_easy_setopt(t->easy, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t) t->sealed.len) != CURLE_OK))
                goto fail;
        r = curl_event_add(t->curl, t->easy, on_done, t);
        if (r >= 0)
                return;
fail:
        if (sd_event_add_defer(curl_event_event(t->curl), &t->later, on_later, t) < 0)
                log_oom();
}

uint64_t runtime_tls_not_after(const RuntimeTls *t) {
        return t ? t->served_not_after : 0;
}

int runtime_tls_start(CurlEvent *curl, RuntimeCA *ca, const char *runtime_url, const char *sandbox_id,
                      const char *token, uint64_t not_after, uint64_t renew_after, RuntimeTlsHow mode,
                      runtime_tls_done_t done, void *userdata, RuntimeTls **ret) {
        _cleanup_(curl_url_cleanupp) CURLU *u = NULL;
        char *host = NULL, *port = NULL;
        RuntimeTls *t;
        size_t n;

        char name[TLS_SANDBOX_NAME_MAX];

        if (!runtime_url || strempty(token) || tls_sandbox_name(sandbox_id, name, sizeof(name)) < 0)
                return -EINVAL;
        u = curl_url();
        if (!u || curl_url_set(u, CURLUPART_URL, runtime_url, 0) != CURLUE_OK ||
            curl_url_get(u, CURLUPART_HOST, &host, 0) != CURLUE_OK ||
            curl_url_get(u, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT) != CURLUE_OK) {
                curl_free(host);
                return -EINVAL;
        }
        t = calloc(1, sizeof(*t));
        if (!t) {
                curl_free(host);
                curl_free(port);
                return -ENOMEM;
        }
        *t = (RuntimeTls) { .curl = curl, .ca = ca, .not_after = not_after, .renew_after = renew_after,
                            .step_fallback = mode == RUNTIME_TLS_HOW_RENEW, .done = done, .userdata = userdata };
        n = strlen(host);
        t->bare_host = n >= 2 && host[0] == '[' ? strndup(host + 1, n - 2) : strdup(host);
        if (asprintf(&t->host, "%s:%s", host, port) < 0)
                t->host = NULL;
        curl_free(host);
        curl_free(port);
        if (t->host && asprintf(&t->https_url, "https://%s", t->host) < 0)
                t->https_url = NULL;
        t->token = strdup(token);
        t->sandbox_id = strdup(sandbox_id);
        t->easy = curl_easy_init();
        if (!t->bare_host || !t->host || !t->https_url || !t->token || !t->sandbox_id || !t->easy) {
                runtime_tls_free(t);
                return -ENOMEM;
        }
        *ret = t;
        run_step(t, mode == RUNTIME_TLS_HOW_ADOPT ? STEP_CHECK : mode == RUNTIME_TLS_HOW_RENEW ? STEP_INSTALL_TLS : STEP_INSTALL_PLAIN);
        return 0;
}

RuntimeTls *runtime_tls_free(RuntimeTls *t) {
        if (!t)
                return NULL;
        if (t->easy) {
                curl_event_remove(t->curl, t->easy);
                curl_easy_cleanup(t->easy);
        }
        t->later = sd_event_source_disable_unref(t->later);
        if (t->token) {
                explicit_bzero(t->token, strlen(t->token));
                free(t->token);
        }
        if (t->sealed.mem)
                OPENSSL_cleanse(t->sealed.mem, t->sealed.headroom + t->sealed.cap);
        buffer_done(&t->sealed);
        buffer_done(&t->answer);
        free(t->host);
        free(t->bare_host);
        free(t->https_url);
        free(t->sandbox_id);
        free(t);
        return NULL;
}

/* SPDX-License-Identifier: MIT */
#pragma once

/* Give a runtime its TLS certificate: issue one from agentd's CA (runtime-ca.h) for the host
 * its URL names and its sandbox's id, hand it over sealed with the runtime's token (POST
 * /tls/install, tls-handover.h; over plain HTTP to a runtime that waits for it, over TLS
 * without checking the old certificate to one whose certificate no longer verifies, after the
 * CA changed, or is renewed), and check that the runtime now answers GET /health over TLS with
 * a certificate that verifies (the CA, the address and the sandbox's name).
 *
 * With RUNTIME_TLS_HOW_ADOPT, the runtime is asked over TLS first: one whose certificate verifies
 * and ends between renew_after and not_after (+ a minute) is left as it is. RUNTIME_TLS_HOW_RENEW
 * hands a new one over TLS at once (the sandbox's expiry changed). */

#include <stdbool.h>
#include <stdint.h>

#include <systemd/sd-event.h>

#include "curl-event.h"
#include "runtime-ca.h"

/* A certificate ending up to this much after its sandbox (and its grace) is still its own. */
#define RUNTIME_TLS_END_SLACK_SEC 60

typedef struct RuntimeTls RuntimeTls;

/* https_url: the runtime's URL over TLS (https://HOST:PORT), or NULL with error. */
typedef void (*runtime_tls_done_t)(RuntimeTls *t, const char *https_url, const char *error, void *userdata);

typedef enum RuntimeTlsHow {
        RUNTIME_TLS_HOW_INSTALL, /* a runtime just made, waiting for its certificate */
        RUNTIME_TLS_HOW_ADOPT,   /* found at start: checked first */
        RUNTIME_TLS_HOW_RENEW,   /* serving TLS: a new certificate */
} RuntimeTlsHow;

/* runtime_url: http:// or https://HOST:PORT. not_after: the certificate's end (unix seconds);
 * renew_after: for RUNTIME_TLS_HOW_ADOPT, one that ends before this is replaced. done() runs from
 * the loop, never inside this call. */
int runtime_tls_start(CurlEvent *curl, RuntimeCA *ca, const char *runtime_url, const char *sandbox_id,
                      const char *token, uint64_t not_after, uint64_t renew_after, RuntimeTlsHow mode,
                      runtime_tls_done_t done, void *userdata, RuntimeTls **ret);
/* The end of the certificate the runtime was last seen or made to serve (unix seconds), or 0. */
uint64_t runtime_tls_not_after(const RuntimeTls *t);
RuntimeTls *runtime_tls_free(RuntimeTls *t);

/* url with its scheme made https:// (a runtime URL from a backend is http://). */
char *runtime_url_https(const char *url);

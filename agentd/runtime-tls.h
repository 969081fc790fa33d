/* SPDX-License-Identifier: MIT */
#pragma once

/* Give a runtime its TLS certificate: issue one from agentd's CA (runtime-ca.h) for the host
 * its URL names, hand it over sealed with the runtime's token (POST /tls/install,
 * tls-handover.h; over plain HTTP to a runtime that waits for it, over TLS without checking
 * the old certificate to one whose certificate no longer verifies, after the CA changed), and
 * check that the runtime now answers GET /health over TLS with a certificate that verifies.
 *
 * With check_first (adoption), the runtime is asked over TLS first: one whose certificate
 * verifies already is left as it is. */

#include <stdbool.h>
#include <stdint.h>

#include <systemd/sd-event.h>

#include "curl-event.h"
#include "runtime-ca.h"

typedef struct RuntimeTls RuntimeTls;

/* https_url: the runtime's URL over TLS (https://HOST:PORT), or NULL with error. */
typedef void (*runtime_tls_done_t)(RuntimeTls *t, const char *https_url, const char *error, void *userdata);

/* runtime_url: http:// or https://HOST:PORT. not_after: the certificate's end (unix seconds).
 * done() runs from the loop, never inside this call. */
int runtime_tls_start(CurlEvent *curl, RuntimeCA *ca, const char *runtime_url, const char *token, uint64_t not_after,
                      bool check_first, runtime_tls_done_t done, void *userdata, RuntimeTls **ret);
RuntimeTls *runtime_tls_free(RuntimeTls *t);

/* url with its scheme made https:// (a runtime URL from a backend is http://). */
char *runtime_url_https(const char *url);

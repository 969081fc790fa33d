/* SPDX-License-Identifier: MIT */
#pragma once

/* The runtime's TLS certificate: from files (--tls-cert, --tls-key), or handed over by agentd
 * to POST /tls/install, sealed with the runtime's token (tls-handover.h). A runtime started
 * with $AGENTIX_TLS=1 waits for it: until then it answers nothing but /health and the
 * install (503 for the rest), so no call, token check or file ever goes over plain HTTP;
 * once the certificate is in it serves TLS only, and the plain connections it had end. An
 * install over TLS (agentd re-issuing after its CA changed) replaces the certificate for
 * connections made from then on. */

#include <stdbool.h>

#include "http-server.h"

typedef struct TlsInstall TlsInstall;

/* token(): the runtime's token now (a claim changes it). */
int tls_install_new(HttpServer *http, const char *(*token)(void *userdata), void *userdata, bool awaiting,
                    TlsInstall **ret);
TlsInstall *tls_install_free(TlsInstall *t);

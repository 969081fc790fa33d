/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <openssl/crypto.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "tls-handover.h"
#include "tls-install.h"
#include "tls.h"

struct TlsInstall {
        HttpServer *http;
        const char *(*token)(void *userdata);
        void *userdata;
        bool awaiting; /* no certificate yet: plain HTTP for /health and the install only */
        uint64_t issued; /* the installed certificate's count (tls-handover.h); 0: none from agentd */
};

static const char *admit(HttpConn *c, const char *path, void *userdata) {
        TlsInstall *t = userdata;

        if (!t->awaiting || streq(path, TLS_HANDOVER_PATH))
                return NULL;
        return "this runtime serves TLS only and is waiting for its certificate from agentd";
}

static void on_request(HttpConn *c, void *data) {
        TlsInstall *t = data;
        _cleanup_(SSL_CTX_freep) SSL_CTX *ctx = NULL;
        _cleanup_free_ char *error = NULL;
        const char *token = t->token(t->userdata);
        bool was_awaiting = t->awaiting;
        char *pem = NULL;
        size_t size = 0;
        uint64_t issued = 0;
        int r;

        http_conn_detach_handler(c);
        if (c->body_oversized) {
                (void) http_conn_respond_error(c, 413, 3, "the sealed certificate is larger than it can be");
                return;
        }
        r = tls_handover_open(token, buffer_data(&c->body), c->body.len, t->issued, &issued, &pem, &size);
        if (r == -ESTALE) {
                /* Genuine, but not newer than what we serve: a message recorded on the way and
                 * sent again, which would put back an older certificate (a longer-lived one, or
                 * one of a CA agentd has left). */
                log_warning("Refused a TLS certificate handed over before the one installed (a replayed handover).");
                (void) http_conn_respond_error(c, 409, 3, "this certificate was handed over before the one installed "
                                               "(a replayed handover): keeping the newer one");
                return;
        }
        if (r < 0) {
                /* Not sealed with our token: not from agentd, or for another runtime. */
                log_warning("Refused a TLS certificate not sealed with this runtime's token.");
                (void) http_conn_respond_error(c, 403, 3, "not sealed with this runtime's token");
                return;
        }
        r = tls_server_context_new(pem, size, &ctx, &error);
        OPENSSL_clear_free(pem, size + 1);
        if (r < 0) {
                (void) http_conn_respond_error(c, 400, 3, error ?: "unusable certificate or key");
                return;
        }
        r = http_server_set_tls(t->http, ctx);
        if (r < 0) {
                (void) http_conn_respond_error(c, 500, 3, "cannot use the certificate");
                return;
        }
        t->awaiting = false;
        t->issued = issued;
        c->close_after_response = true;
        (void) http_conn_respond(c, 204, NULL, NULL);
        if (was_awaiting) {
                /* Nothing stays in the clear: health probes and the like connect again. */
                http_server_end_connections(t->http);
                log_info("TLS certificate installed: serving HTTPS and WSS only from now on.");
        } else
                log_info("TLS certificate replaced: new connections get the new one.");
}

static const HttpHandler install_handler = { .request = on_request };

static void route(HttpConn *c, const char *path, void *userdata) {
        TlsInstall *t = userdata;

        if (!streq(path, TLS_HANDOVER_PATH)) {
                (void) http_conn_respond_error(c, 404, 3, "Not found");
                return;
        }
        if (c->method != HTTP_METHOD_POST) {
                (void) http_conn_respond_error(c, 405, 3, "Method not allowed");
                return;
        }
        if (strempty(t->token(t->userdata))) {
                (void) http_conn_respond_error(c, 403, 3, "this runtime has no token to open a certificate with");
                return;
        }
        http_conn_set_handler(c, &install_handler, t, TLS_HANDOVER_MAX);
}

int tls_install_new(HttpServer *http, const char *(*token)(void *userdata), void *userdata, bool awaiting,
                    TlsInstall **ret) {
        TlsInstall *t = calloc(1, sizeof(*t));
        int r;

        if (!t)
                return -ENOMEM;
        *t = (TlsInstall) { .http = http, .token = token, .userdata = userdata, .awaiting = awaiting };
        r = http_server_add_route(http, "/tls/", route, t);
        if (r < 0) {
                free(t);
                return r;
        }
        http_server_set_admit(http, admit, t);
        *ret = t;
        return 0;
}

TlsInstall *tls_install_free(TlsInstall *t) {
        free(t);
        return NULL;
}

/* SPDX-License-Identifier: MIT */
#include <msgpack.h>

#include "agentix.h"
#include "buffer.h"
#include "envelope.h"
#include "pool-config.h"
#include "sandbox-claim.h"
#include "strv.h"

struct SandboxClaim {
        agentix_client *client;
        agentix_request *request;
        Buffer kwargs;          /* packed at the start: the strings need not outlive the call */
        sandbox_claim_done_t done;
        void *userdata;
};

SandboxClaim *sandbox_claim_free(SandboxClaim *c) {
        if (!c)
                return NULL;
        if (c->request) {
                (void) agentix_request_cancel(c->request);
                agentix_request_unref(c->request);
        }
        if (c->client) {
                agentix_client_close(c->client);
                agentix_client_unref(c->client);
        }
        buffer_done(&c->kwargs);
        free(c);
        return NULL;
}

static void on_done(agentix_request *r, const msgpack_object *result, const agentix_error *e, void *userdata) {
        SandboxClaim *c = userdata;
        _cleanup_free_ char *msg = NULL;

        if (!e || e->kind == AGENTIX_E_NONE) {
                c->done(c, NULL, false, c->userdata);
                return;
        }
        if (asprintf(&msg, "The runtime refused the claim: %s", strna(e->message)) < 0)
                msg = NULL;
        c->done(c, msg ?: "The runtime refused the claim", e->message && strstr(e->message, "claimed already"),
                c->userdata);
}

static void on_connected(agentix_client *client, const agentix_error *error, void *userdata) {
        static const agentix_request_handlers handlers = { .done = on_done };
        SandboxClaim *c = userdata;
        _cleanup_free_ char *msg = NULL;

        if (error && error->kind != AGENTIX_E_NONE) {
                /* Refused with the start token: it is no longer the runtime's, a claim took it. */
                if (error->kind == AGENTIX_E_UNAUTHORIZED) {
                        c->done(c, "The runtime no longer takes its start token", true, c->userdata);
                        return;
                }
                if (asprintf(&msg, "Cannot reach the pooled sandbox's runtime: %s", strna(error->message)) < 0)
                        msg = NULL;
                c->done(c, msg ?: "Cannot reach the pooled sandbox's runtime", false, c->userdata);
                return;
        }
        if (agentix_call_async(client, "runtime::claim",
                               &(agentix_args) { .kwargs = buffer_data(&c->kwargs), .kwargs_size = c->kwargs.len }, NULL,
                               &handlers, c, &c->request) < 0)
                c->done(c, "Cannot send the claim to the runtime", false, c->userdata);
}

/* What the member was made with already and the server took at its start (a template's
 * default user): not for the claim, whose env the commands get. */
static bool is_member_variable(const char *e) {
        return startswith(e, POOL_DEFAULT_USER_ENV "=");
}

static int pack_kwargs(Buffer *b, const char *new_token, char *const *env, const char *workdir) {
        size_t n_member = 0;
        msgpack_packer pk;
        int r;

        for (char *const *e = env; e && *e; e++)
                n_member += is_member_variable(*e);

        mp_packer_init_buffer(&pk, b);
        r = msgpack_pack_map(&pk, 2 + !!workdir);
        if (r >= 0)
                r = mp_pack_cstr(&pk, "token");
        if (r >= 0)
                r = mp_pack_cstr(&pk, new_token);
        if (r >= 0)
                r = mp_pack_cstr(&pk, "env");
        if (r >= 0)
                r = msgpack_pack_map(&pk, strv_length(env) - n_member);
        for (char *const *e = env; r >= 0 && e && *e; e++) {
                size_t n = strcspn(*e, "=");

                if (is_member_variable(*e))
                        continue;
                r = msgpack_pack_str_with_body(&pk, *e, n);
                if (r >= 0)
                        r = mp_pack_cstr(&pk, (*e)[n] ? *e + n + 1 : "");
        }
        if (r >= 0 && workdir) {
                r = mp_pack_cstr(&pk, "workdir");
                if (r >= 0)
                        r = mp_pack_cstr(&pk, workdir);
        }
        return r < 0 ? -ENOMEM : 0;
}

int sandbox_claim_run(sd_event *event, const char *url, const char *id, const char *ca_pem, const char *start_token, const char *new_token,
                      char *const *env, const char *workdir, sandbox_claim_done_t done, void *userdata,
                      SandboxClaim **ret) {
        SandboxClaim *c = calloc(1, sizeof(*c));
        int r;

        if (!c)
                return -ENOMEM;
        *c = (SandboxClaim) { .done = done, .userdata = userdata, .kwargs = BUFFER_NULL };
        r = pack_kwargs(&c->kwargs, new_token, env, workdir);
        if (r >= 0)
                r = agentix_client_new(&(agentix_options) { .url = url, .token = start_token, .ca_pem = ca_pem,
                                                            .no_reconnect = true },
                                       event, &c->client);
        if (r >= 0)
                r = agentix_client_set_sandbox_id(c->client, id);
        if (r >= 0)
                r = agentix_client_connect_async(c->client, on_connected, c);
        if (r < 0) {
                sandbox_claim_free(c);
                return r;
        }
        *ret = c;
        return 0;
}

/* SPDX-License-Identifier: MIT */
#include "macro.h"
#include "sandbox-json.h"
#include "strv.h"

json_t *sandbox_labels_json(const AgentdSandboxSpec *s, const char *bundle_id) {
        json_t *l = json_object();
        char buf[64];

        for (const char *const *kv = s->labels; l && kv && *kv; kv++) {
                _cleanup_free_ char *k = strndup(*kv, strcspn(*kv, "="));
                if (!k || json_object_set_new(l, k, json_string(strchr(*kv, '=') + 1)) < 0)
                        return json_decref(l), NULL;
        }
        json_object_set_new(l, "org.agentix.managed", json_string("1"));
        json_object_set_new(l, "org.agentix.sandbox", json_string(s->id));
        snprintf(buf, sizeof(buf), "%u", (unsigned) s->owner);
        json_object_set_new(l, "org.agentix.owner", json_string(buf));
        snprintf(buf, sizeof(buf), "%llu", (unsigned long long) s->created_at);
        json_object_set_new(l, "org.agentix.created", json_string(buf));
        snprintf(buf, sizeof(buf), "%llu", (unsigned long long) s->expires_at);
        json_object_set_new(l, "org.agentix.expires", json_string(buf));
        json_object_set_new(l, "org.agentix.bundle", json_string(s->bundle));
        json_object_set_new(l, "org.agentix.bundle.id", json_string(bundle_id));
        json_object_set_new(l, "org.agentix.image", json_string(s->image));
        /* Every key adoption reads is set, empty when it does not apply: an image committed from
         * a sandbox (a snapshot) carries such keys, and Docker gives a container its image's
         * labels for the keys the create does not name. */
        json_object_set_new(l, "org.agentix.bound-to", json_string(s->bound_to ?: ""));
        json_object_set_new(l, "org.agentix.pool", json_string(s->pool ?: ""));
        json_object_set_new(l, "org.agentix.egress", json_string("*")); /* no egress list, unless below */
        /* Whether its runtime waits for (and then has) a TLS certificate: adoption asks. */
        json_object_set_new(l, "org.agentix.tls", json_string(s->tls ? "1" : ""));
        if (s->pool) {
                /* What a pool compares at adoption: the network and runtime as agentd named them. */
                json_object_set_new(l, "org.agentix.pool", json_string(s->pool));
                json_object_set_new(l, "org.agentix.network", json_string(s->network ?: ""));
                json_object_set_new(l, "org.agentix.runtime", json_string(s->runtime ?: ""));
                json_object_set_new(l, "org.agentix.platform", json_string(s->platform ?: ""));
        }
        if (s->egress) {
                _cleanup_free_ char *list = strv_join((char **) s->egress, " ");
                if (!list)
                        return json_decref(l), NULL;
                /* What docker-adopt.c applies again: the CIDRs, separated by spaces. */
                json_object_set_new(l, "org.agentix.egress", json_string(list));
        }
        return l;
}

json_t *sandbox_env_json(const AgentdSandboxSpec *s) {
        json_t *env = json_array();
        char token[128];

        snprintf(token, sizeof(token), "AGENTIX_TOKEN=%s", s->token);
        if (!env || json_array_append_new(env, json_string(token)) < 0 ||
            (s->pool && json_array_append_new(env, json_string("AGENTIX_CLAIMABLE=1")) < 0) ||
            (s->tls && json_array_append_new(env, json_string("AGENTIX_TLS=1")) < 0) ||
            /* Always set, either way: a task image (a snapshot of a checkpointable sandbox, say)
             * may carry it, and agentix-runsc(8) gives gVisor's own network stack, which egress
             * rules do not see, to a container with AGENTIX_CHECKPOINT=1. */
            json_array_append_new(env, json_string(s->checkpointable ? "AGENTIX_CHECKPOINT=1" : "AGENTIX_CHECKPOINT=0")) < 0)
                return json_decref(env), NULL;
        for (const char *const *e = s->env; e && *e; e++)
                /* The token, claimability, TLS and checkpoints are agentd's to set, never the caller's. */
                if (!strneq(*e, "AGENTIX_TOKEN=", 14) && !strneq(*e, "AGENTIX_CLAIMABLE=", 18) &&
                    !strneq(*e, "AGENTIX_TLS=", 12) && !strneq(*e, "AGENTIX_CHECKPOINT=", 19) &&
                    json_array_append_new(env, json_string(*e)) < 0)
                        return json_decref(env), NULL;
        return env;
}

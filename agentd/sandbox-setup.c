/* SPDX-License-Identifier: MIT */
#include <msgpack.h>

#include "agentix.h"
#include "buffer.h"
#include "envelope.h"
#include "log.h"
#include "sandbox-setup.h"

struct SandboxSetup {
        agentix_client *client;
        agentix_request *request;
        char *command;
        sandbox_setup_done_t done;
        void *userdata;
};

SandboxSetup *sandbox_setup_free(SandboxSetup *s) {
        if (!s)
                return NULL;
        if (s->request) {
                (void) agentix_request_cancel(s->request);
                agentix_request_unref(s->request);
        }
        if (s->client) {
                agentix_client_close(s->client);
                agentix_client_unref(s->client);
        }
        free(s->command);
        free(s);
        return NULL;
}

static void finish(SandboxSetup *s, const char *error) {
        s->done(s, error, s->userdata);
}

static const msgpack_object *map_get(const msgpack_object *map, const char *key) {
        if (!map || map->type != MSGPACK_OBJECT_MAP)
                return NULL;
        for (uint32_t i = 0; i < map->via.map.size; i++) {
                const msgpack_object_kv *kv = &map->via.map.ptr[i];
                if (kv->key.type == MSGPACK_OBJECT_STR && kv->key.via.str.size == strlen(key) &&
                    memcmp(kv->key.via.str.ptr, key, strlen(key)) == 0)
                        return &kv->val;
        }
        return NULL;
}

static void on_done(agentix_request *r, const msgpack_object *result, const agentix_error *e, void *userdata) {
        SandboxSetup *s = userdata;
        const msgpack_object *code = map_get(result, "exit_code"), *out = map_get(result, "output");
        _cleanup_free_ char *msg = NULL;

        if (e && e->kind != AGENTIX_E_NONE) {
                if (asprintf(&msg, "The setup command could not run: %s", strna(e->message)) < 0)
                        msg = NULL;
                finish(s, msg ?: "The setup command could not run");
                return;
        }
        if (code && code->type == MSGPACK_OBJECT_POSITIVE_INTEGER && code->via.u64 == 0) {
                finish(s, NULL);
                return;
        }
        {
                /* The last line it wrote says most about why. */
                const char *p = out && out->type == MSGPACK_OBJECT_STR ? out->via.str.ptr : "";
                size_t n = out && out->type == MSGPACK_OBJECT_STR ? out->via.str.size : 0;
                while (n > 0 && (p[n - 1] == '\n' || p[n - 1] == '\r'))
                        n--;
                size_t start = n;
                while (start > 0 && p[start - 1] != '\n')
                        start--;
                if (asprintf(&msg, "The setup command exited with status %lld%s%.*s",
                             code && code->type == MSGPACK_OBJECT_POSITIVE_INTEGER ? (long long) code->via.u64
                             : code && code->type == MSGPACK_OBJECT_NEGATIVE_INTEGER ? (long long) code->via.i64 : -1LL,
                             n > start ? ": " : "", (int) MIN(n - start, (size_t) 300), p + start) < 0)
                        msg = NULL;
        }
        finish(s, msg ?: "The setup command failed");
}

static void on_connected(agentix_client *c, const agentix_error *error, void *userdata) {
        static const agentix_request_handlers handlers = { .done = on_done };
        SandboxSetup *s = userdata;
        _cleanup_buffer_ Buffer kwargs = BUFFER_NULL;
        msgpack_packer pk;
        _cleanup_free_ char *msg = NULL;
        int r;

        if (error && error->kind != AGENTIX_E_NONE) {
                if (asprintf(&msg, "Cannot reach the sandbox's runtime to run the setup command: %s",
                             strna(error->message)) < 0)
                        msg = NULL;
                finish(s, msg ?: "Cannot reach the sandbox's runtime");
                return;
        }
        mp_packer_init_buffer(&pk, &kwargs);
        r = msgpack_pack_map(&pk, 2);
        if (r >= 0)
                r = mp_pack_cstr(&pk, "command");
        if (r >= 0)
                r = mp_pack_cstr(&pk, s->command);
        if (r >= 0)
                r = mp_pack_cstr(&pk, "timeout");
        if (r >= 0)
                r = msgpack_pack_uint32(&pk, SANDBOX_SETUP_TIMEOUT_SEC);
        if (r < 0) {
                finish(s, "Out of memory");
                return;
        }
        r = agentix_call_async(c, "sandbox::exec",
                               &(agentix_args) { .kwargs = buffer_data(&kwargs), .kwargs_size = kwargs.len }, NULL,
                               &handlers, s, &s->request);
        if (r < 0)
                finish(s, "Cannot start the setup command");
}

int sandbox_setup_run(sd_event *event, const char *url, const char *id, const char *ca_pem, const char *token, const char *command,
                      sandbox_setup_done_t done, void *userdata, SandboxSetup **ret) {
        SandboxSetup *s = calloc(1, sizeof(*s));
        int r;

        if (!s)
                return -ENOMEM;
        *s = (SandboxSetup) { .done = done, .userdata = userdata, .command = strdup(command) };
        if (!s->command) {
                sandbox_setup_free(s);
                return -ENOMEM;
        }
        r = agentix_client_new(&(agentix_options) { .url = url, .token = token, .ca_pem = ca_pem, .no_reconnect = true },
                               event,
                               &s->client);
        if (r >= 0)
                r = agentix_client_set_sandbox_id(s->client, id);
        if (r >= 0)
                r = agentix_client_connect_async(s->client, on_connected, s);
        if (r < 0) {
                sandbox_setup_free(s);
                return r;
        }
        *ret = s;
        return 0;
}

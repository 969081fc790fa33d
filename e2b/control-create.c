/* SPDX-License-Identifier: MIT */
/* The create (control-create.h). */
#include <errno.h>
#include <string.h>

#include "control-body.h"
#include "control-create.h"
#include "log.h"

#define CREATE_TIMEOUT_USEC (150ULL * 1000 * 1000) /* a cold create pulls nothing, but may wait */

static void on_orphan_deleted(Op *op, sd_bus_message *reply) {
        log_info("E2B API: sandbox %s deleted: its creator left before it was made.", op->id);
        op_free(op);
}

static void delete_orphan(Op *op) {
        /* Nobody will ever know its id: it goes now rather than at its timeout. */
        op_call(op, MANAGER_PATH, MANAGER_IFACE, "DeleteSandbox", on_orphan_deleted, "s", op->id);
}

static void created(Op *op, sd_bus_message *reply) {
        const char *path, *id;

        if (sd_bus_message_read(reply, "os", &path, &id) < 0 || !(op->id = strdup(id))) {
                op_fail(op, 500, "agentd's answer to CreateSandbox could not be read");
                return;
        }
        if (!op->c) {
                delete_orphan(op);
                return;
        }
        op_answer_access(op, NULL);
}

bool control_create_client_left(Op *op) {
        /* Under way: created() deletes what it made. */
        if (op->slot && op->step == created)
                return true;
        /* Made, not yet answered. */
        if (op->id) {
                op->slot = sd_bus_slot_unref(op->slot);
                delete_orphan(op);
                return true;
        }
        return false;
}

/* A JSON object of strings (metadata, envVars) as a{ss}, with the pairs of `extra` (key, value,
 * …, NULL) added. */
static int append_string_map(sd_bus_message *m, json_t *o, const char *const *extra) {
        const char *k;
        json_t *v;
        int r;

        r = sd_bus_message_open_container(m, 'a', "{ss}");
        json_object_foreach(o, k, v)
                if (r >= 0)
                        r = sd_bus_message_append(m, "{ss}", k, json_string_value(v));
        for (; r >= 0 && extra && extra[0]; extra += 2)
                r = sd_bus_message_append(m, "{ss}", extra[0], extra[1]);
        return r < 0 ? r : sd_bus_message_close_container(m);
}

/* One {sv} entry of the config whose value is the a{ss} of o and extra. */
static int append_map_entry(sd_bus_message *m, const char *key, json_t *o, const char *const *extra) {
        int r;

        r = sd_bus_message_open_container(m, 'e', "sv");
        if (r >= 0)
                r = sd_bus_message_append(m, "s", key);
        if (r >= 0)
                r = sd_bus_message_open_container(m, 'v', "a{ss}");
        if (r >= 0)
                r = append_string_map(m, o, extra);
        if (r >= 0)
                r = sd_bus_message_close_container(m);
        return r < 0 ? r : sd_bus_message_close_container(m);
}

/* CreateSandbox's config: the pool, the TTL, the labels (metadata and the gateway's own), the
 * environment. */
static int create_call(Op *op, const ControlCreate *c, sd_bus_message **ret) {
        const char *labels[] = { E2B_TEMPLATE_LABEL, c->template_id, E2B_PUBLIC_LABEL,
                                 c->public_traffic ? "yes" : "no", NULL };
        sd_bus_message *m = NULL;
        int r;

        r = sd_bus_message_new_method_call(op->bus, &m, AGENTD_NAME, MANAGER_PATH, MANAGER_IFACE, "CreateSandbox");
        if (r >= 0)
                r = sd_bus_message_open_container(m, 'a', "{sv}");
        if (r >= 0)
                r = sd_bus_message_append(m, "{sv}", "pool", "s", c->template_id);
        if (r >= 0)
                r = sd_bus_message_append(m, "{sv}", "ttl", "t", op->timeout_sec ?: (uint64_t) E2B_DEFAULT_TIMEOUT_SEC);
        if (r >= 0)
                r = append_map_entry(m, "labels", c->metadata, labels);
        if (r >= 0 && json_object_size(c->env) > 0)
                r = append_map_entry(m, "env", c->env, NULL);
        if (r >= 0)
                r = sd_bus_message_close_container(m);
        if (r < 0) {
                sd_bus_message_unref(m);
                return r;
        }
        *ret = m;
        return 0;
}

void control_create_start(Op *op) {
        _cleanup_free_ char *problem = NULL;
        sd_bus_message *m = NULL;
        ControlCreate c;
        int r;

        r = control_body_create(op->body, &c, &problem);
        if (r < 0) {
                op_fail(op, problem ? 400 : 500, "%s", problem ?: "out of memory");
                return;
        }
        r = create_call(op, &c, &m);
        if (r < 0) {
                op_fail(op, 500, "cannot make the call to agentd: %s", strerror(-r));
                return;
        }
        op_send(op, m, CREATE_TIMEOUT_USEC, created);
}

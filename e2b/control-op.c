/* SPDX-License-Identifier: MIT */
/* Ops of the control API (control-op.h): their list, answers, agentd's calls and errors. A
 * client that leaves mid-way ends its Op (the call under way is dropped), except a create
 * (control-create.c). */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "control-op.h"
#include "e2b-token.h"
#include "log.h"

Op *op_new(OpList *list, HttpConn *c, OpKind kind, const char *id) {
        Op *op = calloc(1, sizeof(Op));

        if (!op)
                return NULL;
        *op = (Op) { .list = list, .c = c, .kind = kind, .next = list->first };
        if (id && !(op->id = strdup(id))) {
                free(op);
                return NULL;
        }
        if (list->first)
                list->first->prev = op;
        list->first = op;
        return op;
}

Op *op_free(Op *op) {
        if (!op)
                return NULL;
        if (op->c)
                http_conn_detach_handler(op->c);
        if (op->prev)
                op->prev->next = op->next;
        else if (op->list->first == op)
                op->list->first = op->next;
        if (op->next)
                op->next->prev = op->prev;
        sd_bus_slot_unref(op->slot);
        sd_bus_unref(op->bus);
        free(op->id);
        free(op->path);
        json_decref(op->body);
        sandbox_info_done(&op->info);
        if (op->state_free)
                op->state_free(op->state);
        free(op);
        return NULL;
}

void respond_error(HttpConn *c, unsigned status, const char *message) {
        (void) http_conn_respond_json(c, status, json_pack("{s:i, s:s}", "code", (int) status, "message", message));
}

void op_answer(Op *op, unsigned status, json_t *body) {
        if (op->c) {
                if (body)
                        (void) http_conn_respond_json(op->c, status, body);
                else
                        (void) http_conn_respond(op->c, status, NULL, NULL);
        } else
                json_decref(body);
        op_free(op);
}

void op_fail(Op *op, unsigned status, const char *fmt, ...) {
        _cleanup_free_ char *message = NULL;
        va_list ap;

        va_start(ap, fmt);
        if (vasprintf(&message, fmt, ap) < 0)
                message = NULL;
        va_end(ap);
        log_full_errno(status >= 500 ? LOG_WARNING : LOG_NOTICE, 0, "E2B API: %u %s", status,
                       message ?: "out of memory");
        if (op->c)
                respond_error(op->c, status, message ?: "out of memory");
        op_free(op);
}

/* agentd's errors as E2B's: a sandbox of another user is as absent as one that never was. */
static void op_fail_bus(Op *op, const sd_bus_error *e) {
        const char *message = e->message ?: e->name;

        if (sd_bus_error_has_names(e, AGENTD_ERROR("NoSuchSandbox"), AGENTD_ERROR("NotOwner")))
                op_fail(op, 404, "sandbox %s not found", op->id ?: "");
        else if (sd_bus_error_has_name(e, AGENTD_ERROR("InvalidConfig")) && op->kind == OP_CREATE &&
                 strstr(message, "config key 'pool'"))
                op_fail(op, 404, "template '%s' not found (a template is a pool: pools.d/NAME.pool beside agentd.conf)",
                        json_string_value(json_object_get(op->body, "templateID")) ?: "");
        else if (sd_bus_error_has_name(e, AGENTD_ERROR("InvalidConfig")))
                op_fail(op, 400, "%s", message);
        else if (sd_bus_error_has_names(e, AGENTD_ERROR("TooManySandboxes"), AGENTD_ERROR("QuotaExceeded")))
                op_fail(op, 429, "%s", message);
        else if (sd_bus_error_has_names(e, SD_BUS_ERROR_SERVICE_UNKNOWN, SD_BUS_ERROR_NAME_HAS_NO_OWNER,
                                        AGENTD_ERROR("BackendUnavailable")))
                op_fail(op, 503, "agentd cannot serve this now: %s", message);
        else if (sd_bus_error_has_names(e, SD_BUS_ERROR_ACCESS_DENIED))
                op_fail(op, 403, "the bus does not let this key's user call agentd (the agentix group): %s", message);
        else
                op_fail(op, 500, "%s", message);
}

static int on_reply(sd_bus_message *reply, void *userdata, sd_bus_error *ret_error) {
        Op *op = userdata;
        const sd_bus_error *e = sd_bus_message_get_error(reply);

        op->slot = sd_bus_slot_unref(op->slot);
        /* A listed sandbox may go before it is read: it is simply not listed. */
        if (e && op->kind == OP_LIST && sd_bus_error_has_name(e, AGENTD_ERROR("NoSuchSandbox"))) {
                op->step(op, NULL);
                return 0;
        }
        /* E2B's pause of a gVisor sandbox that cannot hibernate (an egress list, a TLS runtime),
         * or not now (a connection in the way, a TIME_WAIT): frozen in memory instead (Pause()
         * says neither: no loop). */
        if (e && op->kind == OP_PAUSE && (sd_bus_error_has_name(e, AGENTD_ERROR("NotSupported")) ||
                                          sd_bus_error_has_name(e, AGENTD_ERROR("CheckpointFailed")))) {
                op_call(op, op->path, SANDBOX_IFACE, "Pause", op->step, NULL);
                return 0;
        }
        if (e) {
                op_fail_bus(op, e);
                return 0;
        }
        op->step(op, reply);
        return 0;
}

void op_send(Op *op, sd_bus_message *m, uint64_t timeout_usec, OpStep step) {
        int r;

        op->step = step;
        r = sd_bus_call_async(op->bus, &op->slot, m, on_reply, op, timeout_usec);
        sd_bus_message_unref(m);
        if (r < 0)
                op_fail(op, 503, "cannot call agentd: %s", strerror(-r));
}

void op_call(Op *op, const char *path, const char *iface, const char *member, OpStep step, const char *types, ...) {
        sd_bus_message *m = NULL;
        va_list ap;
        int r;

        r = sd_bus_message_new_method_call(op->bus, &m, AGENTD_NAME, path, iface, member);
        if (r >= 0 && types) {
                va_start(ap, types);
                r = sd_bus_message_appendv(m, types, ap);
                va_end(ap);
        }
        if (r < 0) {
                sd_bus_message_unref(m);
                op_fail(op, 500, "cannot make the call to agentd: %s", strerror(-r));
                return;
        }
        op_send(op, m, CALL_TIMEOUT_USEC, step);
}

/* ---- reading a sandbox --------------------------------------------------------------------- */

static void got_properties(Op *op, sd_bus_message *reply) {
        int r = sandbox_info_read(reply, op->id, &op->info);

        if (r < 0) {
                op_fail(op, 500, "agentd's properties of sandbox %s could not be read: %s", op->id, strerror(-r));
                return;
        }
        op->then(op, NULL);
}

static void got_path(Op *op, sd_bus_message *reply) {
        const char *path;

        if (sd_bus_message_read(reply, "o", &path) < 0 || !(op->path = strdup(path))) {
                op_fail(op, 500, "agentd's answer to GetSandbox was not an object path");
                return;
        }
        op_call(op, op->path, "org.freedesktop.DBus.Properties", "GetAll", got_properties, "s", SANDBOX_IFACE);
}

void op_read_sandbox(Op *op, OpStep then) {
        op->then = then;
        op_call(op, MANAGER_PATH, MANAGER_IFACE, "GetSandbox", got_path, "s", op->id);
}

/* ---- what E2B gets back when it may talk to the sandbox ------------------------------------ */

/* trafficAccessToken: E2B answers it only for a sandbox whose ports are not public, but here the
 * code interpreter's port always wants a token, and the SDK's context calls carry that one only:
 * it is answered for every sandbox. */
static void got_access(Op *op, sd_bus_message *reply) {
        const char *url, *token, *template_id;
        char access[65], traffic[65];

        if (sd_bus_message_read(reply, "ss", &url, &token) < 0 || e2b_access_token(token, access) < 0 ||
            e2b_traffic_token(token, traffic) < 0) {
                op_fail(op, 500, "agentd's runtime access for sandbox %s could not be read", op->id);
                return;
        }
        template_id = op->info.template_id ?: json_string_value(json_object_get(op->body, "templateID")) ?: "";
        op_answer(op, op->kind == OP_CONNECT && !op->resumed ? 200 : 201,
                  json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:n}", "sandboxID", op->id, "templateID",
                            template_id, "alias", template_id, "clientID", "agentix", "envdVersion", E2B_ENVD_VERSION,
                            "envdAccessToken", access, "trafficAccessToken", traffic, "domain"));
}

void op_answer_access(Op *op, sd_bus_message *reply) {
        op_call(op, MANAGER_PATH, MANAGER_IFACE, "GetRuntimeAccess", got_access, "s", op->id);
}

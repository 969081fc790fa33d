/* SPDX-License-Identifier: MIT */
#pragma once

/* One request of E2B's control API as an Op: a short chain of agentd calls over the key's
 * user's bus connection, each step run with the reply of the one before, and one answer at the
 * end. control-api.c routes requests to Ops; control-create.c and control-list.c are the two
 * long chains; this file is what they share: calling agentd, reading a sandbox, answering. */

#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>
#include <systemd/sd-bus.h>

#include "agentd-names.h"
#include "http-server.h"
#include "macro.h"
#include "sandbox-info.h"

#define CALL_TIMEOUT_USEC (60ULL * 1000 * 1000)

typedef enum OpKind {
        OP_CREATE,
        OP_GET,
        OP_LIST,
        OP_KILL,
        OP_TIMEOUT,
        OP_CONNECT,
        OP_PAUSE,
        OP_RESUME,
        OP_METRICS,
} OpKind;

typedef struct Op Op;
typedef void (*OpStep)(Op *op, sd_bus_message *reply);

/* The Ops under way (freed with the API). */
typedef struct OpList {
        Op *first;
} OpList;

struct Op {
        OpList *list;
        Op *prev, *next;
        HttpConn *c;            /* NULL once the client left */
        OpKind kind;
        sd_bus *bus;            /* the key's user's connection */
        sd_bus_slot *slot;      /* the call under way */
        OpStep step;            /* runs with its reply */
        OpStep then;            /* op_read_sandbox(): runs once op->info is read */
        char *id;
        char *path;
        json_t *body;
        uint64_t timeout_sec;   /* the request's "timeout" (0: none given) */
        bool resumed;
        SandboxInfo info;
        /* What one kind of Op keeps besides (a list's query and pages: control-list.c), freed
         * with it by state_free. */
        void *state;
        void (*state_free)(void *state);
};

/* A new Op on list for connection c; id may be NULL. */
Op *op_new(OpList *list, HttpConn *c, OpKind kind, const char *id);
Op *op_free(Op *op);

/* E2B's error shape on c, outside any Op. */
void respond_error(HttpConn *c, unsigned status, const char *message);

/* Answer (body taken; NULL: no body) and end the Op. */
void op_answer(Op *op, unsigned status, json_t *body);
/* Answer with E2B's error shape (logged) and end the Op. */
void op_fail(Op *op, unsigned status, const char *fmt, ...) _printf_(3, 4);

/* Call agentd; step runs with the reply (an error reply ends the Op, as E2B's error). m is
 * taken. */
void op_send(Op *op, sd_bus_message *m, uint64_t timeout_usec, OpStep step);
void op_call(Op *op, const char *path, const char *iface, const char *member, OpStep step, const char *types, ...);

/* GetSandbox(id) (agentd answers only for the caller's own: 404 otherwise), its properties in
 * op->info, then `then` (called with no reply). */
void op_read_sandbox(Op *op, OpStep then);

/* What E2B gets back when it may talk to the sandbox (create, connect, resume): its id, template
 * and access tokens. A step: the reply is not read. */
void op_answer_access(Op *op, sd_bus_message *reply);

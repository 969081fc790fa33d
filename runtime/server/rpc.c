/* SPDX-License-Identifier: MIT */
#include <assert.h>
#include <inttypes.h>
#include <sys/random.h>
#include <msgpack.h>

#include "envelope.h"
#include "forget-set.h"
#include "frame.h"
#include "log.h"
#include "mp-check.h"
#include "rpc-claim.h"
#include "rpc.h"
#include "sio-packet.h"
#include "strmap.h"

#define EV_CALL "call"
#define EV_CALL_IN "call:in"
#define EV_CALL_END_IN "call:end_in"
#define EV_CANCEL "cancel"
#define EV_RESUME "resume"
#define EV_ACK "ack"
#define EV_RESULT "call:result"
#define EV_ITEM "call:item"
#define EV_END "call:end"
#define EV_ERROR "call:error"
#define EV_IN_ACK "call:in_ack"

/* Respawn delays after the worker dies: immediate, then backing off if it keeps dying early. */
#define RESPAWN_MAX_DELAY_USEC (5ULL * 1000000ULL)


typedef struct Pending {
        struct Pending *next;
        Blob *data; /* {call_id, value} of one item */
} Pending;

/* Per-socket state: the calls whose events go to this socket. */
typedef struct RpcSocket {
        SioSocket *socket;
        RpcCall *calls;
        RpcCall *due; /* calls with output to credit to the worker (out_due > 0) */
        struct RpcSocket *prev, *next; /* every connected socket (a claim ends the others) */
} RpcSocket;

struct RpcCall {
        Rpc *rpc;
        char id[RPC_CALL_ID_MAX + 1];
        size_t id_len;
        bool bidi;
        bool done;      /* the terminal event is decided */
        bool in_worker; /* the worker still owes its terminal frame */
        bool cached;    /* on the results list, replayable */

        /* Flow control of a bidi inbox, for clients that asked with in_ack: true. Both counts
         * are totals since the call started, so a call:in_ack lost with a connection is made
         * good by the next one, and a resume simply repeats the current total. */
        bool in_ack;
        uint64_t in_received; /* call:in items handed to the worker: the next seq expected */
        uint64_t in_taken;    /* … of which the function has taken this many */

        RpcSocket *owner;
        RpcCall *owner_prev, *owner_next;

        Pending *pending_head, *pending_tail; /* items produced while no client was attached */
        size_t pending_bytes;

        /* Flow control of stream/bidi output (FRAME_OUT_WINDOW): item bytes queued for the
         * owner's connection and not yet credited to the worker. They are credited once the
         * connection has drained (the client took them), or when they are lost with it. Items
         * kept in pending while no client is attached are not: the call waits for one. */
        uint64_t out_due;
        bool due_listed;
        RpcCall *due_next;

        const char *terminal_event;
        Blob *terminal;

        char *claim_token; /* runtime::claim: the token the server takes once the worker is done */

        /* A call of the server's own (rpc_call_local(): the HTTP faces), with no socket: its
         * items and end go to these handlers; NULL once abandoned. */
        const RpcLocalHandlers *local;
        void *local_data;
        bool is_local;

        sd_event_source *deadline;
        sd_event_source *orphan_timer; /* running with no client attached: cancel when it fires */
        RpcCall *results_prev, *results_next; /* oldest first */
};

struct Rpc {
        sd_event *event;
        RpcConfig config;
        char *token;
        SioNamespace ns;
        WorkerLink *worker;

        StrMap *calls;
        unsigned n_in_worker;
        unsigned n_running;

        RpcCall *results_head, *results_tail;
        unsigned n_results;
        size_t result_bytes;

        ForgetSet *forgotten; /* call_ids already answered and forgotten */

        unsigned rapid_deaths;
        sd_event_source *respawn_timer;
        bool stopping; /* shutting down: no more calls, no respawn */

        RpcSocket *sockets;
        RpcCall *claiming; /* the runtime::claim under way */
        bool claimed;      /* by agentd, once: its token is the claimer's */
};

/* ---- small helpers -------------------------------------------------------------------------- */

static Blob *error_blob(const char *call_id, size_t call_id_len, const RpcError *e) {
        _cleanup_buffer_ Buffer b = BUFFER_NULL;

        if (rpc_envelope_error(&b, call_id, call_id_len, e) < 0)
                return NULL;
        return blob_new_copy(buffer_data(&b), b.len);
}

static void emit_error(SioSocket *s, const char *call_id, size_t call_id_len, const RpcError *e) {
        _cleanup_blob_ Blob *b = error_blob(call_id, call_id_len, e);

        if (b)
                (void) sio_socket_emit_binary1(s, EV_ERROR, b);
}

static void forget_id(Rpc *rpc, const char *id, size_t len) {
        if (rpc->forgotten)
                forget_set_add(rpc->forgotten, id, len);
}

static bool is_forgotten(Rpc *rpc, const char *id, size_t len) {
        return rpc->forgotten && forget_set_contains(rpc->forgotten, id, len);
}

/* ---- output flow control ------------------------------------------------------------------- */

/* OUT_CREDIT {call_id, bytes}: the function may send that much more. */
static void call_credit_out(RpcCall *c, uint64_t bytes) {
        _cleanup_buffer_ Buffer b = BUFFER_NULL;
        msgpack_packer pk;

        if (bytes == 0 || !c->in_worker || c->done || !c->rpc->worker)
                return;
        mp_packer_init_buffer(&pk, &b);
        if (msgpack_pack_map(&pk, 2) < 0 || mp_pack_cstr(&pk, "call_id") < 0 ||
            mp_pack_str(&pk, c->id, c->id_len) < 0 || mp_pack_cstr(&pk, "bytes") < 0 ||
            msgpack_pack_uint64(&pk, bytes) < 0) {
                /* The call may now wait for this credit until it is cancelled or its deadline
                 * passes; with no memory for 40 bytes, little else works either. */
                log_oom();
                return;
        }
        (void) worker_link_send(c->rpc->worker, FRAME_OUT_CREDIT, buffer_data(&b), b.len);
}

static void due_unlist(RpcCall *c) {
        if (!c->due_listed)
                return;
        for (RpcCall **p = &c->owner->due; *p; p = &(*p)->due_next)
                if (*p == c) {
                        *p = c->due_next;
                        break;
                }
        c->due_next = NULL;
        c->due_listed = false;
}

/* `bytes` of the call's items were queued for its owner's connection. */
static void call_add_due(RpcCall *c, size_t bytes) {
        c->out_due += bytes;
        if (!c->due_listed) {
                c->due_next = c->owner->due;
                c->owner->due = c;
                c->due_listed = true;
        }
}

/* The connection of `o` drained: its calls' queued items went out (all but the low-water mark).
 * Credit in batches of at least FRAME_OUT_CREDIT_MIN, not one frame per item: a call that
 * waits for credit has a whole window due, so a smaller rest can wait for the next drain. */
static void on_drained(SioSocket *s, void *userdata) {
        RpcSocket *o = sio_socket_get_userdata(s);

        if (!o)
                return;
        for (RpcCall **p = &o->due; *p;) {
                RpcCall *c = *p;

                if (c->out_due < FRAME_OUT_CREDIT_MIN) {
                        p = &c->due_next;
                        continue;
                }
                call_credit_out(c, c->out_due);
                c->out_due = 0;
                *p = c->due_next;
                c->due_next = NULL;
                c->due_listed = false;
        }
}

/* ---- call lifetime -------------------------------------------------------------------------- */

static int on_orphan_timeout(sd_event_source *s, uint64_t usec, void *userdata);

/* A running call lost its client: if none resumes it within the orphan timeout, the client
 * has left for good and the call is cancelled (sandbox::exec kills the command's group). */
static void call_orphan_timer_arm(RpcCall *c) {
        Rpc *rpc = c->rpc;
        uint64_t now;

        if (c->done || rpc->config.orphan_timeout_usec == 0 || rpc->stopping ||
            sd_event_now(rpc->event, CLOCK_MONOTONIC, &now) < 0)
                return;
        if (c->orphan_timer) {
                (void) sd_event_source_set_time(c->orphan_timer, now + rpc->config.orphan_timeout_usec);
                (void) sd_event_source_set_enabled(c->orphan_timer, SD_EVENT_ONESHOT);
        } else
                (void) sd_event_add_time(rpc->event, &c->orphan_timer, CLOCK_MONOTONIC,
                                         now + rpc->config.orphan_timeout_usec, 100 * 1000, on_orphan_timeout, c);
}

static void call_detach(RpcCall *c) {
        RpcSocket *o = c->owner;

        if (!o)
                return;
        call_orphan_timer_arm(c);
        /* What was queued for this connection is out of our hands now (sent, or lost with it):
         * credit it, or the call's window would shrink for good. */
        due_unlist(c);
        call_credit_out(c, c->out_due);
        c->out_due = 0;
        if (c->owner_prev)
                c->owner_prev->owner_next = c->owner_next;
        else
                o->calls = c->owner_next;
        if (c->owner_next)
                c->owner_next->owner_prev = c->owner_prev;
        c->owner = NULL;
        c->owner_prev = c->owner_next = NULL;
}

static void call_attach(RpcCall *c, RpcSocket *o) {
        if (c->owner == o)
                return;
        call_detach(c);
        if (c->orphan_timer)
                (void) sd_event_source_set_enabled(c->orphan_timer, SD_EVENT_OFF);
        c->owner = o;
        c->owner_next = o->calls;
        if (o->calls)
                o->calls->owner_prev = c;
        o->calls = c;
}

static void call_drop_pending(RpcCall *c) {
        Pending *p;

        while ((p = c->pending_head)) {
                c->pending_head = p->next;
                blob_unref(p->data);
                free(p);
        }
        c->pending_tail = NULL;
        c->pending_bytes = 0;
}

/* Send the items produced while no client was attached to the owner, in order. */
static void call_flush_pending(RpcCall *c) {
        Pending *p;

        while (c->owner && (p = c->pending_head)) {
                c->pending_head = p->next;
                if (!c->pending_head)
                        c->pending_tail = NULL;
                c->pending_bytes -= p->data->size;
                (void) sio_socket_emit_binary1(c->owner->socket, EV_ITEM, p->data);
                /* Emitting may close a connection that stopped reading (the backlog bound),
                 * which detaches the call: the item is lost with it. */
                if (c->owner)
                        call_add_due(c, p->data->size);
                else
                        call_credit_out(c, p->data->size);
                blob_unref(p->data);
                free(p);
        }
}

/* Tell the client how many inbox items the function has taken so far: {call_id, taken}. Only
 * to clients that asked (in_ack: true) — older ones would not know the event — and never
 * after the terminal event. */
static void call_emit_in_ack(RpcCall *c) {
        _cleanup_buffer_ Buffer b = BUFFER_NULL;
        _cleanup_blob_ Blob *blob = NULL;
        msgpack_packer pk;

        if (!c->in_ack || !c->owner || c->done)
                return;
        mp_packer_init_buffer(&pk, &b);
        if (msgpack_pack_map(&pk, 2) < 0 || mp_pack_cstr(&pk, "call_id") < 0 ||
            mp_pack_str(&pk, c->id, c->id_len) < 0 || mp_pack_cstr(&pk, "taken") < 0 ||
            msgpack_pack_uint64(&pk, c->in_taken) < 0 || !(blob = blob_new_copy(buffer_data(&b), b.len))) {
                /* The next ack carries the total anyway. */
                log_oom();
                return;
        }
        (void) sio_socket_emit_binary1(c->owner->socket, EV_IN_ACK, blob);
}

static void results_unlink(Rpc *rpc, RpcCall *c) {
        if (!c->cached)
                return;
        if (c->results_prev)
                c->results_prev->results_next = c->results_next;
        else
                rpc->results_head = c->results_next;
        if (c->results_next)
                c->results_next->results_prev = c->results_prev;
        else
                rpc->results_tail = c->results_prev;
        c->results_prev = c->results_next = NULL;
        c->cached = false;
        rpc->n_results--;
        rpc->result_bytes -= c->terminal->size;
}

static void call_free(RpcCall *c) {
        Rpc *rpc = c->rpc;

        results_unlink(rpc, c);
        call_detach(c);
        call_drop_pending(c);
        (void) strmap_remove(rpc->calls, c->id, c->id_len);
        sd_event_source_disable_unref(c->deadline);
        sd_event_source_disable_unref(c->orphan_timer);
        blob_unref(c->terminal);
        if (rpc->claiming == c)
                rpc->claiming = NULL;
        free(c->claim_token);
        free(c);
}

/* The client has the result (acked) or it was evicted: forget it, free when the worker is done. */
static void call_forget(RpcCall *c) {
        Rpc *rpc = c->rpc;

        forget_id(rpc, c->id, c->id_len);
        results_unlink(rpc, c);
        call_drop_pending(c);
        c->terminal = blob_unref(c->terminal);
        call_detach(c);
        if (!c->in_worker)
                call_free(c);
        else
                /* Keep it in the table, result-less, until the worker's terminal frame arrives. */
                c->terminal_event = NULL;
}

static void results_enforce_bounds(Rpc *rpc) {
        while (rpc->results_head &&
               (rpc->n_results > rpc->config.max_results || rpc->result_bytes > rpc->config.max_result_bytes)) {
                RpcCall *oldest = rpc->results_head;
                log_debug("Evicting the unacknowledged result of call %s.", oldest->id);
                call_forget(oldest);
        }
}

/* Decide the call's terminal event; deliver it if a client is attached; keep it until acked.
 * The envelope is shared between the connection's queue and the cache: never copied. */
/* The worker has applied the claim's env and workdir (ok): the token is the claimer's from now
 * on, and every connection made with the old one ends, but the claimer's, which gets the answer
 * (agentd closes it). */
static void claim_finish(RpcCall *c, bool ok) {
        Rpc *rpc = c->rpc;
        size_t n = 0;

        rpc->claiming = NULL;
        if (!ok) {
                free(c->claim_token);
                c->claim_token = NULL;
                return;
        }
        free(rpc->token);
        rpc->token = TAKE_PTR(c->claim_token);
        rpc->config.token = rpc->token;
        rpc->claimed = true;
        for (RpcSocket *o = rpc->sockets; o; o = o->next)
                n++;
        _cleanup_free_ SioSocket **others = calloc(n + 1, sizeof(SioSocket *));
        n = 0;
        for (RpcSocket *o = rpc->sockets; others && o; o = o->next)
                if (o != c->owner)
                        others[n++] = o->socket;
        for (size_t i = 0; i < n; i++)
                sio_socket_close_connection(others[i], "the runtime was claimed: its token changed");
        log_info("Claimed by agentd: a new token, %zu other connection(s) closed.", n);
}

static void call_finish(RpcCall *c, const char *event, Blob *envelope) {
        Rpc *rpc = c->rpc;

        if (c->done)
                return;
        c->done = true;
        rpc->n_running--;
        c->deadline = sd_event_source_disable_unref(c->deadline);
        c->orphan_timer = sd_event_source_disable_unref(c->orphan_timer);

        c->terminal_event = envelope ? event : NULL;
        c->terminal = blob_ref(envelope);
        if (!envelope)
                log_oom();
        if (c->claim_token)
                claim_finish(c, streq(event, EV_RESULT) && envelope);

        if (c->is_local) {
                const RpcLocalHandlers *h = c->local;

                /* Nobody resumes or acks a local call: its end goes to its handler, once. */
                c->local = NULL;
                c->terminal_event = NULL;
                if (h)
                        h->done(c, event, envelope ? envelope->data : NULL, envelope ? envelope->size : 0, c->local_data);
                if (!c->in_worker)
                        call_free(c);
                return;
        }

        if (c->owner && envelope) {
                /* Items the client has not seen yet go first: order within a call is kept. */
                call_flush_pending(c);
                if (c->owner)
                        (void) sio_socket_emit_binary1(c->owner->socket, event, envelope);
        }

        if (!c->terminal_event) {
                call_forget(c);
                return;
        }
        c->cached = true;
        c->results_prev = rpc->results_tail;
        if (rpc->results_tail)
                rpc->results_tail->results_next = c;
        else
                rpc->results_head = c;
        rpc->results_tail = c;
        rpc->n_results++;
        rpc->result_bytes += c->terminal->size;
        results_enforce_bounds(rpc);
}

static void call_finish_error(RpcCall *c, const RpcError *e) {
        _cleanup_blob_ Blob *b = error_blob(c->id, c->id_len, e);

        call_finish(c, EV_ERROR, b);
}

static void call_cancel_in_worker(RpcCall *c, const char *reason) {
        _cleanup_buffer_ Buffer b = BUFFER_NULL;
        msgpack_packer pk;

        if (!c->in_worker || !c->rpc->worker)
                return;
        mp_packer_init_buffer(&pk, &b);
        if (msgpack_pack_map(&pk, 2) < 0 || mp_pack_cstr(&pk, "call_id") < 0 ||
            mp_pack_str(&pk, c->id, c->id_len) < 0 || mp_pack_cstr(&pk, "reason") < 0 ||
            mp_pack_cstr(&pk, reason) < 0)
                return;
        (void) worker_link_send(c->rpc->worker, FRAME_CANCEL, buffer_data(&b), b.len);
}

static int on_deadline(sd_event_source *s, uint64_t usec, void *userdata) {
        RpcCall *c = userdata;

        call_cancel_in_worker(c, "deadline");
        call_finish_error(c, &(RpcError) { .type = RPC_ERR_DEADLINE,
                                           .message = RPC_DEADLINE_MESSAGE,
                                           .cancelled = true });
        return 0;
}

static int on_orphan_timeout(sd_event_source *s, uint64_t usec, void *userdata) {
        RpcCall *c = userdata;

        if (c->owner || c->done)
                return 0;
        log_info("Call %s: no client came back for it, cancelling it.", c->id);
        call_cancel_in_worker(c, "orphaned");
        call_finish_error(c, &(RpcError) { .type = RPC_ERR_CANCELLED,
                                           .message = "no client resumed the call within the orphan timeout",
                                           .cancelled = true });
        return 0;
}

/* ---- inbound events ------------------------------------------------------------------------- */

typedef struct Envelope {
        msgpack_unpacked unpacked;
        const msgpack_object *map;
        const uint8_t *raw;
        size_t raw_size;
} Envelope;

static void envelope_done(Envelope *e) {
        msgpack_unpacked_destroy(&e->unpacked);
}

/* Find call_id in the first bytes of a message too large to keep: the usual encoders put it
 * first, so the head is enough. Best effort; "" when not found. */
static void scan_call_id(const uint8_t *head, size_t size, char *out, size_t out_size, size_t *ret_len) {
        msgpack_unpacked u;
        size_t off = 0;
        uint32_t n = 0;

        *ret_len = 0;
        out[0] = 0;
        if (size == 0)
                return;
        if ((head[0] & 0xf0) == 0x80) {
                n = head[0] & 0x0f;
                off = 1;
        } else if (head[0] == 0xde && size >= 3) {
                n = (uint32_t) head[1] << 8 | head[2];
                off = 3;
        } else if (head[0] == 0xdf && size >= 5) {
                n = (uint32_t) head[1] << 24 | (uint32_t) head[2] << 16 | (uint32_t) head[3] << 8 | head[4];
                off = 5;
        } else
                return;

        msgpack_unpacked_init(&u);
        for (uint32_t i = 0; i < n; i++) {
                bool is_call_id;
                if (msgpack_unpack_next(&u, (const char *) head, size, &off) != MSGPACK_UNPACK_SUCCESS)
                        break;
                is_call_id = mp_str_eq(&u.data, "call_id");
                if (msgpack_unpack_next(&u, (const char *) head, size, &off) != MSGPACK_UNPACK_SUCCESS)
                        break;
                if (is_call_id && u.data.type == MSGPACK_OBJECT_STR && u.data.via.str.size < out_size) {
                        memcpy(out, u.data.via.str.ptr, u.data.via.str.size);
                        out[u.data.via.str.size] = 0;
                        *ret_len = u.data.via.str.size;
                        break;
                }
        }
        msgpack_unpacked_destroy(&u);
}

/* Check the event carries exactly one binary attachment holding one msgpack map. */
static int parse_envelope(Rpc *rpc, SioSocket *s, json_t *args, const SioAttachment *att, size_t n_att, Envelope *ret) {
        size_t off = 0;

        msgpack_unpacked_init(&ret->unpacked);
        if (json_array_size(args) != 2 || n_att != 1 || sio_placeholder_num(json_array_get(args, 1)) != 0) {
                emit_error(s, "", 0,
                           &(RpcError) { .type = RPC_ERR_BAD_REQUEST,
                                         .message = "an RPC event carries exactly one argument: a binary attachment "
                                                    "holding one msgpack map" });
                return -EBADMSG;
        }
        if (att[0].too_large) {
                char id[RPC_CALL_ID_MAX + 1], msg[160];
                size_t id_len;

                scan_call_id(att[0].data, att[0].size, id, sizeof(id), &id_len);
                snprintf(msg, sizeof(msg), "message of %zu bytes exceeds the limit of %zu bytes", att[0].total_size,
                         rpc->config.max_message);
                emit_error(s, id, id_len, &(RpcError) { .type = RPC_ERR_TOO_LARGE, .message = msg });
                return -EMSGSIZE;
        }
        if (mp_check(att[0].data, att[0].size) < 0 ||
            msgpack_unpack_next(&ret->unpacked, (const char *) att[0].data, att[0].size, &off) !=
                    MSGPACK_UNPACK_SUCCESS ||
            off != att[0].size || ret->unpacked.data.type != MSGPACK_OBJECT_MAP) {
                emit_error(s, "", 0,
                           &(RpcError) { .type = RPC_ERR_BAD_REQUEST,
                                         .message = "the attachment is not exactly one msgpack map" });
                return -EBADMSG;
        }
        ret->map = &ret->unpacked.data;
        ret->raw = att[0].data;
        ret->raw_size = att[0].size;
        return 0;
}

static int envelope_call_id(SioSocket *s, const Envelope *e, const char **ret, size_t *ret_len) {
        int r = mp_map_get_str(e->map, "call_id", ret, ret_len);

        if (r < 0 || *ret_len == 0 || *ret_len > RPC_CALL_ID_MAX || memchr(*ret, 0, *ret_len)) {
                emit_error(s, "", 0,
                           &(RpcError) { .type = RPC_ERR_BAD_REQUEST,
                                         .message = "call_id must be a non-empty string of at most 128 bytes" });
                return -EINVAL;
        }
        return 0;
}

/* Replay a finished call, or re-attach a running one, to this socket. */
static void call_resume_on(RpcCall *c, RpcSocket *o) {
        call_attach(c, o);
        /* Acks sent on the old connection may be lost: the current total makes them good. */
        call_emit_in_ack(c);
        call_flush_pending(c);
        /* Not attached any more: emitting closed a connection that stopped reading. */
        if (!c->done || c->owner != o)
                return;
        if (c->terminal_event)
                (void) sio_socket_emit_binary1(o->socket, c->terminal_event, c->terminal);
        else
                emit_error(o->socket, c->id, c->id_len,
                           &(RpcError) { .type = RPC_ERR_RESULT_UNAVAILABLE,
                                         .message = "the result of this call is no longer available" });
}

static void handle_call(Rpc *rpc, RpcSocket *o, const Envelope *e) {
        _cleanup_free_ char *claim_token_new = NULL;
        SioSocket *s = o->socket;
        const char *id, *callable, *shape;
        size_t id_len, callable_len, shape_len;
        const msgpack_object *v;
        int64_t deadline_ms = 0;
        bool in_ack;
        RpcCall *c;
        int r;

        if (envelope_call_id(s, e, &id, &id_len) < 0)
                return;

        /* At most once: a known call_id is resumed, never run again. */
        c = strmap_get(rpc->calls, id, id_len);
        if (c && c->is_local) {
                emit_error(s, id, id_len, &(RpcError) { .type = RPC_ERR_BAD_REQUEST, .message = "this call_id is in use" });
                return;
        }
        if (c) {
                call_resume_on(c, o);
                return;
        }
        if (is_forgotten(rpc, id, id_len)) {
                emit_error(s, id, id_len,
                           &(RpcError) { .type = RPC_ERR_RESULT_UNAVAILABLE,
                                         .message = "this call_id was already used; its result is gone" });
                return;
        }

        if (mp_map_get_str(e->map, "callable", &callable, &callable_len) < 0 || callable_len == 0) {
                emit_error(s, id, id_len,
                           &(RpcError) { .type = RPC_ERR_BAD_REQUEST,
                                         .message = "callable must be a string \"module::function\"" });
                return;
        }
        if (mp_map_get_str(e->map, "shape", &shape, &shape_len) < 0 ||
            !((shape_len == 5 && memcmp(shape, "unary", 5) == 0) || (shape_len == 6 && memcmp(shape, "stream", 6) == 0) ||
              (shape_len == 4 && memcmp(shape, "bidi", 4) == 0))) {
                emit_error(s, id, id_len,
                           &(RpcError) { .type = RPC_ERR_BAD_REQUEST,
                                         .message = "shape must be \"unary\", \"stream\" or \"bidi\"" });
                return;
        }
        v = mp_map_get(e->map, "args");
        if (v && v->type != MSGPACK_OBJECT_ARRAY && v->type != MSGPACK_OBJECT_NIL) {
                emit_error(s, id, id_len, &(RpcError) { .type = RPC_ERR_BAD_REQUEST, .message = "args must be an array" });
                return;
        }
        v = mp_map_get(e->map, "kwargs");
        if (v && v->type != MSGPACK_OBJECT_MAP && v->type != MSGPACK_OBJECT_NIL) {
                emit_error(s, id, id_len, &(RpcError) { .type = RPC_ERR_BAD_REQUEST, .message = "kwargs must be a map" });
                return;
        }
        v = mp_map_get(e->map, "in_ack");
        if (v && v->type != MSGPACK_OBJECT_BOOLEAN && v->type != MSGPACK_OBJECT_NIL) {
                emit_error(s, id, id_len, &(RpcError) { .type = RPC_ERR_BAD_REQUEST, .message = "in_ack must be true or false" });
                return;
        }
        in_ack = shape_len == 4 && v && v->type == MSGPACK_OBJECT_BOOLEAN && v->via.boolean;
        v = mp_map_get(e->map, "deadline_ms");
        if (v && v->type != MSGPACK_OBJECT_NIL) {
                if (mp_map_get_int(e->map, "deadline_ms", &deadline_ms) < 0 || deadline_ms <= 0) {
                        emit_error(s, id, id_len,
                                   &(RpcError) { .type = RPC_ERR_BAD_REQUEST,
                                                 .message = "deadline_ms must be a positive integer" });
                        return;
                }
        }

        if (rpc->stopping) {
                emit_error(s, id, id_len,
                           &(RpcError) { .type = RPC_ERR_CANCELLED, .message = "the runtime server is shutting down",
                                         .cancelled = true });
                return;
        }
        if (rpc->n_in_worker >= rpc->config.max_calls) {
                char msg[128];
                snprintf(msg, sizeof(msg), "too many calls in flight (limit %u); retry when some finish",
                         rpc->config.max_calls);
                emit_error(s, id, id_len, &(RpcError) { .type = RPC_ERR_TOO_MANY_CALLS, .message = msg });
                return;
        }

        if (claim_is_call(callable, callable_len)) {
                const char *why = NULL;
                if (!rpc->config.claimable)
                        why = "this runtime is not agentd's to claim (it was not made for a pool)";
                else if (rpc->claimed || rpc->claiming)
                        why = "this runtime was claimed already";
                else if (rpc->n_running > 0)
                        why = "runtime::claim needs a runtime with no call running";
                else if (!(claim_token_new = claim_token(e->map, &why)) && !why)
                        why = "out of memory";
                if (why) {
                        emit_error(s, id, id_len, &(RpcError) { .type = RPC_ERR_BAD_REQUEST, .message = why });
                        return;
                }
        }

        if (!worker_link_running(rpc->worker)) {
                rpc->respawn_timer = sd_event_source_disable_unref(rpc->respawn_timer);
                r = worker_link_start(rpc->worker);
                if (r < 0) {
                        emit_error(s, id, id_len,
                                   &(RpcError) { .type = RPC_ERR_WORKER_DIED, .message = "the worker could not be started" });
                        return;
                }
        }

        c = calloc(1, sizeof(*c));
        if (!c) {
                log_oom();
                return;
        }
        c->rpc = rpc;
        memcpy(c->id, id, id_len);
        c->id_len = id_len;
        c->bidi = shape_len == 4;
        c->in_ack = in_ack;
        r = strmap_put(rpc->calls, c->id, c->id_len, c);
        if (r < 0) {
                free(c);
                log_oom();
                return;
        }

        r = worker_link_send(rpc->worker, FRAME_CALL, e->raw, e->raw_size);
        if (r < 0) {
                (void) strmap_remove(rpc->calls, c->id, c->id_len);
                free(c);
                emit_error(s, id, id_len,
                           &(RpcError) { .type = r == -EMSGSIZE ? RPC_ERR_TOO_LARGE : RPC_ERR_WORKER_DIED,
                                         .message = "the call could not be handed to the worker" });
                return;
        }
        c->in_worker = true;
        rpc->n_in_worker++;
        rpc->n_running++;
        if (claim_token_new) {
                c->claim_token = TAKE_PTR(claim_token_new);
                rpc->claiming = c;
        }
        call_attach(c, o);
        /* The window is open: this first ack (taken: 0) also tells the client that this server
         * does flow control, before any item of the call can reach it. */
        call_emit_in_ack(c);

        if (deadline_ms > 0) {
                uint64_t now;
                if (sd_event_now(rpc->event, CLOCK_MONOTONIC, &now) >= 0)
                        (void) sd_event_add_time(rpc->event, &c->deadline, CLOCK_MONOTONIC,
                                                 now + (uint64_t) deadline_ms * 1000ULL, 1, on_deadline, c);
        }
}

/* The call an inbox/cancel/ack event names; NULL (after answering BadRequest when the call_id
 * itself is malformed) when there is none. */
static RpcCall *envelope_lookup(Rpc *rpc, RpcSocket *o, const Envelope *e) {
        const char *id;
        size_t id_len;

        RpcCall *c;

        if (envelope_call_id(o->socket, e, &id, &id_len) < 0)
                return NULL;
        c = strmap_get(rpc->calls, id, id_len);
        return c && !c->is_local ? c : NULL; /* the server's own calls are no client's */
}

/* Count an inbox item in; false for a copy the worker has already. Clients doing flow control
 * number their items (seq, from 0) and send the unacknowledged ones again after a reconnect,
 * since those may have been lost with the old connection; the copies that were not are
 * dropped here. Items without seq are simply counted. */
static bool call_count_in(RpcCall *c, SioSocket *s, const Envelope *e) {
        const msgpack_object *seq = mp_map_get(e->map, "seq");

        if (!seq || seq->type == MSGPACK_OBJECT_NIL) {
                c->in_received++;
                return true;
        }
        if (seq->type != MSGPACK_OBJECT_POSITIVE_INTEGER) {
                emit_error(s, c->id, c->id_len,
                           &(RpcError) { .type = RPC_ERR_BAD_REQUEST, .message = "call:in seq must be an integer >= 0" });
                return false;
        }
        if (seq->via.u64 < c->in_received) {
                log_debug("Dropping item %" PRIu64 " of call %s: sent again, the worker has it.", seq->via.u64, c->id);
                return false;
        }
        if (seq->via.u64 > c->in_received)
                log_debug("Call %s: items %" PRIu64 " to %" PRIu64 " never came.", c->id, c->in_received,
                          seq->via.u64 - 1);
        c->in_received = seq->via.u64 + 1;
        return true;
}

static void handle_inbox(Rpc *rpc, RpcSocket *o, const Envelope *e, uint8_t kind) {
        RpcCall *c = envelope_lookup(rpc, o, e);

        /* Items for a finished or unknown call are dropped: the call already has its answer. */
        if (!c || c->done || !c->in_worker)
                return;
        if (!c->bidi) {
                emit_error(o->socket, c->id, c->id_len,
                           &(RpcError) { .type = RPC_ERR_BAD_REQUEST, .message = "inbox items are for bidi calls only" });
                return;
        }
        if (kind == FRAME_IN && !mp_map_get(e->map, "item")) {
                emit_error(o->socket, c->id, c->id_len,
                           &(RpcError) { .type = RPC_ERR_BAD_REQUEST, .message = "call:in needs an item" });
                return;
        }
        if (kind == FRAME_IN && !call_count_in(c, o->socket, e))
                return;
        (void) worker_link_send(rpc->worker, kind, e->raw, e->raw_size);
}

static void handle_cancel(Rpc *rpc, RpcSocket *o, const Envelope *e) {
        RpcCall *c = envelope_lookup(rpc, o, e);

        if (!c || c->done)
                return;
        call_attach(c, o);
        call_cancel_in_worker(c, "cancelled");
        call_finish_error(c, &(RpcError) { .type = RPC_ERR_CANCELLED, .message = "remote call cancelled", .cancelled = true });
}

static void handle_ack(Rpc *rpc, RpcSocket *o, const Envelope *e) {
        RpcCall *c = envelope_lookup(rpc, o, e);

        if (c && c->done)
                call_forget(c);
}

static void handle_resume(Rpc *rpc, RpcSocket *o, const Envelope *e) {
        const msgpack_object *ids = mp_map_get(e->map, "call_ids");

        if (!ids || ids->type != MSGPACK_OBJECT_ARRAY) {
                emit_error(o->socket, "", 0,
                           &(RpcError) { .type = RPC_ERR_BAD_REQUEST, .message = "resume needs call_ids, an array of strings" });
                return;
        }
        for (uint32_t i = 0; i < ids->via.array.size; i++) {
                const msgpack_object *v = &ids->via.array.ptr[i];
                RpcCall *c;

                if (v->type != MSGPACK_OBJECT_STR || v->via.str.size == 0 || v->via.str.size > RPC_CALL_ID_MAX)
                        continue;
                c = strmap_get(rpc->calls, v->via.str.ptr, v->via.str.size);
                if (c && !c->is_local)
                        call_resume_on(c, o);
                else
                        emit_error(o->socket, v->via.str.ptr, v->via.str.size,
                                   &(RpcError) { .type = RPC_ERR_RESULT_UNAVAILABLE,
                                                 .message = "no result is kept for this call_id" });
        }
}

static void on_event(SioSocket *s, const char *event, json_t *args, const SioAttachment *att, size_t n_att,
                     int64_t ack_id, void *userdata) {
        Rpc *rpc = userdata;
        RpcSocket *o = sio_socket_get_userdata(s);
        Envelope e = {};

        if (!o || !event)
                return;
        if (parse_envelope(rpc, s, args, att, n_att, &e) < 0) {
                envelope_done(&e);
                return;
        }

        if (streq(event, EV_CALL))
                handle_call(rpc, o, &e);
        else if (streq(event, EV_CALL_IN))
                handle_inbox(rpc, o, &e, FRAME_IN);
        else if (streq(event, EV_CALL_END_IN))
                handle_inbox(rpc, o, &e, FRAME_END_IN);
        else if (streq(event, EV_CANCEL))
                handle_cancel(rpc, o, &e);
        else if (streq(event, EV_RESUME))
                handle_resume(rpc, o, &e);
        else if (streq(event, EV_ACK))
                handle_ack(rpc, o, &e);
        else
                emit_error(s, "", 0, &(RpcError) { .type = RPC_ERR_BAD_REQUEST, .message = "unknown event" });

        envelope_done(&e);

        /* Clients using emitWithAck() wait for this; the answer itself comes as events. */
        if (ack_id >= 0)
                (void) sio_socket_ack(s, ack_id, json_array(), NULL, 0);
}

static int const_time_equal(const char *a, size_t a_len, const char *b, size_t b_len) {
        unsigned char d = a_len != b_len;

        for (size_t i = 0; i < a_len; i++)
                d |= (unsigned char) a[i] ^ (unsigned char) b[i < b_len ? i : 0];
        return d == 0;
}

bool rpc_token_accepts(Rpc *rpc, const char *token) {
        if (!rpc->token)
                return true;
        return token && const_time_equal(token, strlen(token), rpc->token, strlen(rpc->token));
}

bool rpc_request_token_ok(Rpc *rpc, const char *access_token, const char *bearer) {
        /* A wrong one in one header does not spoil a right one in the other. */
        return rpc_token_accepts(rpc, access_token && access_token[0] ? access_token : NULL) ||
               rpc_token_accepts(rpc, bearer);
}

static const char *on_authorize(SioServer *server, const json_t *auth, void *userdata) {
        Rpc *rpc = userdata;
        const char *t;

        if (!rpc->token)
                return NULL;
        t = json_string_value(json_object_get(auth, "token"));
        if (!t || !const_time_equal(t, strlen(t), rpc->token, strlen(rpc->token)))
                return "unauthorized";
        return NULL;
}

static void on_connected(SioSocket *s, const json_t *auth, void *userdata) {
        RpcSocket *o = calloc(1, sizeof(*o));
        Rpc *rpc = userdata;

        if (!o) {
                sio_socket_close_connection(s, "out of memory");
                return;
        }
        o->socket = s;
        o->next = rpc->sockets;
        if (rpc->sockets)
                rpc->sockets->prev = o;
        rpc->sockets = o;
        sio_socket_set_userdata(s, o);
        /* Calls come next: the worker starts while they are on their way (it is started
         * on demand, main.c). One that died waits for its respawn timer instead. */
        if (rpc->worker && !rpc->stopping && !rpc->respawn_timer && !worker_link_running(rpc->worker))
                (void) worker_link_start(rpc->worker);
}

static void on_disconnect(SioSocket *s, const char *reason, void *userdata) {
        RpcSocket *o = sio_socket_get_userdata(s);
        Rpc *rpc = userdata;

        if (!o)
                return;
        /* Calls outlive the connection: they keep running and keep their results for resume. */
        while (o->calls)
                call_detach(o->calls);
        if (o->prev)
                o->prev->next = o->next;
        else
                rpc->sockets = o->next;
        if (o->next)
                o->next->prev = o->prev;
        sio_socket_set_userdata(s, NULL);
        free(o);
}

/* ---- worker frames -------------------------------------------------------------------------- */

static RpcCall *frame_call(Rpc *rpc, const uint8_t *payload, size_t size, msgpack_unpacked *u) {
        const char *id;
        size_t id_len, off = 0;

        /* The worker runs user code: its frames are checked like a client's. */
        if (mp_check(payload, size) < 0 || msgpack_unpack_next(u, (const char *) payload, size, &off) != MSGPACK_UNPACK_SUCCESS)
                return NULL;
        if (mp_map_get_str(&u->data, "call_id", &id, &id_len) < 0)
                return NULL;
        return strmap_get(rpc->calls, id, id_len);
}

static void on_worker_frame(WorkerLink *w, uint8_t kind, const uint8_t *payload, size_t size, FrameReader *reader,
                            void *userdata) {
        _cleanup_blob_ Blob *blob = NULL;
        Rpc *rpc = userdata;
        msgpack_unpacked u;
        int64_t count = 0;
        RpcCall *c;

        msgpack_unpacked_init(&u);
        c = frame_call(rpc, payload, size, &u);
        if (c && kind == FRAME_IN_TAKEN && (mp_map_get_int(&u.data, "count", &count) < 0 || count <= 0))
                c = NULL;
        msgpack_unpacked_destroy(&u);
        if (!c) {
                log_debug("Dropping a worker frame '%c' for an unknown call.", kind);
                return;
        }

        if (kind == FRAME_IN_TAKEN) {
                /* It cannot have taken more than it got: the worker runs user code. */
                c->in_taken = MIN(c->in_taken + (uint64_t) count, c->in_received);
                call_emit_in_ack(c);
                return;
        }

        /* Results and items go to the client as they are: keep the frame's bytes (a large one
         * without copying them). */
        if ((kind == FRAME_ITEM && !c->done) || (frame_kind_is_terminal(kind) && !c->done)) {
                if (frame_reader_take(reader, &blob) < 0) {
                        log_oom();
                        return;
                }
        }

        if (kind == FRAME_ITEM) {
                Pending *p;

                if (c->done)
                        return;
                if (c->is_local) {
                        /* The handler credits the bytes (rpc_call_local_credit()) once it has
                         * passed them on. */
                        if (c->local)
                                c->local->item(c, payload, size, c->local_data);
                        return;
                }
                if (c->owner) {
                        (void) sio_socket_emit_binary1(c->owner->socket, EV_ITEM, blob);
                        if (c->owner)
                                call_add_due(c, size);
                        else /* lost with a connection the backlog bound just closed */
                                call_credit_out(c, size);
                        return;
                }
                if (c->pending_bytes + size > rpc->config.max_orphan_bytes) {
                        call_cancel_in_worker(c, "cancelled");
                        call_finish_error(c, &(RpcError) { .type = RPC_ERR_CANCELLED,
                                                           .message = "no client attached and the call's unread output "
                                                                      "exceeded the buffer limit",
                                                           .cancelled = true });
                        return;
                }
                p = calloc(1, sizeof(*p));
                if (!p)
                        return;
                p->data = TAKE_PTR(blob);
                if (c->pending_tail)
                        c->pending_tail->next = p;
                else
                        c->pending_head = p;
                c->pending_tail = p;
                c->pending_bytes += size;
                return;
        }

        if (!frame_kind_is_terminal(kind))
                return;

        if (c->in_worker) {
                c->in_worker = false;
                rpc->n_in_worker--;
        }
        if (!c->done) {
                const char *event = kind == FRAME_RESULT ? EV_RESULT : kind == FRAME_END ? EV_END : EV_ERROR;
                call_finish(c, event, blob);
        } else if (!c->cached && !c->terminal_event)
                /* Already answered and forgotten; the worker just caught up. */
                call_free(c);
}

static int on_respawn(sd_event_source *s, uint64_t usec, void *userdata) {
        Rpc *rpc = userdata;

        rpc->respawn_timer = sd_event_source_disable_unref(rpc->respawn_timer);
        (void) worker_link_start(rpc->worker);
        return 0;
}

static void on_worker_ready(WorkerLink *w, void *userdata) {
        Rpc *rpc = userdata;

        rpc->rapid_deaths = 0;
        log_debug("Worker %d is ready.", (int) worker_link_pid(w));
}

static void on_worker_died(WorkerLink *w, int returncode, void *userdata) {
        Rpc *rpc = userdata;
        char msg[128];
        RpcCall *c;
        size_t state = 0;
        uint64_t now, delay;
        bool died_early = rpc->rapid_deaths > 0 || returncode != 0;

        if (returncode < 0)
                snprintf(msg, sizeof(msg), "the worker process was killed by signal %d%s", -returncode,
                         returncode == -9 ? " (out of memory?)" : "");
        else
                snprintf(msg, sizeof(msg), "the worker process exited with status %d", returncode);

        /* Fail everything it still owed; collect first, the walk must not see removals. */
        RpcCall **owed = NULL;
        size_t n_owed = 0;
        owed = calloc(strmap_size(rpc->calls) + 1, sizeof(RpcCall *));
        while ((c = strmap_iterate(rpc->calls, &state)))
                if (c->in_worker && owed)
                        owed[n_owed++] = c;
        for (size_t i = 0; i < n_owed; i++) {
                c = owed[i];
                c->in_worker = false;
                rpc->n_in_worker--;
                if (!c->done)
                        call_finish_error(c, &(RpcError) { .type = RPC_ERR_WORKER_DIED, .message = msg,
                                                           .has_returncode = true, .returncode = returncode });
                else if (!c->cached && !c->terminal_event)
                        call_free(c);
        }
        free(owed);

        if (rpc->stopping)
                return;
        /* Respawn right away; back off if it keeps dying before doing any work. */
        if (died_early)
                rpc->rapid_deaths++;
        delay = rpc->rapid_deaths <= 1 ? 0 : MIN(RESPAWN_MAX_DELAY_USEC, 100000ULL << MIN(rpc->rapid_deaths, 6u));
        if (sd_event_now(rpc->event, CLOCK_MONOTONIC, &now) < 0)
                return;
        rpc->respawn_timer = sd_event_source_disable_unref(rpc->respawn_timer);
        (void) sd_event_add_time(rpc->event, &rpc->respawn_timer, CLOCK_MONOTONIC, now + delay, 1, on_respawn, rpc);
}

const WorkerLinkCallbacks rpc_worker_callbacks = {
        .ready = on_worker_ready,
        .frame = on_worker_frame,
        .died = on_worker_died,
};

/* ---- calls of the server's own --------------------------------------------------------------- */

int rpc_call_local(Rpc *rpc, const char *callable, const char *shape, const Buffer *args, const Buffer *kwargs,
                   const RpcLocalHandlers *h, void *userdata, RpcCall **ret) {
        _cleanup_buffer_ Buffer b = BUFFER_NULL;
        uint8_t random[12];
        char id[8 + 2 * sizeof(random) + 1] = "server:";
        msgpack_packer pk;
        RpcCall *c;
        int r;

        assert(h && h->item && h->done);
        if (rpc->stopping)
                return -ESHUTDOWN;
        if (rpc->n_in_worker >= rpc->config.max_calls)
                return -EBUSY;
        /* A client cannot guess it, and could not use it anyway (is_local). */
        if (getrandom(random, sizeof(random), 0) != (ssize_t) sizeof(random))
                return -EIO;
        for (size_t i = 0; i < sizeof(random); i++)
                snprintf(id + 7 + 2 * i, 3, "%02x", random[i]);

        mp_packer_init_buffer(&pk, &b);
        r = msgpack_pack_map(&pk, 5);
        r |= mp_pack_cstr(&pk, "call_id");
        r |= mp_pack_cstr(&pk, id);
        r |= mp_pack_cstr(&pk, "callable");
        r |= mp_pack_cstr(&pk, callable);
        r |= mp_pack_cstr(&pk, "shape");
        r |= mp_pack_cstr(&pk, shape);
        r |= mp_pack_cstr(&pk, "args");
        if (r == 0)
                r = buffer_append(&b, buffer_data(args), args->len);
        r |= mp_pack_cstr(&pk, "kwargs");
        if (r == 0)
                r = buffer_append(&b, buffer_data(kwargs), kwargs->len);
        if (r != 0)
                return -ENOMEM;

        if (!worker_link_running(rpc->worker)) {
                rpc->respawn_timer = sd_event_source_disable_unref(rpc->respawn_timer);
                r = worker_link_start(rpc->worker);
                if (r < 0)
                        return r;
        }
        c = calloc(1, sizeof(*c));
        if (!c)
                return -ENOMEM;
        *c = (RpcCall) { .rpc = rpc, .id_len = strlen(id), .is_local = true, .local = h, .local_data = userdata };
        memcpy(c->id, id, c->id_len);
        r = strmap_put(rpc->calls, c->id, c->id_len, c);
        if (r < 0) {
                free(c);
                return r;
        }
        r = worker_link_send(rpc->worker, FRAME_CALL, buffer_data(&b), b.len);
        if (r < 0) {
                (void) strmap_remove(rpc->calls, c->id, c->id_len);
                free(c);
                return r;
        }
        c->in_worker = true;
        rpc->n_in_worker++;
        rpc->n_running++;
        if (ret)
                *ret = c;
        return 0;
}

void rpc_call_local_credit(RpcCall *c, uint64_t bytes) {
        call_credit_out(c, bytes);
}

void rpc_error_of(const uint8_t *envelope, size_t size, char **ret_type, char **ret_message) {
        const msgpack_object *error;
        msgpack_unpacked u;
        size_t off = 0;

        *ret_type = *ret_message = NULL;
        msgpack_unpacked_init(&u);
        if (envelope && mp_check(envelope, size) >= 0 &&
            msgpack_unpack_next(&u, (const char *) envelope, size, &off) == MSGPACK_UNPACK_SUCCESS &&
            (error = mp_map_get(&u.data, "error"))) {
                const char *s;
                size_t n;

                if (mp_map_get_str(error, "type", &s, &n) >= 0)
                        *ret_type = strndup(s, n);
                if (mp_map_get_str(error, "message", &s, &n) >= 0)
                        *ret_message = strndup(s, n);
        }
        msgpack_unpacked_destroy(&u);
}

/* {call_id, item} (item: one packed msgpack object) for the worker's inbox of a local call. */
static int local_inbox_send(RpcCall *c, uint8_t kind, const Buffer *item) {
        _cleanup_buffer_ Buffer b = BUFFER_NULL;
        msgpack_packer pk;
        int r;

        if (!c || c->done || !c->in_worker)
                return -ESRCH;
        mp_packer_init_buffer(&pk, &b);
        r = msgpack_pack_map(&pk, item ? 2 : 1);
        r |= mp_pack_cstr(&pk, "call_id");
        r |= msgpack_pack_str(&pk, c->id_len);
        r |= msgpack_pack_str_body(&pk, c->id, c->id_len);
        if (item) {
                r |= mp_pack_cstr(&pk, "item");
                if (r == 0)
                        r = buffer_append(&b, buffer_data(item), item->len);
        }
        if (r != 0)
                return -ENOMEM;
        return worker_link_send(c->rpc->worker, kind, buffer_data(&b), b.len);
}

int rpc_call_local_send(RpcCall *c, const Buffer *item) {
        return local_inbox_send(c, FRAME_IN, item);
}

void rpc_call_local_abandon(RpcCall *c) {
        if (!c || !c->is_local || !c->local)
                return;
        c->local = NULL;
        if (c->done)
                return;
        call_cancel_in_worker(c, "cancelled");
        call_finish_error(c, &(RpcError) { .type = RPC_ERR_CANCELLED, .message = "the HTTP client went away",
                                           .cancelled = true });
}

/* ---- setup ---------------------------------------------------------------------------------- */

void rpc_set_worker(Rpc *rpc, WorkerLink *worker) {
        rpc->worker = worker;
}

void rpc_stop(Rpc *rpc, const char *message) {
        RpcCall **running;
        size_t n = 0, state = 0;
        RpcCall *c;

        rpc->stopping = true;
        rpc->respawn_timer = sd_event_source_disable_unref(rpc->respawn_timer);

        running = calloc(strmap_size(rpc->calls) + 1, sizeof(RpcCall *));
        if (!running)
                return;
        while ((c = strmap_iterate(rpc->calls, &state)))
                if (!c->done)
                        running[n++] = c;
        for (size_t i = 0; i < n; i++) {
                call_cancel_in_worker(running[i], "shutdown");
                call_finish_error(running[i],
                                  &(RpcError) { .type = RPC_ERR_CANCELLED, .message = message, .cancelled = true });
        }
        free(running);
}

unsigned rpc_n_running(const Rpc *rpc) {
        return rpc->n_running;
}

const char *rpc_token(Rpc *rpc) {
        return rpc->token;
}

const SioNamespace *rpc_namespace(Rpc *rpc) {
        return &rpc->ns;
}

int rpc_new(sd_event *event, const RpcConfig *config, Rpc **ret) {
        Rpc *rpc = calloc(1, sizeof(*rpc));

        if (!rpc)
                return -ENOMEM;
        rpc->event = sd_event_ref(event);
        rpc->config = *config;
        if (!strempty(config->token)) {
                rpc->token = strdup(config->token);
                if (!rpc->token)
                        goto oom;
        }
        rpc->config.token = rpc->token;
        rpc->calls = strmap_new();
        if (!rpc->calls)
                goto oom;
        if (config->forget_window > 0) {
                rpc->forgotten = forget_set_new(config->forget_window);
                if (!rpc->forgotten)
                        goto oom;
        }
        rpc->ns = (SioNamespace) {
                .name = "/rpc",
                .authorize = on_authorize,
                .connected = on_connected,
                .event = on_event,
                .disconnect = on_disconnect,
                .drained = on_drained,
                .userdata = rpc,
        };
        *ret = rpc;
        return 0;
oom:
        rpc_free(rpc);
        return -ENOMEM;
}

Rpc *rpc_free(Rpc *rpc) {
        RpcCall *c;
        size_t state = 0;

        if (!rpc)
                return NULL;
        if (rpc->calls) {
                while ((c = strmap_iterate(rpc->calls, &state))) {
                        c->in_worker = false;
                        call_free(c);
                        state = 0;
                }
        }
        sd_event_source_disable_unref(rpc->respawn_timer);
        strmap_free(rpc->calls);
        forget_set_free(rpc->forgotten);
        free(rpc->token);
        sd_event_unref(rpc->event);
        free(rpc);
        return NULL;
}

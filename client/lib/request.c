/* SPDX-License-Identifier: MIT */
/* Calls: starting them, their inbox, cancel, deadlines, and delivering what the server sends
 * — to handlers (event-loop use) or into a bounded queue read by agentix_request_next()
 * (blocking use). At most one end reaches the user per call; it is acked afterwards. */

#include <stdarg.h>

#include "call-envelope.h"
#include "client-internal.h"
#include "error.h"
#include "log.h"
#include "mp-check.h"
#include "value.h"

static const msgpack_object nil_object = { .type = MSGPACK_OBJECT_NIL };

/* ---- lifetime ----------------------------------------------------------------------------- */

static void request_release_envelope(agentix_request *r) {
        if (r->envelope.len > 0 && r->client)
                client_account(r->client, -(ssize_t) r->envelope.len);
        buffer_done(&r->envelope);
}

static void request_clear_items(agentix_request *r) {
        QueuedItem *q;

        while ((q = r->items_head)) {
                r->items_head = q->next;
                msgpack_unpacked_destroy(&q->value);
                free(q);
        }
        r->items_tail = NULL;
        r->n_items = 0;
        r->items_bytes = 0;
}

static void request_unlink(agentix_request *r) {
        agentix_client *c = r->client;

        if (!c)
                return;
        if (r->in_table) {
                (void) strmap_remove(c->calls, r->id, strlen(r->id));
                r->in_table = false;
        }
        if (r->prev)
                r->prev->next = r->next;
        else
                c->requests_head = r->next;
        if (r->next)
                r->next->prev = r->prev;
        else
                c->requests_tail = r->prev;
        r->prev = r->next = NULL;
}

/* The client goes away: the request stays valid for its holder, without a client. */
void request_detach(agentix_request *r) {
        request_release_envelope(r);
        request_inbox_clear(r);
        r->deadline_timer = sd_event_source_disable_unref(r->deadline_timer);
        request_unlink(r);
        r->client = NULL;
}

static void request_free(agentix_request *r) {
        request_detach(r);
        request_clear_items(r);
        if (r->has_result)
                msgpack_unpacked_destroy(&r->result);
        agentix_error_done(&r->error);
        free(r);
}

AGENTIX_API agentix_request *agentix_request_ref(agentix_request *r) {
        if (r)
                r->n_ref++;
        return r;
}

AGENTIX_API agentix_request *agentix_request_unref(agentix_request *r) {
        if (!r || r->n_ref == 0)
                return NULL;
        /* Nobody can read a blocking-use call any more: stop it rather than queue its items. */
        if (r->n_ref == 2 && r->in_table && !r->async && !r->done && r->client)
                (void) agentix_request_cancel(r);
        if (--r->n_ref > 0)
                return NULL;
        request_free(r);
        return NULL;
}

AGENTIX_API const char *agentix_request_id(agentix_request *r) {
        return r ? r->id : NULL;
}

AGENTIX_API bool agentix_request_is_done(agentix_request *r) {
        return r && r->done;
}

/* ---- the end ------------------------------------------------------------------------------ */

/* The value of a {call_id, value} envelope, in a tree of its own. */
static int unpack_value(const uint8_t *raw, size_t size, msgpack_unpacked *ret) {
        const msgpack_object *v;
        msgpack_unpacked u;
        int r;

        r = value_unpack_owned(raw, size, &u);
        if (r < 0)
                return r;
        v = mp_map_get(&u.data, "value");
        u.data = v ? *v : nil_object;
        *ret = u;
        return 0;
}

static void request_send_ack(agentix_request *r) {
        if (r->client)
                client_ack(r->client, r->id);
}

/* Deliver the end of the call, once. value: the unary result (raw/size: its envelope);
 * error: NULL on success; from_server: the server sent it, so it is acked. */
static void request_finish(agentix_request *r, const msgpack_object *value, const agentix_error *error,
                           const uint8_t *raw, size_t size, bool from_server) {
        bool table_ref;

        if (r->done)
                return;
        r->done = true;
        agentix_request_ref(r);

        table_ref = r->in_table;
        if (r->in_table && r->client) {
                (void) strmap_remove(r->client->calls, r->id, strlen(r->id));
                r->in_table = false;
        }
        r->deadline_timer = sd_event_source_disable_unref(r->deadline_timer);
        request_release_envelope(r);
        request_inbox_clear(r);

        if (error)
                (void) error_copy(&r->error, error);
        else if (!r->async && value && raw) {
                int k = unpack_value(raw, size, &r->result);
                if (k >= 0)
                        r->has_result = true;
                else
                        (void) error_set(&r->error, k == -ENOMEM ? AGENTIX_E_OVERFLOW : AGENTIX_E_PROTOCOL, k,
                                         "cannot keep the result of call %s: %s", r->id, strerror(-k));
        }

        if (r->async && r->handlers.done)
                r->handlers.done(r, error ? NULL : value, error, r->userdata);

        log_debug("Call %s ended%s%s.", r->id, error ? ": " : "", error ? strna(error->message) : "");
        if (from_server)
                request_send_ack(r);
        if (table_ref)
                agentix_request_unref(r);
        agentix_request_unref(r);
}

void request_fail(agentix_request *r, const agentix_error *e) {
        request_finish(r, NULL, e, NULL, 0, false);
}

/* Tell the server to stop (now, or when the connection is back). */
static void request_send_cancel(agentix_request *r) {
        _cleanup_buffer_ Buffer b = BUFFER_NULL;

        if (!r->client || !r->sent || rpc_envelope_call_id(&b, r->id, strlen(r->id)) < 0)
                return;
        (void) client_emit(r->client, EV_CANCEL, buffer_data(&b), b.len, true);
}

static void request_fail_local(agentix_request *r, agentix_error_kind kind, int code, const char *type,
                               bool cancelled, const char *fmt, ...) _printf_(6, 7);
static void request_fail_local(agentix_request *r, agentix_error_kind kind, int code, const char *type,
                               bool cancelled, const char *fmt, ...) {
        agentix_error e = AGENTIX_ERROR_NULL;
        va_list ap;

        e.kind = kind;
        e.code = code;
        e.type = type ? strdup(type) : NULL;
        e.cancelled = cancelled;
        va_start(ap, fmt);
        if (vasprintf(&e.message, fmt, ap) < 0)
                e.message = NULL;
        va_end(ap);
        request_fail(r, &e);
        agentix_error_done(&e);
}

/* ---- what the server sends ------------------------------------------------------------------ */

static void request_queue_item(agentix_request *r, const uint8_t *raw, size_t size) {
        QueuedItem *q;
        int k;

        if (r->n_items >= REQUEST_MAX_ITEMS || (r->n_items > 0 && r->items_bytes + size > REQUEST_MAX_ITEM_BYTES)) {
                request_send_cancel(r);
                request_fail_local(r, AGENTIX_E_OVERFLOW, -ENOBUFS, NULL, false,
                                   "call %s has more unread items than the client keeps: read them with "
                                   "agentix_request_next() as they come, or use agentix_call_async()",
                                   r->id);
                return;
        }
        q = calloc(1, sizeof(*q));
        k = q ? unpack_value(raw, size, &q->value) : -ENOMEM;
        if (k < 0) {
                free(q);
                request_send_cancel(r);
                request_fail_local(r, AGENTIX_E_PROTOCOL, k, NULL, false, "cannot keep an item of call %s: %s",
                                   r->id, strerror(-k));
                return;
        }
        q->size = size;
        if (r->items_tail)
                r->items_tail->next = q;
        else
                r->items_head = q;
        r->items_tail = q;
        r->n_items++;
        r->items_bytes += size;
}

static bool is_result_unavailable(const msgpack_object *error) {
        return mp_str_eq(mp_map_get(error, "type"), RPC_ERR_RESULT_UNAVAILABLE);
}

void request_dispatch(agentix_request *r, const char *event, const msgpack_object *env, const uint8_t *raw,
                      size_t size) {
        const msgpack_object *v;

        if (r->done)
                return;

        if (streq(event, EV_IN_ACK)) {
                request_inbox_ack(r, env);
                return;
        }

        if (streq(event, EV_ITEM)) {
                /* The server has the call: a resume will find it, no need to keep its bytes. */
                request_release_envelope(r);
                if (r->shape == AGENTIX_CALL_UNARY)
                        return;
                request_inbox_item_seen(r);
                if (!r->async)
                        request_queue_item(r, raw, size);
                else if (r->handlers.item)
                        r->handlers.item(r, mp_map_get(env, "value") ?: &nil_object, r->userdata);
                return;
        }

        if (streq(event, EV_RESULT)) {
                request_finish(r, mp_map_get(env, "value") ?: &nil_object, NULL, raw, size, true);
                return;
        }
        if (streq(event, EV_END)) {
                request_finish(r, NULL, NULL, NULL, 0, true);
                return;
        }
        if (streq(event, EV_ERROR)) {
                agentix_error e = AGENTIX_ERROR_NULL;

                v = mp_map_get(env, "error");
                if (r->resuming && !r->resent && r->envelope.len > 0 && r->client && is_result_unavailable(v)) {
                        /* The server never saw this call: it was lost with the old connection.
                         * Send it now; a call_id runs at most once, so it cannot run twice. */
                        r->resuming = false;
                        r->resent = true;
                        if (client_emit(r->client, EV_CALL, buffer_data(&r->envelope), r->envelope.len, false) >= 0) {
                                log_debug("Call %s was lost in a reconnect; sent it again.", r->id);
                                /* Its inbox items went to a server that did not know the call. */
                                request_inbox_on_connected(r);
                                return;
                        }
                }
                (void) error_from_wire(&e, v);
                request_fail(r, &e);
                agentix_error_done(&e);
                return;
        }
        log_debug("Ignoring unknown event '%s' for call %s.", event, r->id);
}

void request_too_large(agentix_request *r, const char *event, size_t size) {
        bool terminal = !streq(event, EV_ITEM);

        if (r->done || !r->client)
                return;
        if (!terminal)
                request_send_cancel(r); /* a stream with a hole in it is of no use */
        request_fail_local(r, AGENTIX_E_MESSAGE_TOO_LARGE, -EMSGSIZE, RPC_ERR_TOO_LARGE, false,
                           "the server sent a message of %zu bytes for call %s, over this client's max_message of %zu "
                           "bytes (raise agentix_options.max_message)",
                           size, r->id, r->client->options.max_message);
        /* The server keeps a result until acked; this one can never be taken. */
        if (terminal)
                request_send_ack(r);
}

int request_on_connected(agentix_request *r) {
        int k;

        r->resuming = false;
        if (r->sent) {
                r->resuming = true;
                return 1;
        }
        k = client_emit(r->client, EV_CALL, buffer_data(&r->envelope), r->envelope.len, false);
        if (k < 0)
                return k;
        r->sent = true;
        return 0;
}

/* ---- starting calls ----------------------------------------------------------------------- */

static int on_deadline(sd_event_source *s, uint64_t usec, void *userdata) {
        agentix_request *r = userdata;
        agentix_client *c = r->client;

        r->deadline_timer = sd_event_source_disable_unref(r->deadline_timer);
        if (r->done || !c)
                return 0;
        client_enter(c);
        agentix_request_ref(r);
        request_send_cancel(r);
        request_fail_local(r, AGENTIX_E_DEADLINE_EXCEEDED, -ETIME, RPC_ERR_DEADLINE, true,
                           "call %s got no answer within its deadline of %llu ms (the server did not answer)", r->id,
                           (unsigned long long) r->deadline_ms);
        agentix_request_unref(r);
        client_leave(c);
        return 0;
}

static bool call_id_is_valid(const char *id) {
        size_t n = strlen(id);

        return n > 0 && n <= RPC_CALL_ID_MAX;
}

static int request_start(agentix_client *c, const char *callable, const agentix_args *a,
                         const agentix_call_options *o, const agentix_request_handlers *h, void *userdata, bool async,
                         agentix_request **ret, agentix_error *ret_error) {
        agentix_call_shape shape = o ? o->shape : AGENTIX_CALL_UNARY;
        agentix_request *r;
        size_t len;
        int k;

        if (!c)
                return error_set(ret_error, AGENTIX_E_INVALID, -EINVAL, "no client given");
        if (strempty(callable))
                return error_set(ret_error, AGENTIX_E_INVALID, -EINVAL, "callable must be \"module::function\"");
        if (!call_shape_name(shape))
                return error_set(ret_error, AGENTIX_E_INVALID, -EINVAL, "unknown call shape %d", (int) shape);
        if (a && a->args_size > 0 && !value_is_packed_array(a->args, a->args_size))
                return error_set(ret_error, AGENTIX_E_INVALID, -EINVAL, "args must be one packed msgpack array");
        if (a && a->kwargs_size > 0 && !value_is_packed_map(a->kwargs, a->kwargs_size))
                return error_set(ret_error, AGENTIX_E_INVALID, -EINVAL, "kwargs must be one packed msgpack map");
        if (o && o->call_id && !call_id_is_valid(o->call_id))
                return error_set(ret_error, AGENTIX_E_INVALID, -EINVAL, "call_id must have 1 to %d bytes",
                                 RPC_CALL_ID_MAX);
        if (c->freeing || c->closing || c->state == CLIENT_IDLE)
                return client_not_connected_error(c, ret_error);
        if (strmap_size(c->calls) >= CLIENT_MAX_CALLS)
                return error_set_typed(ret_error, AGENTIX_E_TOO_MANY_CALLS, -EAGAIN, RPC_ERR_TOO_MANY_CALLS,
                                       "too many calls in flight on this client (limit %u): wait for some to finish",
                                       CLIENT_MAX_CALLS);

        r = calloc(1, sizeof(*r));
        if (!r)
                return error_set(ret_error, AGENTIX_E_OVERFLOW, -ENOMEM, "out of memory");
        r->n_ref = 1;
        r->shape = shape;
        r->async = async;
        r->userdata = userdata;
        if (h)
                r->handlers = *h;
        r->deadline_ms = o ? o->deadline_ms : 0;
        if (o && o->call_id)
                strcpy(r->id, o->call_id);
        else {
                k = call_id_new(&c->call_ids, r->id);
                if (k < 0) {
                        free(r);
                        return error_set(ret_error, AGENTIX_E_INVALID, k, "cannot make a call_id: %s", strerror(-k));
                }
        }
        if (o && o->call_id)
                client_forget_ack(c, r->id);
        if (strmap_get(c->calls, r->id, strlen(r->id))) {
                k = error_set(ret_error, AGENTIX_E_INVALID, -EEXIST, "call_id %s is already in flight", r->id);
                free(r);
                return k;
        }

        k = call_envelope_pack(&r->envelope, r->id, callable, shape, a, r->deadline_ms);
        if (k < 0) {
                buffer_done(&r->envelope);
                free(r);
                return error_set(ret_error, AGENTIX_E_OVERFLOW, k, "out of memory");
        }
        len = r->envelope.len;
        if (len > c->options.max_message) {
                buffer_done(&r->envelope);
                free(r);
                return error_set_typed(ret_error, AGENTIX_E_MESSAGE_TOO_LARGE, -EMSGSIZE, RPC_ERR_TOO_LARGE,
                                       "the call takes %zu bytes, over the message limit of %zu bytes", len,
                                       c->options.max_message);
        }

        k = strmap_put(c->calls, r->id, strlen(r->id), r);
        if (k < 0) {
                buffer_done(&r->envelope);
                free(r);
                return error_set(ret_error, AGENTIX_E_OVERFLOW, k, "out of memory");
        }
        r->client = c;
        r->in_table = true;
        r->n_ref++; /* the table's */
        r->prev = c->requests_tail;
        if (c->requests_tail)
                c->requests_tail->next = r;
        else
                c->requests_head = r;
        c->requests_tail = r;
        client_account(c, (ssize_t) len);

        if (r->deadline_ms > 0) {
                uint64_t now;
                k = sd_event_now(c->event, CLOCK_MONOTONIC, &now);
                if (k >= 0)
                        k = sd_event_add_time(c->event, &r->deadline_timer, CLOCK_MONOTONIC,
                                              now + r->deadline_ms * 1000 + DEADLINE_GRACE_USEC, 0, on_deadline, r);
                if (k < 0)
                        goto fail;
        }

        if (client_is_connected(c)) {
                k = client_emit(c, EV_CALL, buffer_data(&r->envelope), len, false);
                if (k >= 0) {
                        r->sent = true;
                        /* Keep the bytes to send again if a drop loses them, within the budget. */
                        if (c->queued_bytes > CLIENT_MAX_QUEUED_BYTES)
                                request_release_envelope(r);
                } else if (k != -ENOTCONN)
                        goto fail;
        }
        if (!r->sent && c->queued_bytes > client_queue_limit(c)) {
                k = -ENOBUFS;
                goto fail;
        }

        if (ret)
                *ret = r;
        else
                r->n_ref--; /* the table keeps it until the end */
        return 0;

fail:
        if (k == -ENOBUFS && !r->sent && !client_is_connected(c))
                (void) error_set(ret_error, AGENTIX_E_OVERFLOW, k,
                                 "%s is not connected and the calls waiting for it take more than %zu MiB", c->url,
                                 client_queue_limit(c) / MIB);
        else if (k == -ENOBUFS)
                (void) error_set(ret_error, AGENTIX_E_OVERFLOW, k,
                                 "the send queue to %s is full: let the event loop run, then try again", c->url);
        else if (k == -EMSGSIZE)
                (void) error_set_typed(ret_error, AGENTIX_E_MESSAGE_TOO_LARGE, k, RPC_ERR_TOO_LARGE,
                                       "the call is larger than the message limit");
        else
                (void) error_set(ret_error, AGENTIX_E_CONNECTION, k, "cannot send the call to %s: %s", c->url,
                                 strerror(-k));
        request_release_envelope(r);
        request_free(r); /* nothing ran: no handler is called */
        return k;
}

AGENTIX_API int agentix_call_async(agentix_client *c, const char *callable, const agentix_args *args,
                                   const agentix_call_options *o, const agentix_request_handlers *h, void *userdata,
                                   agentix_request **ret) {
        return request_start(c, callable, args, o, h, userdata, true, ret, NULL);
}

AGENTIX_API int agentix_call_start(agentix_client *c, const char *callable, const agentix_args *args,
                                   const agentix_call_options *o, agentix_request **ret) {
        if (!ret)
                return -EINVAL;
        return request_start(c, callable, args, o, NULL, NULL, false, ret, NULL);
}

static bool request_done_cond(void *userdata) {
        return ((agentix_request *) userdata)->done;
}

static bool request_news_cond(void *userdata) {
        agentix_request *r = userdata;

        return r->done || r->items_head || !r->client;
}

AGENTIX_API int agentix_call(agentix_client *c, const char *callable, const agentix_args *args,
                             const agentix_call_options *o, msgpack_unpacked *ret_result, agentix_error *ret_error) {
        agentix_call_options opts = o ? *o : (agentix_call_options) {};
        agentix_request *r = NULL;
        int k;

        if (opts.shape != AGENTIX_CALL_UNARY)
                return error_set(ret_error, AGENTIX_E_INVALID, -EINVAL,
                                 "agentix_call() makes unary calls: start streams with agentix_call_start()");
        k = request_start(c, callable, args, &opts, NULL, NULL, false, &r, ret_error);
        if (k < 0)
                return k;

        k = client_run_until(c, request_done_cond, r, 0, ret_error);
        if (k >= 0) {
                if (r->error.kind != AGENTIX_E_NONE)
                        k = error_copy(ret_error, &r->error);
                else if (ret_result) {
                        if (r->has_result) {
                                *ret_result = r->result;
                                r->has_result = false;
                        } else
                                msgpack_unpacked_init(ret_result);
                }
        }
        agentix_request_unref(r);
        return k;
}

AGENTIX_API int agentix_request_next(agentix_request *r, msgpack_unpacked *ret_item, uint64_t timeout_usec,
                                     agentix_error *ret_error) {
        int k;

        if (!r)
                return error_set(ret_error, AGENTIX_E_INVALID, -EINVAL, "no request given");
        if (r->async)
                return error_set(ret_error, AGENTIX_E_INVALID, -EINVAL,
                                 "agentix_request_next() reads calls started with agentix_call_start()");
        for (;;) {
                QueuedItem *q = r->items_head;

                if (q) {
                        r->items_head = q->next;
                        if (!r->items_head)
                                r->items_tail = NULL;
                        r->n_items--;
                        r->items_bytes -= q->size;
                        if (ret_item)
                                *ret_item = q->value;
                        else
                                msgpack_unpacked_destroy(&q->value);
                        free(q);
                        return 1;
                }
                if (r->done) {
                        if (r->error.kind != AGENTIX_E_NONE)
                                return error_copy(ret_error, &r->error);
                        if (r->has_result) {
                                r->has_result = false;
                                if (ret_item)
                                        *ret_item = r->result;
                                else
                                        msgpack_unpacked_destroy(&r->result);
                                return 1;
                        }
                        return 0;
                }
                if (!r->client)
                        return error_set(ret_error, AGENTIX_E_CONNECTION, -ENOTCONN, "the client of call %s is gone",
                                         r->id);
                k = client_run_until(r->client, request_news_cond, r, timeout_usec, ret_error);
                if (k < 0)
                        return k;
        }
}

AGENTIX_API int agentix_request_wait(agentix_request *r, uint64_t timeout_usec) {
        if (!r)
                return -EINVAL;
        if (r->done)
                return 0;
        if (!r->client)
                return -ENOTCONN;
        return client_run_until(r->client, request_done_cond, r, timeout_usec, NULL);
}

/* ---- inbox and cancel --------------------------------------------------------------------- */

static int request_check_inbox(agentix_request *r) {
        if (!r)
                return -EINVAL;
        if (r->shape != AGENTIX_CALL_BIDI)
                return -EBADR; /* inbox items are for bidi calls only */
        if (r->done || !r->client)
                return -EPIPE;
        return 0;
}

static int request_send(agentix_request *r, const void *item, size_t item_size, bool urgent) {
        int k;

        k = request_check_inbox(r);
        if (k < 0)
                return k;
        if (r->inbox_closed)
                return -EPIPE;
        if (!item || item_size == 0 || mp_check(item, item_size) < 0)
                return -EINVAL;
        return request_inbox_send(r, item, item_size, urgent);
}

AGENTIX_API int agentix_request_send(agentix_request *r, const void *item, size_t item_size) {
        return request_send(r, item, item_size, false);
}

AGENTIX_API int agentix_request_send_urgent(agentix_request *r, const void *item, size_t item_size) {
        return request_send(r, item, item_size, true);
}

AGENTIX_API void agentix_request_set_writable_handler(agentix_request *r, agentix_writable_handler h,
                                                      void *userdata) {
        if (!r)
                return;
        r->writable = h;
        r->writable_userdata = userdata;
}

AGENTIX_API int agentix_request_close_inbox(agentix_request *r) {
        int k;

        k = request_check_inbox(r);
        if (k < 0)
                return k;
        if (r->inbox_closed)
                return 0;
        r->inbox_closed = true;
        return request_inbox_close(r);
}

AGENTIX_API int agentix_request_cancel(agentix_request *r) {
        agentix_client *c;

        if (!r)
                return -EINVAL;
        if (r->done)
                return 0;
        c = r->client;
        if (!c)
                return -ENOTCONN;
        if (r->cancel_requested && client_is_connected(c))
                return 0; /* the server's answer is on its way */
        r->cancel_requested = true;

        client_enter(c);
        agentix_request_ref(r);
        request_send_cancel(r);
        /* Connected: the server ends the call (Cancelled, or its result if that was first).
         * Otherwise end it here; the server learns it once the connection is back. */
        if (!r->sent)
                request_fail_local(r, AGENTIX_E_CANCELLED, -ECANCELED, RPC_ERR_CANCELLED, true,
                                   "call %s was cancelled before it was sent", r->id);
        else if (!client_is_connected(c))
                request_fail_local(r, AGENTIX_E_CANCELLED, -ECANCELED, RPC_ERR_CANCELLED, true,
                                   "call %s was cancelled while the connection was down", r->id);
        agentix_request_unref(r);
        client_leave(c);
        return 0;
}

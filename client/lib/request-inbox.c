/* SPDX-License-Identifier: MIT */
/* The inbox of a bidi call, with flow control. The worker holds a bounded number of items per
 * inbox and fails the call beyond that (InboxOverflow), so items go out only while the window
 * allows (INBOX_WINDOW_ITEMS unacknowledged); the server says how many the function has taken
 * (call:in_ack {call_id, taken}, a running total). Items beyond the window wait here, in a
 * bounded queue; past that a send says -EAGAIN (blocking use: waits) and the writable handler
 * tells when to go on.
 *
 * Sent items are kept until the function has taken them: after a reconnect they are sent again,
 * since the drop may have lost them, numbered (seq) so that the server drops the copies it has.
 * So nothing is lost or doubled across reconnects. The server expects seqs in order, so those
 * copies go before anything new, urgent or not. The end of the inbox (call:end_in) always goes
 * out behind every item, and again after a reconnect (the worker ignores a second one).
 *
 * A server older than flow control never acks; items then go out at once, as they always did
 * (INBOX_ACK_TIMEOUT_USEC says how that is noticed). */

#include "call-envelope.h"
#include "client-internal.h"
#include "error.h"
#include "log.h"

/* ---- queues --------------------------------------------------------------------------------- */

static void inbox_queue_push(InboxQueue *q, InboxMsg *m) {
        m->next = NULL;
        if (q->tail)
                q->tail->next = m;
        else
                q->head = m;
        q->tail = m;
        q->n++;
        q->bytes += m->size;
}

static void inbox_queue_push_front(InboxQueue *q, InboxMsg *m) {
        m->next = q->head;
        q->head = m;
        if (!q->tail)
                q->tail = m;
        q->n++;
        q->bytes += m->size;
}

/* Move all of `from` in front of `to`, keeping the order. */
static void inbox_queue_prepend(InboxQueue *to, InboxQueue *from) {
        if (!from->head)
                return;
        from->tail->next = to->head;
        to->head = from->head;
        if (!to->tail)
                to->tail = from->tail;
        to->n += from->n;
        to->bytes += from->bytes;
        *from = (InboxQueue) {};
}

static InboxMsg *inbox_queue_pop(InboxQueue *q) {
        InboxMsg *m = q->head;

        if (!m)
                return NULL;
        q->head = m->next;
        if (!q->head)
                q->tail = NULL;
        m->next = NULL;
        q->n--;
        q->bytes -= m->size;
        return m;
}

static void inbox_queue_clear(InboxQueue *q) {
        InboxMsg *m;

        while ((m = inbox_queue_pop(q)))
                free(m);
}

void request_inbox_clear(agentix_request *r) {
        inbox_queue_clear(&r->in_flight);
        inbox_queue_clear(&r->in_resend);
        inbox_queue_clear(&r->in_waiting);
        inbox_queue_clear(&r->in_urgent);
        r->ack_timer = sd_event_source_disable_unref(r->ack_timer);
        r->transport_full = false;
        r->want_writable = false;
}

/* The call:in envelope of one item, packed once, straight behind the InboxMsg header (the
 * buffer's headroom) so that the item is copied exactly once. */
static int inbox_msg_new(agentix_request *r, const void *item, size_t item_size, bool urgent, InboxMsg **ret) {
        _cleanup_buffer_ Buffer b = BUFFER_NULL;
        InboxMsg *m;
        int k;

        k = buffer_set_headroom(&b, offsetof(InboxMsg, data));
        if (k >= 0)
                k = buffer_reserve(&b, item_size + strlen(r->id) + 48);
        if (k >= 0)
                k = call_envelope_pack_item(&b, r->id, item, item_size, urgent);
        if (k < 0)
                return k;
        if (b.len > r->client->options.max_message)
                return -EMSGSIZE;

        m = (InboxMsg *) TAKE_PTR(b.mem);
        m->next = NULL;
        m->seq = 0;
        m->size = b.len;
        *ret = m;
        return 0;
}

/* ---- sending -------------------------------------------------------------------------------- */

/* Can the inbox go out now? The call itself must have gone out first. */
static bool inbox_can_send(agentix_request *r) {
        return r->client && !r->done && r->sent && client_is_connected(r->client);
}

static bool window_fits(const agentix_request *r, const InboxMsg *m, bool urgent) {
        if (r->in_unlimited)
                return true;
        if (r->in_flight.n >= INBOX_WINDOW_ITEMS - (urgent ? 0 : INBOX_URGENT_RESERVE))
                return false;
        /* Urgent items are small (INBOX_URGENT_MAX_BYTES) and few: the worker's 64 MiB per inbox
         * leave room for them beyond the byte window. */
        return urgent || r->in_flight.n == 0 || r->in_flight.bytes + m->size <= INBOX_WINDOW_BYTES;
}

static bool queue_has_room(const InboxQueue *q, size_t size, bool urgent) {
        if (urgent)
                return q->n < INBOX_URGENT_MAX;
        return q->n == 0 || (q->n < INBOX_QUEUE_ITEMS && q->bytes + size <= INBOX_QUEUE_BYTES);
}

static int on_ack_timeout(sd_event_source *s, uint64_t usec, void *userdata);

/* The window is full. A current server acks a call as soon as it accepts it, so a call with no
 * ack at all after a while is talking to an older server. */
static void inbox_watch_for_ack(agentix_request *r) {
        int k;

        if (r->in_acked || r->ack_timer || !r->client)
                return;
        k = sd_event_add_time_relative(r->client->event, &r->ack_timer, CLOCK_MONOTONIC, INBOX_ACK_TIMEOUT_USEC, 0,
                                       on_ack_timeout, r);
        if (k < 0)
                log_debug_errno(k, "Failed to watch call %s for its first call:in_ack: %m", r->id);
}

/* An item can never go out (e.g. larger than the server takes): the call cannot go on. */
static void inbox_fail(agentix_request *r, int k) {
        _cleanup_buffer_ Buffer b = BUFFER_NULL;
        agentix_error e = AGENTIX_ERROR_NULL;

        if (rpc_envelope_call_id(&b, r->id, strlen(r->id)) >= 0)
                (void) client_emit(r->client, EV_CANCEL, buffer_data(&b), b.len, true);
        if (k == -EMSGSIZE)
                (void) error_set_typed(&e, AGENTIX_E_MESSAGE_TOO_LARGE, k, "MessageTooLarge",
                                       "an inbox item of call %s is larger than the connection takes", r->id);
        else
                (void) error_set(&e, AGENTIX_E_CONNECTION, k, "cannot send an inbox item of call %s: %s", r->id,
                                 strerror(-k));
        request_fail(r, &e);
        agentix_error_done(&e);
}

/* Send one item now: 1 when it went (or the connection turned out to be gone: it stays in
 * flight, the reconnect sends it again), 0 when the connection's queue is full (the item is
 * not taken), <0 when it cannot go at all. */
static int inbox_emit(agentix_request *r, InboxMsg *m, bool fresh) {
        int k;

        if (fresh) {
                m->seq = r->in_next_seq;
                call_envelope_set_seq(m->data, m->size, m->seq);
        }
        k = client_emit(r->client, EV_CALL_IN, m->data, m->size, false);
        if (k == -ENOBUFS)
                return 0;
        if (k < 0 && k != -ENOTCONN)
                return k;
        if (fresh)
                r->in_next_seq++;
        if (r->in_unlimited)
                free(m);
        else
                inbox_queue_push(&r->in_flight, m);
        return 1;
}

/* The next item to send: copies for a new connection first (their seqs come before any new
 * one), then urgent items, then the rest; NULL when the window does not allow it. */
static InboxQueue *inbox_next_queue(agentix_request *r, bool *ret_fresh) {
        *ret_fresh = true;
        if (r->in_resend.head) {
                *ret_fresh = false;
                return &r->in_resend; /* they were within the window before */
        }
        if (r->in_urgent.head)
                return window_fits(r, r->in_urgent.head, true) ? &r->in_urgent : NULL;
        if (r->in_waiting.head)
                return window_fits(r, r->in_waiting.head, false) ? &r->in_waiting : NULL;
        return NULL;
}

static bool inbox_empty(const agentix_request *r) {
        return !r->in_resend.head && !r->in_urgent.head && !r->in_waiting.head;
}

/* Send what the window and the connection allow, then, behind the last item, the end. */
static void inbox_pump(agentix_request *r) {
        InboxQueue *q;
        bool fresh;
        int k;

        while (inbox_can_send(r) && (q = inbox_next_queue(r, &fresh))) {
                InboxMsg *m = inbox_queue_pop(q);

                k = inbox_emit(r, m, fresh);
                if (k == 0) {
                        inbox_queue_push_front(q, m);
                        r->transport_full = true; /* the client calls request_inbox_on_transport_writable() */
                        return;
                }
                if (k < 0) {
                        free(m);
                        inbox_fail(r, k);
                        return;
                }
        }
        if (!inbox_empty(r) && inbox_can_send(r))
                inbox_watch_for_ack(r); /* the window is full */

        if (r->end_in_waiting && !r->end_in_sent && inbox_empty(r) && inbox_can_send(r)) {
                _cleanup_buffer_ Buffer b = BUFFER_NULL;

                k = rpc_envelope_call_id(&b, r->id, strlen(r->id));
                if (k >= 0)
                        k = client_emit(r->client, EV_CALL_END_IN, buffer_data(&b), b.len, false);
                if (k == -ENOBUFS)
                        r->transport_full = true;
                else if (k < 0 && k != -ENOTCONN)
                        inbox_fail(r, k);
                else
                        r->end_in_sent = true; /* or lost with the connection: the reconnect sends it again */
        }
}

/* A send said -EAGAIN: once the item it had would fit, tell the caller to go on. */
static void inbox_notify_writable(agentix_request *r) {
        if (!r->want_writable || r->done)
                return;
        if (!queue_has_room(r->blocked_urgent ? &r->in_urgent : &r->in_waiting, r->blocked_size, r->blocked_urgent))
                return;
        r->want_writable = false;
        if (r->writable)
                r->writable(r, r->writable_userdata);
}

static void inbox_go_unlimited(agentix_request *r) {
        r->in_unlimited = true;
        r->ack_timer = sd_event_source_disable_unref(r->ack_timer);
        /* An older server cannot tell copies: what went out is never sent again. */
        inbox_queue_clear(&r->in_flight);
        inbox_queue_clear(&r->in_resend);
        inbox_pump(r);
        inbox_notify_writable(r);
}

void request_inbox_on_transport_writable(agentix_request *r) {
        if (!r->transport_full || r->done || !r->client)
                return;
        r->transport_full = false;
        inbox_pump(r);
        inbox_notify_writable(r);
}

static int on_ack_timeout(sd_event_source *s, uint64_t usec, void *userdata) {
        agentix_request *r = userdata;
        agentix_client *c = r->client;

        r->ack_timer = sd_event_source_disable_unref(r->ack_timer);
        /* Without a connection nothing is known yet: the next full window asks again. */
        if (r->in_acked || r->done || !c || !client_is_connected(c))
                return 0;
        log_debug("Call %s: no call:in_ack from %s within %u ms: an older server, sending the inbox without flow control.",
                  r->id, c->url, INBOX_ACK_TIMEOUT_USEC / 1000u);
        client_enter(c);
        agentix_request_ref(r);
        inbox_go_unlimited(r);
        agentix_request_unref(r);
        client_leave(c);
        return 0;
}

static bool inbox_room_cond(void *userdata) {
        agentix_request *r = userdata;

        return r->done || !r->client || r->in_unlimited ||
               queue_has_room(r->blocked_urgent ? &r->in_urgent : &r->in_waiting, r->blocked_size, r->blocked_urgent);
}

/* The queue is full: blocking use waits for room (running the loop), event-loop use (or a
 * blocking call from inside a handler) gets -EAGAIN and the writable handler later. */
static int inbox_wait_for_room(agentix_request *r, size_t size, bool urgent) {
        int k = -EAGAIN;

        r->blocked_size = size;
        r->blocked_urgent = urgent;
        if (!r->async) {
                k = client_run_until(r->client, inbox_room_cond, r, 0, NULL);
                if (k >= 0 && (r->done || !r->client))
                        return -EPIPE;
                if (k >= 0)
                        return 0;
                if (k != -EBUSY)
                        return k;
                k = -EAGAIN;
        }
        r->want_writable = true;
        return k;
}

int request_inbox_send(agentix_request *r, const void *item, size_t item_size, bool urgent) {
        InboxMsg *m;
        int k;

        if (urgent && item_size > INBOX_URGENT_MAX_BYTES)
                return -EMSGSIZE;
        k = inbox_msg_new(r, item, item_size, urgent, &m);
        if (k < 0)
                return k;
        if (!queue_has_room(urgent ? &r->in_urgent : &r->in_waiting, m->size, urgent)) {
                k = inbox_wait_for_room(r, m->size, urgent);
                if (k < 0) {
                        free(m);
                        return k;
                }
        }
        inbox_queue_push(urgent ? &r->in_urgent : &r->in_waiting, m);
        inbox_pump(r);
        return 0;
}

int request_inbox_close(agentix_request *r) {
        r->end_in_waiting = true;
        inbox_pump(r);
        return 0;
}

/* ---- what the server says ------------------------------------------------------------------- */

void request_inbox_ack(agentix_request *r, const msgpack_object *env) {
        const msgpack_object *taken = mp_map_get(env, "taken");

        if (!taken || taken->type != MSGPACK_OBJECT_POSITIVE_INTEGER) {
                log_debug("Ignoring a call:in_ack without taken for call %s.", r->id);
                return;
        }
        if (r->shape != AGENTIX_CALL_BIDI || r->in_unlimited)
                return; /* decided already: items went out without being kept */
        r->in_acked = true;
        r->ack_timer = sd_event_source_disable_unref(r->ack_timer);
        r->in_taken = MAX(r->in_taken, taken->via.u64);
        /* In seq order: what is in flight, then the copies not sent again yet. */
        while (r->in_flight.head && r->in_flight.head->seq < r->in_taken)
                free(inbox_queue_pop(&r->in_flight));
        while (!r->in_flight.head && r->in_resend.head && r->in_resend.head->seq < r->in_taken)
                free(inbox_queue_pop(&r->in_resend));
        inbox_pump(r);
        inbox_notify_writable(r);
}

void request_inbox_item_seen(agentix_request *r) {
        if (r->shape != AGENTIX_CALL_BIDI || r->in_acked || r->in_unlimited)
                return;
        log_debug("Call %s: an item came before any call:in_ack: an older server, sending the inbox without flow "
                  "control.",
                  r->id);
        inbox_go_unlimited(r);
}

void request_inbox_on_connected(agentix_request *r) {
        if (r->shape != AGENTIX_CALL_BIDI || r->done || !r->client)
                return;
        /* Whatever is in flight may have been lost with the old connection. */
        inbox_queue_prepend(&r->in_resend, &r->in_flight);
        r->end_in_sent = false;
        r->transport_full = false;
        inbox_pump(r);
        inbox_notify_writable(r);
}

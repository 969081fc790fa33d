/* SPDX-License-Identifier: MIT */
#pragma once

/* The inbox of a bidi call: a bounded queue of items (IN frames) between the worker's reader
 * thread and the call's thread, plus a "wait fd" that polls readable exactly while
 * inbox_next(…, 0) would not return -ETIMEDOUT: an item is queued, the inbox is closed, or
 * the call is cancelled or past its deadline. Level-triggered and race-free: every state
 * change that affects readiness updates the fd under the same lock.
 *
 * Each item owns a copy of its IN frame, so it outlives the reader's buffer. */

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include <msgpack.h>

#include "ready-fd.h"

/* Bounds per call: a producer faster than the function overflows the inbox and the call fails
 * (the worker never buffers without limit). One item is always admitted into an empty inbox,
 * however big (frames themselves are bounded by the frame limit). */
#define INBOX_MAX_ITEMS 64u
#define INBOX_MAX_BYTES (64u * 1024u * 1024u)
/* And across all inboxes of the process, so that many calls cannot add up to unbounded memory. */
#define INBOX_TOTAL_MAX_BYTES (512u * 1024u * 1024u)

/* Flow control: the inbox counts the items the function takes and reports them (see
 * inbox_set_taken_handler()), so that a client can keep at most INBOX_MAX_ITEMS items in flight
 * and never overflow it. Reports are coalesced — one per item would double the traffic of a
 * fast stream — but never held back while the function waits: a count is reported
 *  - before the function blocks or finds the inbox empty (it has caught up: everything it
 *    took is credit the producer may be waiting for), and
 *  - while it keeps taking from a full inbox, every INBOX_TAKEN_REPORT_ITEMS items or
 *    INBOX_TAKEN_REPORT_BYTES bytes (a quarter of the window libagentix keeps, so the producer
 *    refills the inbox while the function works through it). */
#define INBOX_TAKEN_REPORT_ITEMS (INBOX_MAX_ITEMS / 4u)
#define INBOX_TAKEN_REPORT_BYTES (4u * 1024u * 1024u)

/* Called on the function's thread without the inbox lock held: `n` more items were taken. */
typedef void (*inbox_taken_handler)(void *userdata, unsigned n);

typedef struct InboxItem {
        struct InboxItem *next;
        bool urgent;         /* IN {…, urgent: true}: goes ahead of the ordinary items waiting */
        msgpack_zone zone;
        msgpack_object item;
        const char *call_id; /* into bytes, not NUL-terminated */
        size_t call_id_len;
        size_t size;
        uint8_t bytes[];     /* the IN payload; item and call_id point into it */
} InboxItem;

/* Copy and decode an IN payload {call_id, item, urgent?}. -EBADMSG when it is not one. */
int inbox_item_new(const void *payload, size_t size, InboxItem **ret);
InboxItem *inbox_item_free(InboxItem *i);

typedef struct Inbox {
        pthread_mutex_t lock;
        pthread_cond_t cond;       /* CLOCK_MONOTONIC */
        InboxItem *head, **tail;
        InboxItem *current;        /* last item handed out; freed by the next inbox_next() */
        size_t n_items, n_bytes;
        bool closed;               /* END_IN seen (or the call has no inbox) */
        bool absent;               /* no inbox at all (unary, stream): the wait fd then only
                                    * reports cancellation and the deadline */
        bool cancelled;
        uint64_t deadline_usec;    /* CLOCK_MONOTONIC µs, 0: none */
        ReadyFd wait_fd;           /* what inbox_wait_fd() hands out; lazily created */
        inbox_taken_handler on_taken;  /* NULL: nobody wants to know */
        void *on_taken_userdata;
        unsigned n_taken;          /* items taken since the last report */
        size_t taken_bytes;        /* … and their bytes */
} Inbox;

int inbox_init(Inbox *ib, bool open, uint64_t deadline_usec);
void inbox_done(Inbox *ib);

/* Report taken items to `handler` (before the consumer starts). */
void inbox_set_taken_handler(Inbox *ib, inbox_taken_handler handler, void *userdata);

/* Bytes queued in all inboxes right now. */
size_t inbox_total_bytes(void);

/* Producer side (the reader thread). An urgent item (a signal, a resize) is queued behind the
 * urgent items waiting but ahead of the others, so the function sees it next even when a flood
 * of input waits. -ENOBUFS: the inbox (or the process-wide budget) is full (the item is not
 * taken); -EPIPE: already closed (item not taken). */
int inbox_push(Inbox *ib, InboxItem *item);
void inbox_close(Inbox *ib);
void inbox_cancel(Inbox *ib);

/* Consumer side (the call's thread). 1 + item, 0 closed and drained, -ETIMEDOUT, -ECANCELED
 * (cancelled or past the deadline: cancellation wins over queued items). Taken items are
 * reported from here, see INBOX_TAKEN_REPORT_ITEMS. */
int inbox_next(Inbox *ib, msgpack_object *ret_item, int timeout_ms);
/* Take the next item only if it is urgent (urgent items queue ahead of the others, so that
 * is the head): 1 + item, -ETIMEDOUT when there is none, -ECANCELED. Never waits. For a
 * consumer that cannot take ordinary items right now but must not hold up a signal. */
int inbox_next_urgent(Inbox *ib, msgpack_object *ret_item);
int inbox_wait_fd(Inbox *ib);

/* SPDX-License-Identifier: MIT */
#include <stdatomic.h>
#include <time.h>

#include "mp-check.h"
#include "envelope.h"
#include "inbox.h"

static _Atomic size_t total_bytes = 0;

size_t inbox_total_bytes(void) {
        return atomic_load(&total_bytes);
}

int inbox_item_new(const void *payload, size_t size, InboxItem **ret) {
        msgpack_object root;
        const msgpack_object *item, *urgent;
        InboxItem *i;
        size_t off = 0;

        i = malloc(sizeof(*i) + size);
        if (!i)
                return -ENOMEM;
        memcpy(i->bytes, payload, size);
        i->size = size;
        i->next = NULL;
        msgpack_zone_init(&i->zone, 256);

        if (mp_check((const uint8_t *) i->bytes, size) < 0 || msgpack_unpack((const char *) i->bytes, size, &off, &i->zone, &root) != MSGPACK_UNPACK_SUCCESS ||
            off != size || mp_map_get_str(&root, "call_id", &i->call_id, &i->call_id_len) < 0 ||
            !(item = mp_map_get(&root, "item"))) {
                inbox_item_free(i);
                return -EBADMSG;
        }
        i->item = *item;
        urgent = mp_map_get(&root, "urgent");
        i->urgent = urgent && urgent->type == MSGPACK_OBJECT_BOOLEAN && urgent->via.boolean;
        *ret = i;
        return 0;
}

InboxItem *inbox_item_free(InboxItem *i) {
        if (!i)
                return NULL;
        msgpack_zone_destroy(&i->zone);
        free(i);
        return NULL;
}

int inbox_init(Inbox *ib, bool open, uint64_t deadline_usec) {
        pthread_condattr_t attr;
        int r;

        *ib = (Inbox) {
                .closed = !open,
                .deadline_usec = deadline_usec,
                .wait_fd = READY_FD_NULL,
        };
        ib->tail = &ib->head;

        r = -pthread_condattr_init(&attr);
        if (r < 0)
                return r;
        r = -pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
        if (r == 0)
                r = -pthread_cond_init(&ib->cond, &attr);
        pthread_condattr_destroy(&attr);
        if (r < 0)
                return r;
        r = -pthread_mutex_init(&ib->lock, NULL);
        if (r < 0)
                pthread_cond_destroy(&ib->cond);
        return r;
}

void inbox_done(Inbox *ib) {
        while (ib->head) {
                InboxItem *i = ib->head;
                ib->head = i->next;
                atomic_fetch_sub(&total_bytes, i->size);
                inbox_item_free(i);
        }
        ib->current = inbox_item_free(ib->current);
        ready_fd_close(&ib->wait_fd);
        pthread_mutex_destroy(&ib->lock);
        pthread_cond_destroy(&ib->cond);
}

void inbox_set_taken_handler(Inbox *ib, inbox_taken_handler handler, void *userdata) {
        pthread_mutex_lock(&ib->lock);
        ib->on_taken = handler;
        ib->on_taken_userdata = userdata;
        pthread_mutex_unlock(&ib->lock);
}

/* With the lock held: report the items taken since the last report. The lock is dropped
 * meanwhile: the handler writes a frame and may block on a busy socket, and the reader thread
 * must still be able to push (or cancel) then. Callers look at the inbox again afterwards. */
static void report_taken_locked(Inbox *ib) {
        unsigned n = ib->n_taken;

        ib->n_taken = 0;
        ib->taken_bytes = 0;
        if (n == 0 || !ib->on_taken)
                return;
        pthread_mutex_unlock(&ib->lock);
        ib->on_taken(ib->on_taken_userdata, n);
        pthread_mutex_lock(&ib->lock);
}

static bool deadline_passed(const Inbox *ib) {
        return ib->deadline_usec > 0 && now_usec() >= ib->deadline_usec;
}

/* With the lock held: make the wait fd's readiness match. The deadline is the timer fd's
 * business, so it is not part of this. */
static void update_readiness(Inbox *ib) {
        ready_fd_set(&ib->wait_fd, ib->head || (ib->closed && !ib->absent) || ib->cancelled);
}

int inbox_push(Inbox *ib, InboxItem *item) {
        int r = 0;

        pthread_mutex_lock(&ib->lock);
        if (ib->closed)
                r = -EPIPE;
        else if (ib->n_items > 0 &&
                 (ib->n_items >= INBOX_MAX_ITEMS || ib->n_bytes + item->size > INBOX_MAX_BYTES))
                r = -ENOBUFS;
        else if (atomic_fetch_add(&total_bytes, item->size) + item->size > INBOX_TOTAL_MAX_BYTES) {
                atomic_fetch_sub(&total_bytes, item->size);
                r = -ENOBUFS;
        } else {
                InboxItem **at = &ib->head;

                /* Ordinary items go last, urgent ones behind the urgent ones at the front. */
                if (item->urgent)
                        while (*at && (*at)->urgent)
                                at = &(*at)->next;
                else
                        at = ib->tail;
                item->next = *at;
                *at = item;
                if (!item->next)
                        ib->tail = &item->next;
                ib->n_items++;
                ib->n_bytes += item->size;
                update_readiness(ib);
                pthread_cond_signal(&ib->cond);
        }
        pthread_mutex_unlock(&ib->lock);
        return r;
}

void inbox_close(Inbox *ib) {
        pthread_mutex_lock(&ib->lock);
        ib->closed = true;
        update_readiness(ib);
        pthread_cond_broadcast(&ib->cond);
        pthread_mutex_unlock(&ib->lock);
}

void inbox_cancel(Inbox *ib) {
        pthread_mutex_lock(&ib->lock);
        ib->cancelled = true;
        update_readiness(ib);
        pthread_cond_broadcast(&ib->cond);
        pthread_mutex_unlock(&ib->lock);
}

static struct timespec timespec_from_usec(uint64_t usec) {
        return (struct timespec) { .tv_sec = (time_t) (usec / 1000000u), .tv_nsec = (long) (usec % 1000000u) * 1000 };
}

/* With the lock held: hand out the head. */
static void take_head_locked(Inbox *ib, msgpack_object *ret_item) {
        InboxItem *i = ib->head;

        ib->head = i->next;
        if (!ib->head)
                ib->tail = &ib->head;
        ib->n_items--;
        ib->n_bytes -= i->size;
        atomic_fetch_sub(&total_bytes, i->size);
        ib->current = i;
        *ret_item = i->item;
        ib->n_taken++;
        ib->taken_bytes += i->size;
        update_readiness(ib);
}

/* With the lock held, after an item was taken: working through a full inbox, report in
 * batches, so the producer refills it meanwhile. */
static void maybe_report_taken_locked(Inbox *ib) {
        if (ib->n_taken >= INBOX_TAKEN_REPORT_ITEMS || ib->taken_bytes >= INBOX_TAKEN_REPORT_BYTES)
                report_taken_locked(ib);
}

int inbox_next_urgent(Inbox *ib, msgpack_object *ret_item) {
        int r = -ETIMEDOUT;

        pthread_mutex_lock(&ib->lock);
        ib->current = inbox_item_free(ib->current);
        if (ib->cancelled || deadline_passed(ib))
                r = -ECANCELED;
        else if (ib->head && ib->head->urgent) {
                take_head_locked(ib, ret_item);
                maybe_report_taken_locked(ib);
                r = 1;
        }
        pthread_mutex_unlock(&ib->lock);
        return r;
}

int inbox_next(Inbox *ib, msgpack_object *ret_item, int timeout_ms) {
        uint64_t until = 0; /* 0: wait forever */
        int r;

        if (timeout_ms > 0)
                until = now_usec() + (uint64_t) timeout_ms * 1000u;

        pthread_mutex_lock(&ib->lock);
        ib->current = inbox_item_free(ib->current);
        for (;;) {
                if (ib->cancelled || deadline_passed(ib)) {
                        r = -ECANCELED;
                        break;
                }
                if (ib->head) {
                        take_head_locked(ib, ret_item);
                        r = 1;
                        break;
                }
                if (ib->closed) {
                        r = 0;
                        break;
                }
                if (ib->n_taken > 0 && ib->on_taken) {
                        /* Caught up: the producer may be waiting for exactly this credit, so
                         * it goes out before we time out or sleep. */
                        report_taken_locked(ib);
                        continue;
                }
                if (timeout_ms == 0 || (until > 0 && now_usec() >= until)) {
                        r = -ETIMEDOUT;
                        break;
                }

                uint64_t wake = until;
                if (ib->deadline_usec > 0 && (wake == 0 || ib->deadline_usec < wake))
                        wake = ib->deadline_usec;
                if (wake == 0)
                        pthread_cond_wait(&ib->cond, &ib->lock);
                else {
                        struct timespec ts = timespec_from_usec(wake);
                        (void) pthread_cond_timedwait(&ib->cond, &ib->lock, &ts);
                }
        }
        if (r == 1)
                maybe_report_taken_locked(ib);
        pthread_mutex_unlock(&ib->lock);
        return r;
}

int inbox_wait_fd(Inbox *ib) {
        int r = 0;

        pthread_mutex_lock(&ib->lock);
        if (ib->wait_fd.fd < 0) {
                r = ready_fd_open(&ib->wait_fd, ib->deadline_usec);
                if (r >= 0)
                        update_readiness(ib);
        }
        if (r >= 0)
                r = ib->wait_fd.fd;
        pthread_mutex_unlock(&ib->lock);
        return r;
}

/* SPDX-License-Identifier: MIT */
/* The bidi inbox: order, bounds, close/cancel/deadline, and the wait fd's level-triggered
 * readiness, including under a concurrent producer (no lost wakeups). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <poll.h>
#include <pthread.h>

#include "buffer.h"
#include "envelope.h"
#include "inbox.h"

static InboxItem *make_item_full(int64_t value, size_t padding, bool urgent) {
        _cleanup_buffer_ Buffer b = {};
        msgpack_packer pk;
        InboxItem *i = NULL;

        mp_packer_init_buffer(&pk, &b);
        msgpack_pack_map(&pk, 2 + (padding > 0) + urgent);
        mp_pack_cstr(&pk, "call_id");
        mp_pack_cstr(&pk, "c1");
        mp_pack_cstr(&pk, "item");
        msgpack_pack_int64(&pk, value);
        if (urgent) {
                mp_pack_cstr(&pk, "urgent");
                msgpack_pack_true(&pk);
        }
        if (padding > 0) {
                mp_pack_cstr(&pk, "pad");
                msgpack_pack_bin(&pk, padding);
                assert_int_equal(buffer_reserve(&b, padding), 0);
                memset(buffer_data(&b) + b.len, 'x', padding);
                b.len += padding;
        }
        assert_int_equal(inbox_item_new(buffer_data(&b), b.len, &i), 0);
        /* The item must not point into b, which goes away now. */
        memset(buffer_data(&b), 0xff, b.len);
        return i;
}

static InboxItem *make_item(int64_t value, size_t padding) {
        return make_item_full(value, padding, false);
}

static bool readable(int fd) {
        struct pollfd p = { .fd = fd, .events = POLLIN };

        return poll(&p, 1, 0) == 1 && (p.revents & POLLIN);
}

static void test_item_decoding(void **state) {
        InboxItem *i = make_item(7, 0);
        static const uint8_t not_a_map[] = { 0x93, 1, 2, 3 };
        static const uint8_t no_item[] = { 0x81, 0xa7, 'c', 'a', 'l', 'l', '_', 'i', 'd', 0xa1, 'x' };
        InboxItem *bad = NULL;

        assert_int_equal(i->item.type, MSGPACK_OBJECT_POSITIVE_INTEGER);
        assert_int_equal(i->item.via.u64, 7);
        assert_int_equal(i->call_id_len, 2);
        assert_memory_equal(i->call_id, "c1", 2);
        inbox_item_free(i);

        assert_int_equal(inbox_item_new(not_a_map, sizeof(not_a_map), &bad), -EBADMSG);
        assert_int_equal(inbox_item_new(no_item, sizeof(no_item), &bad), -EBADMSG);
        assert_null(bad);
}

static void test_order_close_and_fd(void **state) {
        Inbox ib;
        msgpack_object o;
        int fd;

        assert_int_equal(inbox_init(&ib, true, 0), 0);
        fd = inbox_wait_fd(&ib);
        assert_true(fd >= 0);
        assert_int_equal(inbox_wait_fd(&ib), fd); /* the same fd every time */

        assert_false(readable(fd));
        assert_int_equal(inbox_next(&ib, &o, 0), -ETIMEDOUT);
        assert_int_equal(inbox_next(&ib, &o, 20), -ETIMEDOUT);

        for (int i = 0; i < 3; i++)
                assert_int_equal(inbox_push(&ib, make_item(i, 0)), 0);
        assert_true(readable(fd));
        assert_true(readable(fd)); /* level-triggered: polling does not consume readiness */

        for (int i = 0; i < 3; i++) {
                assert_int_equal(inbox_next(&ib, &o, 0), 1);
                assert_int_equal(o.via.u64, (uint64_t) i);
                assert_int_equal(readable(fd), i < 2);
        }
        assert_int_equal(inbox_next(&ib, &o, 0), -ETIMEDOUT);

        assert_int_equal(inbox_push(&ib, make_item(9, 0)), 0);
        inbox_close(&ib);
        assert_true(readable(fd));
        InboxItem *late = make_item(10, 0);
        assert_int_equal(inbox_push(&ib, late), -EPIPE);
        inbox_item_free(late);

        assert_int_equal(inbox_next(&ib, &o, 0), 1); /* queued items come before the end */
        assert_int_equal(o.via.u64, 9);
        assert_true(readable(fd));                   /* closed stays readable */
        assert_int_equal(inbox_next(&ib, &o, -1), 0);
        assert_int_equal(inbox_next(&ib, &o, 0), 0);
        inbox_done(&ib);
}

/* Urgent items go ahead of the ordinary ones waiting, in their own order. */
static void test_urgent_first(void **state) {
        static const int64_t expected[] = { 100, 101, 1, 2, 3, 4 };
        msgpack_object o;
        Inbox ib;

        assert_int_equal(inbox_init(&ib, true, 0), 0);
        assert_int_equal(inbox_push(&ib, make_item(1, 0)), 0);
        assert_int_equal(inbox_push(&ib, make_item(2, 0)), 0);
        assert_int_equal(inbox_push(&ib, make_item_full(100, 0, true)), 0);
        assert_int_equal(inbox_push(&ib, make_item(3, 0)), 0);
        assert_int_equal(inbox_push(&ib, make_item_full(101, 0, true)), 0);
        assert_int_equal(inbox_push(&ib, make_item(4, 0)), 0); /* the tail is still right */
        for (size_t i = 0; i < ELEMENTSOF(expected); i++) {
                assert_int_equal(inbox_next(&ib, &o, 0), 1);
                assert_int_equal(o.via.i64, expected[i]);
        }
        /* Into an empty inbox, then behind it. */
        assert_int_equal(inbox_push(&ib, make_item_full(102, 0, true)), 0);
        assert_int_equal(inbox_push(&ib, make_item(5, 0)), 0);
        assert_int_equal(inbox_next(&ib, &o, 0), 1);
        assert_int_equal(o.via.i64, 102);
        assert_int_equal(inbox_next(&ib, &o, 0), 1);
        assert_int_equal(o.via.i64, 5);
        assert_int_equal(inbox_next(&ib, &o, 0), -ETIMEDOUT);
        inbox_done(&ib);
}

/* A consumer that cannot take ordinary items (its own buffer is full) takes the urgent ones
 * waiting ahead of them, and only those. */
static void test_next_urgent(void **state) {
        msgpack_object o;
        Inbox ib;

        assert_int_equal(inbox_init(&ib, true, 0), 0);
        assert_int_equal(inbox_next_urgent(&ib, &o), -ETIMEDOUT); /* empty */
        assert_int_equal(inbox_push(&ib, make_item(1, 0)), 0);
        assert_int_equal(inbox_push(&ib, make_item(2, 0)), 0);
        assert_int_equal(inbox_next_urgent(&ib, &o), -ETIMEDOUT); /* only ordinary items */
        assert_int_equal(inbox_push(&ib, make_item_full(100, 0, true)), 0);
        assert_int_equal(inbox_push(&ib, make_item_full(101, 0, true)), 0);
        assert_int_equal(inbox_next_urgent(&ib, &o), 1);
        assert_int_equal(o.via.i64, 100);
        assert_int_equal(inbox_next_urgent(&ib, &o), 1);
        assert_int_equal(o.via.i64, 101);
        assert_int_equal(inbox_next_urgent(&ib, &o), -ETIMEDOUT);
        /* The ordinary ones are still there, in order. */
        assert_int_equal(inbox_next(&ib, &o, 0), 1);
        assert_int_equal(o.via.i64, 1);
        assert_int_equal(inbox_next(&ib, &o, 0), 1);
        assert_int_equal(o.via.i64, 2);
        assert_int_equal(inbox_push(&ib, make_item_full(102, 0, true)), 0);
        inbox_cancel(&ib);
        assert_int_equal(inbox_next_urgent(&ib, &o), -ECANCELED); /* cancellation wins */
        inbox_done(&ib);
}

typedef struct Reports {
        unsigned n;
        unsigned counts[16];
} Reports;

static void on_taken(void *userdata, unsigned n) {
        Reports *r = userdata;

        assert_true(r->n < ELEMENTSOF(r->counts));
        r->counts[r->n++] = n;
}

/* Taken items are reported in batches while the consumer works through a full inbox (by count,
 * or by bytes for big items), and the rest once it finds the inbox empty; not per item. */
static void test_taken_reports(void **state) {
        Reports rep = {};
        msgpack_object o;
        Inbox ib;

        assert_int_equal(inbox_init(&ib, true, 0), 0);
        inbox_set_taken_handler(&ib, on_taken, &rep);
        for (int i = 0; i < 40; i++)
                assert_int_equal(inbox_push(&ib, make_item(i, 0)), 0);
        for (int i = 0; i < 40; i++)
                assert_int_equal(inbox_next(&ib, &o, 0), 1);
        assert_int_equal(rep.n, 2);
        assert_int_equal(rep.counts[0], INBOX_TAKEN_REPORT_ITEMS);
        assert_int_equal(rep.counts[1], INBOX_TAKEN_REPORT_ITEMS);
        /* Caught up: the rest goes before -ETIMEDOUT, and only once. */
        assert_int_equal(inbox_next(&ib, &o, 0), -ETIMEDOUT);
        assert_int_equal(rep.n, 3);
        assert_int_equal(rep.counts[2], 40 - 2 * INBOX_TAKEN_REPORT_ITEMS);
        assert_int_equal(inbox_next(&ib, &o, 20), -ETIMEDOUT);
        assert_int_equal(rep.n, 3);

        /* Big items: by bytes. */
        for (int i = 0; i < 3; i++)
                assert_int_equal(inbox_push(&ib, make_item(i, INBOX_TAKEN_REPORT_BYTES / 2)), 0);
        assert_int_equal(inbox_next(&ib, &o, 0), 1);
        assert_int_equal(rep.n, 3);
        assert_int_equal(inbox_next(&ib, &o, 0), 1);
        assert_int_equal(rep.n, 4);
        assert_int_equal(rep.counts[3], 2);

        /* The end needs no credit: a closed, drained inbox reports nothing more. */
        inbox_close(&ib);
        assert_int_equal(inbox_next(&ib, &o, 0), 1);
        assert_int_equal(inbox_next(&ib, &o, 0), 0);
        assert_int_equal(rep.n, 4);
        inbox_done(&ib);
}

static void test_cancel(void **state) {
        Inbox ib;
        msgpack_object o;
        int fd;

        assert_int_equal(inbox_init(&ib, true, 0), 0);
        assert_int_equal(inbox_push(&ib, make_item(1, 0)), 0);
        inbox_cancel(&ib);
        fd = inbox_wait_fd(&ib); /* created after the fact: must start readable */
        assert_true(fd >= 0);
        assert_true(readable(fd));
        assert_int_equal(inbox_next(&ib, &o, -1), -ECANCELED); /* cancellation wins over items */
        assert_true(readable(fd));
        inbox_done(&ib); /* frees the item still queued */
}

static void test_closed_from_start(void **state) {
        Inbox ib;
        msgpack_object o;

        /* Unary and stream calls have no inbox: it reads as closed. */
        assert_int_equal(inbox_init(&ib, false, 0), 0);
        assert_true(readable(inbox_wait_fd(&ib)));
        assert_int_equal(inbox_next(&ib, &o, -1), 0);
        inbox_done(&ib);
}

/* A call with no inbox at all (unary, stream): its wait fd reports cancellation only. */
static void test_absent_inbox_fd_means_cancel(void **state) {
        msgpack_object item;
        Inbox ib;
        int fd;

        assert_int_equal(inbox_init(&ib, false, 0), 0);
        ib.absent = true;
        fd = inbox_wait_fd(&ib);
        assert_true(fd >= 0);
        assert_false(readable(fd));
        assert_int_equal(inbox_next(&ib, &item, 0), 0);
        assert_false(readable(fd));
        inbox_cancel(&ib);
        assert_true(readable(fd));
        inbox_done(&ib);
}

static void test_deadline(void **state) {
        Inbox ib;
        msgpack_object o;
        struct pollfd p;
        unsigned long long start = now_usec();

        assert_int_equal(inbox_init(&ib, true, start + 100 * 1000), 0);
        p = (struct pollfd) { .fd = inbox_wait_fd(&ib), .events = POLLIN };
        assert_true(p.fd >= 0);
        assert_false(readable(p.fd));
        /* Nobody writes to it: the kernel makes it readable at the deadline. */
        assert_int_equal(poll(&p, 1, 5000), 1);
        assert_true(now_usec() - start >= 95 * 1000);
        assert_int_equal(inbox_next(&ib, &o, 0), -ECANCELED);
        inbox_done(&ib);

        /* inbox_next(-1) wakes up at the deadline too. */
        start = now_usec();
        assert_int_equal(inbox_init(&ib, true, start + 50 * 1000), 0);
        assert_int_equal(inbox_next(&ib, &o, -1), -ECANCELED);
        assert_true(now_usec() - start >= 45 * 1000);
        assert_true(now_usec() - start < 2000 * 1000);
        inbox_done(&ib);
}

static void test_bounds(void **state) {
        Inbox ib;
        msgpack_object o;
        InboxItem *extra;

        assert_int_equal(inbox_init(&ib, true, 0), 0);
        for (unsigned i = 0; i < INBOX_MAX_ITEMS; i++)
                assert_int_equal(inbox_push(&ib, make_item(i, 0)), 0);
        extra = make_item(99, 0);
        assert_int_equal(inbox_push(&ib, extra), -ENOBUFS);
        assert_int_equal(inbox_next(&ib, &o, 0), 1);
        assert_int_equal(inbox_push(&ib, extra), 0); /* room again */
        inbox_done(&ib);

        /* The byte budget: one big item always fits into an empty inbox, a second does not. */
        assert_int_equal(inbox_init(&ib, true, 0), 0);
        assert_int_equal(inbox_push(&ib, make_item(1, INBOX_MAX_BYTES - 1024)), 0);
        extra = make_item(2, 4096);
        assert_int_equal(inbox_push(&ib, extra), -ENOBUFS);
        inbox_item_free(extra);
        inbox_done(&ib);
        assert_int_equal(inbox_total_bytes(), 0);

        /* The process-wide budget: many inboxes, each within its own bounds, cannot add up to
         * more than INBOX_TOTAL_MAX_BYTES. */
        enum { N = INBOX_TOTAL_MAX_BYTES / (INBOX_MAX_BYTES / 2) + 2 };
        Inbox many[N];
        unsigned accepted = 0;
        for (unsigned i = 0; i < N; i++) {
                InboxItem *item = make_item(i, INBOX_MAX_BYTES / 2);

                assert_int_equal(inbox_init(&many[i], true, 0), 0);
                if (inbox_push(&many[i], item) == 0)
                        accepted++;
                else
                        inbox_item_free(item);
        }
        assert_true(accepted < N);
        assert_true(inbox_total_bytes() <= INBOX_TOTAL_MAX_BYTES);
        /* Reading frees budget. */
        assert_int_equal(inbox_next(&many[0], &o, 0), 1);
        extra = make_item(1, 1024);
        assert_int_equal(inbox_push(&many[N - 1], extra), 0);
        for (unsigned i = 0; i < N; i++)
                inbox_done(&many[i]);
        assert_int_equal(inbox_total_bytes(), 0);
}

typedef struct Producer {
        Inbox *ib;
        unsigned n;
} Producer;

static void *produce(void *arg) {
        Producer *p = arg;

        for (unsigned i = 0; i < p->n; i++) {
                InboxItem *item = make_item(i, 0);
                int r;

                /* Back off while full, as a server with flow control would. */
                while ((r = inbox_push(p->ib, item)) == -ENOBUFS)
                        (void) usleep(50);
                assert_int_equal(r, 0);
        }
        inbox_close(p->ib);
        return NULL;
}

static void test_concurrent_no_lost_wakeup(void **state) {
        Inbox ib;
        Producer p = { .ib = &ib, .n = 20000 };
        pthread_t t;
        uint64_t expected = 0;
        int fd;

        assert_int_equal(inbox_init(&ib, true, 0), 0);
        fd = inbox_wait_fd(&ib);
        assert_int_equal(pthread_create(&t, NULL, produce, &p), 0);

        for (;;) {
                struct pollfd pfd = { .fd = fd, .events = POLLIN };
                msgpack_object o;
                int r = inbox_next(&ib, &o, 0);

                if (r == -ETIMEDOUT) {
                        /* A lost wakeup would hang here: the timeout turns it into a failure. */
                        assert_int_equal(poll(&pfd, 1, 10000), 1);
                        continue;
                }
                if (r == 0)
                        break;
                assert_int_equal(r, 1);
                assert_int_equal(o.via.u64, expected);
                expected++;
        }
        assert_int_equal(expected, p.n);
        pthread_join(t, NULL);
        inbox_done(&ib);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_item_decoding),
                cmocka_unit_test(test_order_close_and_fd),
                cmocka_unit_test(test_urgent_first),
                cmocka_unit_test(test_next_urgent),
                cmocka_unit_test(test_taken_reports),
                cmocka_unit_test(test_cancel),
                cmocka_unit_test(test_closed_from_start),
                cmocka_unit_test(test_absent_inbox_fd_means_cancel),
                cmocka_unit_test(test_deadline),
                cmocka_unit_test(test_bounds),
                cmocka_unit_test(test_concurrent_no_lost_wakeup),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}

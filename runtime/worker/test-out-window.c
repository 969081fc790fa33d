/* SPDX-License-Identifier: MIT */
/* The output window of a stream/bidi call: what waits and what does not, credit, stop and the
 * deadline, and the fd's readiness following all of them. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>

#include "macro.h"
#include "out-window.h"

static bool readable(int fd) {
        struct pollfd p = { .fd = fd, .events = POLLIN };

        return poll(&p, 1, 0) == 1 && (p.revents & POLLIN);
}

static void test_no_window(void **state) {
        OutWindow w;

        /* Unary calls: size 0, nothing counted, never a wait. */
        assert_int_equal(out_window_init(&w, 0, 0), 0);
        for (int i = 0; i < 4; i++)
                assert_int_equal(out_window_reserve(&w, 1u << 30, true), 0);
        assert_true(out_window_ready(&w));
        assert_true(readable(out_window_fd(&w)));
        out_window_done(&w);
}

static void test_reserve_and_credit(void **state) {
        OutWindow w;
        int fd;

        assert_int_equal(out_window_init(&w, 100, 0), 0);
        fd = out_window_fd(&w);
        assert_true(fd >= 0);
        assert_int_equal(out_window_fd(&w), fd); /* the same fd every time */
        assert_true(readable(fd));

        assert_int_equal(out_window_reserve(&w, 60, true), 0);
        assert_true(out_window_ready(&w));
        /* One item may overshoot: it is admitted while less than the window is in flight. */
        assert_int_equal(out_window_reserve(&w, 60, true), 0);
        assert_false(out_window_ready(&w));
        assert_false(readable(fd));
        /* Without waiting it is counted anyway (the caller paces itself). */
        assert_int_equal(out_window_reserve(&w, 10, false), 0);
        assert_int_equal(w.in_flight, 130);

        out_window_credit(&w, 30);
        assert_false(out_window_ready(&w)); /* 100: still full */
        out_window_credit(&w, 1);
        assert_true(out_window_ready(&w));
        assert_true(readable(fd));

        /* More credit than was sent cannot wrap the count. */
        out_window_credit(&w, 1000);
        assert_int_equal(w.in_flight, 0);
        assert_true(readable(fd));
        out_window_done(&w);
}

typedef struct Waiter {
        OutWindow *w;
        _Atomic int result; /* 1: still waiting */
} Waiter;

static void *wait_thread(void *userdata) {
        Waiter *x = userdata;

        atomic_store(&x->result, out_window_reserve(x->w, 10, true));
        return NULL;
}

static bool wait_done(Waiter *x, int ms) {
        for (int i = 0; i < ms; i++) {
                if (atomic_load(&x->result) != 1)
                        return true;
                usleep(1000);
        }
        return atomic_load(&x->result) != 1;
}

static void test_waits_for_credit_and_stop(void **state) {
        OutWindow w;
        pthread_t t;
        Waiter x = { .w = &w, .result = 1 };

        assert_int_equal(out_window_init(&w, 100, 0), 0);
        assert_int_equal(out_window_reserve(&w, 100, true), 0);

        assert_int_equal(pthread_create(&t, NULL, wait_thread, &x), 0);
        assert_false(wait_done(&x, 100)); /* full: it waits */
        out_window_credit(&w, 50);
        assert_true(wait_done(&x, 5000));
        assert_int_equal(atomic_load(&x.result), 0);
        assert_int_equal(pthread_join(t, NULL), 0);
        assert_int_equal(w.in_flight, 60);

        /* Full again; stop wakes the waiter with -ECANCELED and nothing is counted. */
        assert_int_equal(out_window_reserve(&w, 40, false), 0);
        atomic_store(&x.result, 1);
        assert_int_equal(pthread_create(&t, NULL, wait_thread, &x), 0);
        assert_false(wait_done(&x, 100));
        out_window_stop(&w);
        assert_true(wait_done(&x, 5000));
        assert_int_equal(atomic_load(&x.result), -ECANCELED);
        assert_int_equal(pthread_join(t, NULL), 0);
        assert_int_equal(w.in_flight, 100);
        /* Stopped: ready for good, so a function polling the fd wakes up and sees why. */
        assert_true(out_window_ready(&w));
        assert_true(readable(out_window_fd(&w)));
        assert_int_equal(out_window_reserve(&w, 1, true), -ECANCELED);
        out_window_done(&w);
}

static void test_deadline(void **state) {
        unsigned long long t0 = now_usec();
        OutWindow w;
        int fd;

        assert_int_equal(out_window_init(&w, 100, t0 + 200 * 1000), 0);
        assert_int_equal(out_window_reserve(&w, 100, true), 0);
        fd = out_window_fd(&w);
        assert_false(readable(fd));
        /* The wait ends at the deadline; the fd turns readable then, with nobody writing. */
        assert_int_equal(out_window_reserve(&w, 1, true), -ECANCELED);
        assert_true(now_usec() - t0 >= 190 * 1000);
        assert_true(now_usec() - t0 < 2000 * 1000);
        assert_true(readable(fd));
        out_window_done(&w);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_no_window),
                cmocka_unit_test(test_reserve_and_credit),
                cmocka_unit_test(test_waits_for_credit_and_stop),
                cmocka_unit_test(test_deadline),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}

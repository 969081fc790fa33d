/* SPDX-License-Identifier: MIT */
/* uv-event: work uv has due right now runs at once with uv_event_set_reruns(), bounded by
 * its maximum, and otherwise on the next sd-event iteration (through the timer). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "uv-event.h"

typedef struct Idle {
        uv_idle_t handle;
        unsigned calls, stop_after; /* 0: never stops */
} Idle;

static void on_idle(uv_idle_t *h) {
        Idle *i = h->data;

        if (++i->calls == i->stop_after)
                uv_idle_stop(h);
}

/* One uv_event_run() with an idle handle (uv then has work due at once, as after every lws
 * socket event); returns how often the idle callback ran. */
static unsigned run_once(unsigned reruns, unsigned stop_after, unsigned *ret_later) {
        sd_event *e = NULL;
        UvEvent *u = NULL;
        Idle i = { .stop_after = stop_after };
        unsigned now;

        assert_int_equal(sd_event_new(&e), 0);
        assert_int_equal(uv_event_new(e, &u), 0);
        uv_event_set_reruns(u, reruns);
        assert_int_equal(uv_idle_init(uv_event_loop(u), &i.handle), 0);
        i.handle.data = &i;
        assert_int_equal(uv_idle_start(&i.handle, on_idle), 0);

        uv_event_run(u);
        now = i.calls;
        /* What is left runs from the loop. */
        for (unsigned k = 0; k < 10 && uv_is_active((uv_handle_t *) &i.handle); k++)
                assert_true(sd_event_run(e, 100 * 1000) >= 0);
        *ret_later = i.calls - now;

        uv_close((uv_handle_t *) &i.handle, NULL);
        u = uv_event_free(u);
        sd_event_unref(e);
        return now;
}

static void test_no_reruns(void **state) {
        unsigned later;

        /* Off by default: one uv_run(); the rest comes from the sd-event timer. */
        assert_int_equal(run_once(0, 2, &later), 1);
        assert_int_equal(later, 1);
}

static void test_reruns(void **state) {
        unsigned later;

        /* Runs again while work is due, and stops when none is. */
        assert_int_equal(run_once(3, 2, &later), 2);
        assert_int_equal(later, 0);
        /* Bounded: at most 1 + max runs at once. */
        assert_int_equal(run_once(3, 100, &later), 4);
        assert_true(later > 0);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_no_reruns),
                cmocka_unit_test(test_reruns),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}

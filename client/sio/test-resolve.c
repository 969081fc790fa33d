/* SPDX-License-Identifier: MIT */
/* Name lookups on their own thread (resolve.c): literals and names answered from the loop,
 * never inside resolve_start(); a failed lookup reports its EAI_* code; a query freed early
 * (literal or name) never calls its handler and leaves nothing behind (LeakSanitizer checks
 * at exit, after the lookup threads had time to end). */
#include <arpa/inet.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "macro.h"
#include "resolve.h"

typedef struct Answer {
        unsigned calls;
        int error;
        size_t n_addresses;
        bool has_v4_loopback, has_v6_loopback;
        ResolveQuery *free_in_handler;
} Answer;

static void on_answer(int error, const struct addrinfo *ai, void *userdata) {
        Answer *a = userdata;

        a->calls++;
        a->error = error;
        if (error == 0)
                assert_non_null(ai);
        else
                assert_null(ai);
        for (; ai; ai = ai->ai_next) {
                a->n_addresses++;
                assert_int_equal(ai->ai_socktype, SOCK_STREAM);
                if (ai->ai_family == AF_INET) {
                        const struct sockaddr_in *sin = (const struct sockaddr_in *) ai->ai_addr;

                        assert_int_equal(ai->ai_addrlen, sizeof(*sin));
                        if (sin->sin_addr.s_addr == htonl(INADDR_LOOPBACK))
                                a->has_v4_loopback = true;
                } else if (ai->ai_family == AF_INET6) {
                        const struct sockaddr_in6 *sin6 = (const struct sockaddr_in6 *) ai->ai_addr;

                        assert_int_equal(ai->ai_addrlen, sizeof(*sin6));
                        if (IN6_IS_ADDR_LOOPBACK(&sin6->sin6_addr))
                                a->has_v6_loopback = true;
                } else
                        fail_msg("unexpected address family %d", ai->ai_family);
        }
        /* as a transport does: done with the query in its own handler */
        if (a->free_in_handler)
                a->free_in_handler = resolve_query_free(a->free_in_handler);
}

static uint64_t mono_usec(void) {
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000000u + (uint64_t) ts.tv_nsec / 1000u;
}

/* Run the loop until every answer came, or `usec` passed. */
static void run_until(sd_event *e, Answer *answers, size_t n, uint64_t usec) {
        uint64_t deadline = mono_usec() + usec;

        for (;;) {
                bool all = true;

                for (size_t i = 0; i < n; i++)
                        all = all && answers[i].calls > 0;
                if (all || mono_usec() >= deadline)
                        return;
                assert_true(sd_event_run(e, 50 * 1000) >= 0);
        }
}

/* Run the loop for `usec` whatever happens. */
static void run_for(sd_event *e, uint64_t usec) {
        uint64_t deadline = mono_usec() + usec;

        while (mono_usec() < deadline)
                assert_true(sd_event_run(e, 20 * 1000) >= 0);
}

static void test_literals(void **state) {
        static const char *const hosts[] = { "127.0.0.1", "::1" };
        sd_event *e = NULL;

        assert_int_equal(sd_event_new(&e), 0);
        for (size_t i = 0; i < ELEMENTSOF(hosts); i++) {
                Answer a = {};
                ResolveQuery *q = NULL;

                assert_int_equal(resolve_start(e, hosts[i], on_answer, &a, &q), 0);
                assert_non_null(q);
                /* from the loop, not from inside resolve_start() */
                assert_int_equal(a.calls, 0);
                run_until(e, &a, 1, 5 * 1000 * 1000);
                assert_int_equal(a.calls, 1);
                assert_int_equal(a.error, 0);
                assert_int_equal(a.n_addresses, 1);
                assert_true(i == 0 ? a.has_v4_loopback : a.has_v6_loopback);
                /* once only, and the loop is quiet after it (no source left firing) */
                assert_int_equal(sd_event_run(e, 20 * 1000), 0);
                run_for(e, 50 * 1000);
                assert_int_equal(a.calls, 1);
                resolve_query_free(q);
        }
        sd_event_unref(e);
}

static void test_names(void **state) {
        sd_event *e = NULL;
        Answer a[4] = {};
        ResolveQuery *q[4] = {};

        assert_int_equal(sd_event_new(&e), 0);
        /* several at once, each answered to its own userdata */
        for (size_t i = 0; i < ELEMENTSOF(q); i++) {
                assert_int_equal(resolve_start(e, "localhost", on_answer, &a[i], &q[i]), 0);
                assert_int_equal(a[i].calls, 0);
        }
        run_until(e, a, ELEMENTSOF(a), 30 * 1000 * 1000);
        assert_int_equal(sd_event_run(e, 20 * 1000), 0);
        for (size_t i = 0; i < ELEMENTSOF(q); i++) {
                assert_int_equal(a[i].calls, 1);
                assert_int_equal(a[i].error, 0);
                assert_true(a[i].n_addresses >= 1);
                assert_true(a[i].has_v4_loopback || a[i].has_v6_loopback);
                resolve_query_free(q[i]);
        }
        sd_event_unref(e);
}

static void test_free_in_handler(void **state) {
        static const char *const hosts[] = { "127.0.0.1", "localhost" };
        sd_event *e = NULL;

        assert_int_equal(sd_event_new(&e), 0);
        for (size_t i = 0; i < ELEMENTSOF(hosts); i++) {
                Answer a = {};
                ResolveQuery *q = NULL;

                assert_int_equal(resolve_start(e, hosts[i], on_answer, &a, &q), 0);
                a.free_in_handler = q;
                run_until(e, &a, 1, 30 * 1000 * 1000);
                assert_int_equal(a.calls, 1);
                assert_null(a.free_in_handler);
                run_for(e, 20 * 1000);
                assert_int_equal(a.calls, 1);
        }
        sd_event_unref(e);
}

static void test_unresolvable(void **state) {
        static const char *const hosts[] = { "nonexistent.invalid", "", "300.1.2.3.invalid" };
        sd_event *e = NULL;

        assert_int_equal(sd_event_new(&e), 0);
        for (size_t i = 0; i < ELEMENTSOF(hosts); i++) {
                Answer a = {};
                ResolveQuery *q = NULL;

                print_message("host \"%s\"\n", hosts[i]);
                assert_int_equal(resolve_start(e, hosts[i], on_answer, &a, &q), 0);
                assert_int_equal(a.calls, 0);
                run_until(e, &a, 1, 60 * 1000 * 1000);
                assert_int_equal(a.calls, 1);
                /* an EAI_* code: negative, and one gai_strerror() knows */
                assert_true(a.error < 0);
                assert_non_null(gai_strerror(a.error));
                assert_int_equal(a.n_addresses, 0);
                resolve_query_free(q);
        }
        sd_event_unref(e);
}

static void test_free_early(void **state) {
        static const char *const hosts[] = { "127.0.0.1", "localhost", "nonexistent.invalid", "::1" };
        sd_event *e = NULL;
        Answer a[ELEMENTSOF(hosts)] = {};

        assert_int_equal(sd_event_new(&e), 0);
        for (size_t i = 0; i < ELEMENTSOF(hosts); i++) {
                ResolveQuery *q = NULL;

                assert_int_equal(resolve_start(e, hosts[i], on_answer, &a[i], &q), 0);
                assert_null(resolve_query_free(q));
        }
        assert_null(resolve_query_free(NULL));
        /* the lookups end on their threads; their answers go nowhere */
        run_for(e, 300 * 1000);
        for (size_t i = 0; i < ELEMENTSOF(hosts); i++)
                assert_int_equal(a[i].calls, 0);
        sd_event_unref(e);
        /* the threads free what is left; LeakSanitizer looks at exit */
        usleep(200 * 1000);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_literals),
                cmocka_unit_test(test_names),
                cmocka_unit_test(test_free_in_handler),
                cmocka_unit_test(test_unresolvable),
                cmocka_unit_test(test_free_early),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}

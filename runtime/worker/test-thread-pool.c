/* SPDX-License-Identifier: MIT */
/* The call thread pool: warm threads are reused, the pool grows to max_threads, queues past
 * it, and shrinks back to min_idle after the idle timeout. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdatomic.h>

#include "macro.h"
#include "thread-pool.h"

typedef struct Gate {
        pthread_mutex_t lock;
        pthread_cond_t cond;
        bool open;
        unsigned waiting;
        atomic_uint done;
        pthread_t last_thread;
} Gate;

static Gate gate = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER };

static void gate_reset(void) {
        pthread_mutex_lock(&gate.lock);
        gate.open = false;
        gate.waiting = 0;
        atomic_store(&gate.done, 0);
        pthread_mutex_unlock(&gate.lock);
}

static void gate_open(void) {
        pthread_mutex_lock(&gate.lock);
        gate.open = true;
        pthread_cond_broadcast(&gate.cond);
        pthread_mutex_unlock(&gate.lock);
}

static unsigned gate_waiting(void) {
        unsigned n;

        pthread_mutex_lock(&gate.lock);
        n = gate.waiting;
        pthread_mutex_unlock(&gate.lock);
        return n;
}

static void blocking_job(void *userdata) {
        pthread_mutex_lock(&gate.lock);
        gate.waiting++;
        while (!gate.open)
                pthread_cond_wait(&gate.cond, &gate.lock);
        gate.last_thread = pthread_self();
        pthread_mutex_unlock(&gate.lock);
        atomic_fetch_add(&gate.done, 1);
}

static void quick_job(void *userdata) {
        pthread_mutex_lock(&gate.lock);
        gate.last_thread = pthread_self();
        pthread_mutex_unlock(&gate.lock);
        atomic_fetch_add(&gate.done, 1);
}

static void wait_for(bool (*cond)(ThreadPool *p), ThreadPool *p) {
        for (int i = 0; i < 5000 && !cond(p); i++)
                (void) usleep(1000);
        assert_true(cond(p));
}

static bool all_done_8(ThreadPool *p) { return atomic_load(&gate.done) == 8; }
static bool waiting_4(ThreadPool *p) { return gate_waiting() == 4; }
static bool one_done(ThreadPool *p) { return atomic_load(&gate.done) >= 1; }
static bool shrunk(ThreadPool *p) { return thread_pool_n_threads(p) == 1; }
static bool two_idle(ThreadPool *p) { return thread_pool_n_idle(p) == 2; }

static void test_warm_reuse(void **state) {
        ThreadPool *p = NULL;
        pthread_t first;

        gate_reset();
        assert_int_equal(thread_pool_new(&(ThreadPoolConfig) { .max_threads = 8, .min_idle = 2, .idle_timeout_ms = 60000 }, &p), 0);
        assert_int_equal(thread_pool_n_threads(p), 2);
        wait_for(two_idle, p);

        assert_int_equal(thread_pool_submit(p, quick_job, NULL), 0);
        wait_for(one_done, p);
        first = gate.last_thread;
        wait_for(two_idle, p);
        /* Sequential jobs go to the same warm thread, and no thread is created for them. */
        for (int i = 0; i < 50; i++) {
                atomic_store(&gate.done, 0);
                assert_int_equal(thread_pool_submit(p, quick_job, NULL), 0);
                wait_for(one_done, p);
                wait_for(two_idle, p);
                assert_true(pthread_equal(gate.last_thread, first));
        }
        assert_int_equal(thread_pool_n_threads(p), 2);
        assert_int_equal(thread_pool_free(p, 5000), 0);
}

static void test_grow_queue_shrink(void **state) {
        ThreadPool *p = NULL;

        gate_reset();
        assert_int_equal(thread_pool_new(&(ThreadPoolConfig) { .max_threads = 4, .min_idle = 1, .idle_timeout_ms = 100 }, &p), 0);

        /* 8 blocking jobs on at most 4 threads: 4 run, 4 wait in the queue. */
        for (int i = 0; i < 8; i++)
                assert_int_equal(thread_pool_submit(p, blocking_job, NULL), 0);
        wait_for(waiting_4, p);
        (void) usleep(50 * 1000);
        assert_int_equal(gate_waiting(), 4);
        assert_int_equal(thread_pool_n_threads(p), 4);

        gate_open();
        wait_for(all_done_8, p);

        /* Idle for longer than the timeout: back down to min_idle. */
        wait_for(shrunk, p);
        assert_int_equal(thread_pool_free(p, 5000), 0);
}

static void test_free_waits_for_running_jobs(void **state) {
        ThreadPool *p = NULL;

        gate_reset();
        assert_int_equal(thread_pool_new(&(ThreadPoolConfig) { .max_threads = 2, .min_idle = 0, .idle_timeout_ms = 60000 }, &p), 0);
        assert_int_equal(thread_pool_submit(p, blocking_job, NULL), 0);
        for (int i = 0; i < 5000 && gate_waiting() < 1; i++)
                (void) usleep(1000);
        /* A job still runs: the pool cannot be freed under it. */
        assert_int_equal(thread_pool_free(p, 100), -EBUSY);
        gate_open();
        assert_int_equal(thread_pool_free(p, 5000), 0);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_warm_reuse),
                cmocka_unit_test(test_grow_queue_shrink),
                cmocka_unit_test(test_free_waits_for_running_jobs),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}

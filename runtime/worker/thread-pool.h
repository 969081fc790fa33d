/* SPDX-License-Identifier: MIT */
#pragma once

/* Warm threads for running calls. Dispatch hands a job straight to an idle thread (a condition
 * variable signal, no thread creation) and only creates a thread when none is idle. Threads
 * that stay idle for idle_timeout_ms exit, down to min_idle. At most max_threads exist; jobs
 * submitted beyond that wait in a FIFO for the next free thread (the caller bounds how many
 * jobs it submits). */

typedef void (*ThreadPoolJob)(void *userdata);

typedef struct ThreadPool ThreadPool;

typedef struct ThreadPoolConfig {
        unsigned max_threads;
        unsigned min_idle;        /* started up front and kept */
        unsigned idle_timeout_ms;
        size_t stack_size;        /* 0: libc default */
} ThreadPoolConfig;

int thread_pool_new(const ThreadPoolConfig *config, ThreadPool **ret);

/* Run job(userdata) on a pool thread. Fails only when no thread exists and none can be made. */
int thread_pool_submit(ThreadPool *p, ThreadPoolJob job, void *userdata);

unsigned thread_pool_n_threads(ThreadPool *p);
unsigned thread_pool_n_idle(ThreadPool *p);

/* Stop the idle threads and wait up to timeout_ms for every thread to exit, then free the
 * pool. -EBUSY if threads are still running jobs: the pool is then left alone (leaked), since
 * those threads still use it. */
int thread_pool_free(ThreadPool *p, unsigned timeout_ms);

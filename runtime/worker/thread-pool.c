/* SPDX-License-Identifier: MIT */
#include <pthread.h>
#include <time.h>

#include "log.h"
#include "thread-pool.h"

typedef struct PoolJob {
        struct PoolJob *next;
        ThreadPoolJob fn;
        void *userdata;
} PoolJob;

typedef struct PoolThread {
        struct PoolThread *next_idle;
        struct ThreadPool *pool;
        pthread_cond_t wake; /* CLOCK_MONOTONIC */
        ThreadPoolJob fn;    /* the handed-over job, NULL while idle */
        void *userdata;
} PoolThread;

struct ThreadPool {
        pthread_mutex_t lock;
        pthread_cond_t drained; /* signalled when a thread exits */
        ThreadPoolConfig config;
        PoolThread *idle;       /* LIFO: the most recently used (cache-warm) thread first */
        unsigned n_threads, n_idle;
        PoolJob *pending, **pending_tail;
        bool stopping;
};

static struct timespec deadline_in_ms(unsigned ms) {
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        ts.tv_sec += ms / 1000;
        ts.tv_nsec += (long) (ms % 1000) * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
                ts.tv_sec++;
                ts.tv_nsec -= 1000000000L;
        }
        return ts;
}

static int cond_init_monotonic(pthread_cond_t *c) {
        pthread_condattr_t attr;
        int r;

        r = pthread_condattr_init(&attr);
        if (r != 0)
                return -r;
        r = pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
        if (r == 0)
                r = pthread_cond_init(c, &attr);
        pthread_condattr_destroy(&attr);
        return -r;
}

/* With the lock held: take the next pending job, if any. */
static bool take_pending(ThreadPool *p, PoolThread *t) {
        PoolJob *j = p->pending;

        if (!j)
                return false;
        p->pending = j->next;
        if (!p->pending)
                p->pending_tail = &p->pending;
        t->fn = j->fn;
        t->userdata = j->userdata;
        free(j);
        return true;
}

/* With the lock held: remove t from the idle list; false if it is not on it. */
static bool unlink_idle(ThreadPool *p, PoolThread *t) {
        for (PoolThread **i = &p->idle; *i; i = &(*i)->next_idle)
                if (*i == t) {
                        *i = t->next_idle;
                        p->n_idle--;
                        return true;
                }
        return false;
}

static void *pool_thread(void *arg) {
        PoolThread *t = arg;
        ThreadPool *p = t->pool;

        (void) pthread_setname_np(pthread_self(), "agentix-call");

        pthread_mutex_lock(&p->lock);
        for (;;) {
                if (t->fn) {
                        ThreadPoolJob fn = t->fn;
                        void *userdata = t->userdata;

                        pthread_mutex_unlock(&p->lock);
                        fn(userdata);
                        pthread_mutex_lock(&p->lock);
                        t->fn = NULL;
                        if (take_pending(p, t))
                                continue;
                        if (p->stopping)
                                break;
                        t->next_idle = p->idle;
                        p->idle = t;
                        p->n_idle++;
                }

                struct timespec ts = deadline_in_ms(p->config.idle_timeout_ms);
                int r = 0;
                while (!t->fn && !p->stopping && r != ETIMEDOUT)
                        r = pthread_cond_timedwait(&t->wake, &p->lock, &ts);
                if (t->fn)
                        continue; /* submit() took us off the idle list and handed us a job */

                /* Timed out or stopping: leave, unless we are among the idle threads to keep. */
                if (!p->stopping && p->n_idle <= p->config.min_idle)
                        continue;
                (void) unlink_idle(p, t);
                break;
        }

        p->n_threads--;
        pthread_cond_broadcast(&p->drained);
        pthread_mutex_unlock(&p->lock);

        pthread_cond_destroy(&t->wake);
        free(t);
        return NULL;
}

/* With the lock held. */
static int spawn_thread(ThreadPool *p, ThreadPoolJob fn, void *userdata) {
        pthread_attr_t attr;
        pthread_t tid;
        PoolThread *t;
        int r;

        t = calloc(1, sizeof(*t));
        if (!t)
                return -ENOMEM;
        t->pool = p;
        t->fn = fn;
        t->userdata = userdata;
        r = cond_init_monotonic(&t->wake);
        if (r < 0) {
                free(t);
                return r;
        }

        r = -pthread_attr_init(&attr);
        if (r == 0) {
                if (p->config.stack_size > 0)
                        (void) pthread_attr_setstacksize(&attr, p->config.stack_size);
                (void) pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
                r = -pthread_create(&tid, &attr, pool_thread, t);
                pthread_attr_destroy(&attr);
        }
        if (r < 0) {
                pthread_cond_destroy(&t->wake);
                free(t);
                return r;
        }

        p->n_threads++;
        if (!fn) {
                /* Started idle: it waits for a job like any idle thread. */
                t->next_idle = p->idle;
                p->idle = t;
                p->n_idle++;
        }
        return 0;
}

int thread_pool_new(const ThreadPoolConfig *config, ThreadPool **ret) {
        ThreadPool *p;
        int r;

        p = calloc(1, sizeof(*p));
        if (!p)
                return -ENOMEM;
        p->config = *config;
        if (p->config.max_threads == 0)
                p->config.max_threads = 1;
        p->config.min_idle = MIN(p->config.min_idle, p->config.max_threads);
        p->pending_tail = &p->pending;

        r = -pthread_mutex_init(&p->lock, NULL);
        if (r < 0) {
                free(p);
                return r;
        }
        r = cond_init_monotonic(&p->drained);
        if (r < 0) {
                pthread_mutex_destroy(&p->lock);
                free(p);
                return r;
        }

        pthread_mutex_lock(&p->lock);
        for (unsigned i = 0; i < p->config.min_idle; i++) {
                r = spawn_thread(p, NULL, NULL);
                if (r < 0) {
                        log_warning_errno(r, "Failed to start an idle call thread, continuing: %m");
                        break;
                }
        }
        pthread_mutex_unlock(&p->lock);

        *ret = p;
        return 0;
}

int thread_pool_submit(ThreadPool *p, ThreadPoolJob fn, void *userdata) {
        int r = 0;

        pthread_mutex_lock(&p->lock);
        if (p->idle) {
                PoolThread *t = p->idle;

                p->idle = t->next_idle;
                p->n_idle--;
                t->fn = fn;
                t->userdata = userdata;
                /* Signal with the lock held: once we unlock, t may finish the job and exit. */
                pthread_cond_signal(&t->wake);
                goto finish;
        }

        if (p->n_threads < p->config.max_threads) {
                r = spawn_thread(p, fn, userdata);
                if (r >= 0 || p->n_threads == 0)
                        goto finish;
                log_debug_errno(r, "Failed to start a call thread, queueing the call: %m");
        }

        /* Every thread is busy: the next one to finish takes this job. */
        PoolJob *j = malloc(sizeof(*j));
        if (!j) {
                r = -ENOMEM;
                goto finish;
        }
        *j = (PoolJob) { .fn = fn, .userdata = userdata };
        *p->pending_tail = j;
        p->pending_tail = &j->next;
        r = 0;
finish:
        pthread_mutex_unlock(&p->lock);
        return r;
}

unsigned thread_pool_n_threads(ThreadPool *p) {
        unsigned n;

        pthread_mutex_lock(&p->lock);
        n = p->n_threads;
        pthread_mutex_unlock(&p->lock);
        return n;
}

unsigned thread_pool_n_idle(ThreadPool *p) {
        unsigned n;

        pthread_mutex_lock(&p->lock);
        n = p->n_idle;
        pthread_mutex_unlock(&p->lock);
        return n;
}

int thread_pool_free(ThreadPool *p, unsigned timeout_ms) {
        struct timespec ts = deadline_in_ms(timeout_ms);
        int r = 0;

        if (!p)
                return 0;

        pthread_mutex_lock(&p->lock);
        p->stopping = true;
        for (PoolThread *t = p->idle; t; t = t->next_idle)
                pthread_cond_signal(&t->wake);
        while (p->n_threads > 0 && r != ETIMEDOUT)
                r = pthread_cond_timedwait(&p->drained, &p->lock, &ts);
        if (p->n_threads > 0) {
                pthread_mutex_unlock(&p->lock);
                return -EBUSY;
        }
        pthread_mutex_unlock(&p->lock);

        while (p->pending) {
                PoolJob *j = p->pending;
                p->pending = j->next;
                free(j);
        }
        pthread_cond_destroy(&p->drained);
        pthread_mutex_destroy(&p->lock);
        free(p);
        return 0;
}

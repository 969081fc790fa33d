/* SPDX-License-Identifier: MIT */
#include <time.h>

#include "macro.h"
#include "out-window.h"

int out_window_init(OutWindow *w, uint64_t size, uint64_t deadline_usec) {
        pthread_condattr_t attr;
        int r;

        *w = (OutWindow) {
                .size = size,
                .deadline_usec = deadline_usec,
                .ready_fd = READY_FD_NULL,
        };
        r = -pthread_condattr_init(&attr);
        if (r < 0)
                return r;
        r = -pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
        if (r == 0)
                r = -pthread_cond_init(&w->cond, &attr);
        pthread_condattr_destroy(&attr);
        if (r < 0)
                return r;
        r = -pthread_mutex_init(&w->lock, NULL);
        if (r < 0)
                pthread_cond_destroy(&w->cond);
        return r;
}

void out_window_done(OutWindow *w) {
        ready_fd_close(&w->ready_fd);
        pthread_mutex_destroy(&w->lock);
        pthread_cond_destroy(&w->cond);
}

static bool ready_locked(const OutWindow *w) {
        return w->size == 0 || w->in_flight < w->size || w->stopped;
}

static void update_readiness(OutWindow *w) {
        ready_fd_set(&w->ready_fd, ready_locked(w));
}

int out_window_reserve(OutWindow *w, uint64_t n, bool wait) {
        int r = 0;

        if (w->size == 0)
                return 0;

        pthread_mutex_lock(&w->lock);
        while (wait && !ready_locked(w)) {
                if (w->deadline_usec == 0)
                        pthread_cond_wait(&w->cond, &w->lock);
                else if (now_usec() >= w->deadline_usec) {
                        r = -ECANCELED;
                        break;
                } else {
                        struct timespec ts = { .tv_sec = (time_t) (w->deadline_usec / 1000000u),
                                               .tv_nsec = (long) (w->deadline_usec % 1000000u) * 1000 };
                        (void) pthread_cond_timedwait(&w->cond, &w->lock, &ts);
                }
        }
        if (wait && w->stopped)
                r = -ECANCELED;
        if (r == 0) {
                w->in_flight += n;
                update_readiness(w);
        }
        pthread_mutex_unlock(&w->lock);
        return r;
}

void out_window_credit(OutWindow *w, uint64_t n) {
        if (w->size == 0)
                return;
        pthread_mutex_lock(&w->lock);
        /* The server runs no user code, but never let a bogus credit wrap the count. */
        w->in_flight -= MIN(n, w->in_flight);
        update_readiness(w);
        pthread_cond_broadcast(&w->cond);
        pthread_mutex_unlock(&w->lock);
}

void out_window_stop(OutWindow *w) {
        pthread_mutex_lock(&w->lock);
        w->stopped = true;
        update_readiness(w);
        pthread_cond_broadcast(&w->cond);
        pthread_mutex_unlock(&w->lock);
}

bool out_window_ready(OutWindow *w) {
        bool ready;

        pthread_mutex_lock(&w->lock);
        ready = ready_locked(w);
        pthread_mutex_unlock(&w->lock);
        return ready;
}

int out_window_fd(OutWindow *w) {
        int r = 0;

        pthread_mutex_lock(&w->lock);
        if (w->ready_fd.fd < 0) {
                r = ready_fd_open(&w->ready_fd, w->deadline_usec);
                if (r >= 0)
                        update_readiness(w);
        }
        if (r >= 0)
                r = w->ready_fd.fd;
        pthread_mutex_unlock(&w->lock);
        return r;
}

/* SPDX-License-Identifier: MIT */
#pragma once

/* Flow control of a stream or bidi call's output: at most FRAME_OUT_WINDOW bytes of ITEM
 * payload may be on their way to the client (sent to the server and not yet credited back
 * with OUT_CREDIT). The function's thread reserves an item's bytes before it sends the item,
 * waiting while the window is full; the reader thread credits what the server reports as
 * gone to the client. A function that must not wait (it polls other fds too) reserves without
 * waiting and watches the window's fd instead.
 *
 * Reserve-then-send, never send-then-count: the server may credit an item before the sending
 * thread returns from send(), and a credit for bytes not yet counted would be lost. */

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "ready-fd.h"

typedef struct OutWindow {
        pthread_mutex_t lock;
        pthread_cond_t cond;    /* CLOCK_MONOTONIC */
        uint64_t size;          /* 0: no flow control (unary calls) */
        uint64_t in_flight;     /* reserved (sent) and not yet credited */
        uint64_t deadline_usec; /* CLOCK_MONOTONIC µs, 0: none */
        bool stopped;           /* the call was asked to stop: nobody waits any more */
        ReadyFd ready_fd;       /* lazily created */
} OutWindow;

int out_window_init(OutWindow *w, uint64_t size, uint64_t deadline_usec);
void out_window_done(OutWindow *w);

/* Count `n` bytes as sent. With `wait`, first wait while the window is full: 0, or -ECANCELED
 * when the window was stopped or the deadline passed meanwhile (nothing is counted then).
 * Without, count them at once (the caller paces itself with out_window_ready()). */
int out_window_reserve(OutWindow *w, uint64_t n, bool wait);

/* The server passed `n` bytes on to the client (reader thread). */
void out_window_credit(OutWindow *w, uint64_t n);

/* Wake every waiter for good (cancellation, shutdown); the window reads ready from now on. */
void out_window_stop(OutWindow *w);

/* True while out_window_reserve(…, true) would not wait. */
bool out_window_ready(OutWindow *w);

/* Readable while out_window_ready(), or once the deadline passed. */
int out_window_fd(OutWindow *w);

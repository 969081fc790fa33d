/* SPDX-License-Identifier: MIT */
#pragma once

/* A condition a function can poll(): an fd that is readable exactly while the condition holds
 * (the owner says when it changes, under its own lock), or once an optional deadline has
 * passed — the kernel makes it readable then, without anyone writing. An eventfd whose counter
 * is nonzero while the condition holds; with a deadline, an epoll set of it and a timerfd armed
 * at the deadline. Used for the inbox's wait fd and for the output window's fd. */

#include <stdbool.h>
#include <stdint.h>

typedef struct ReadyFd {
        int event_fd; /* nonzero counter == ready */
        int timer_fd; /* fires at the deadline (only with a deadline) */
        int fd;       /* what is handed out: event_fd, or an epoll set of both */
        bool ready;   /* the event fd's counter is nonzero */
} ReadyFd;

#define READY_FD_NULL ((ReadyFd) { .event_fd = -EBADF, .timer_fd = -EBADF, .fd = -EBADF })

/* Create the fds (deadline_usec: CLOCK_MONOTONIC µs, 0: none), not ready. */
int ready_fd_open(ReadyFd *r, uint64_t deadline_usec);
/* Make the fd's readiness match `ready` (no-op before ready_fd_open()). */
void ready_fd_set(ReadyFd *r, bool ready);
void ready_fd_close(ReadyFd *r);

/* SPDX-License-Identifier: MIT */
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>

#include "macro.h"
#include "ready-fd.h"

int ready_fd_open(ReadyFd *r, uint64_t deadline_usec) {
        _cleanup_close_ int efd = -EBADF, tfd = -EBADF, ep = -EBADF;

        efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (efd < 0)
                return negative_errno();
        if (deadline_usec == 0) {
                *r = (ReadyFd) { .event_fd = efd, .timer_fd = -EBADF, .fd = efd };
                TAKE_FD(efd);
                return 0;
        }

        /* With a deadline the kernel must make the fd readable when it passes, without anyone
         * writing to it: an epoll set of the event fd and a timer fd armed at the deadline. */
        struct itimerspec its = { .it_value = { .tv_sec = (time_t) (deadline_usec / 1000000u),
                                                .tv_nsec = (long) (deadline_usec % 1000000u) * 1000 } };
        tfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
        if (tfd < 0)
                return negative_errno();
        if (its.it_value.tv_sec == 0 && its.it_value.tv_nsec == 0)
                its.it_value.tv_nsec = 1; /* all zero would disarm it */
        if (timerfd_settime(tfd, TFD_TIMER_ABSTIME, &its, NULL) < 0)
                return negative_errno();
        ep = epoll_create1(EPOLL_CLOEXEC);
        if (ep < 0)
                return negative_errno();
        if (epoll_ctl(ep, EPOLL_CTL_ADD, efd, &(struct epoll_event) { .events = EPOLLIN }) < 0 ||
            epoll_ctl(ep, EPOLL_CTL_ADD, tfd, &(struct epoll_event) { .events = EPOLLIN }) < 0)
                return negative_errno();

        *r = (ReadyFd) { .event_fd = TAKE_FD(efd), .timer_fd = TAKE_FD(tfd), .fd = TAKE_FD(ep) };
        return 0;
}

void ready_fd_set(ReadyFd *r, bool ready) {
        uint64_t v = 1;

        if (r->event_fd < 0 || ready == r->ready)
                return;
        if (ready)
                (void) !write(r->event_fd, &v, sizeof(v));
        else
                (void) !read(r->event_fd, &v, sizeof(v));
        r->ready = ready;
}

void ready_fd_close(ReadyFd *r) {
        if (r->fd != r->event_fd)
                safe_close(r->fd);
        safe_close(r->event_fd);
        safe_close(r->timer_fd);
        *r = READY_FD_NULL;
}

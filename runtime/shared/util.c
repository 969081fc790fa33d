/* SPDX-License-Identifier: MIT */
#include <limits.h>
#include <stdarg.h>
#include <sys/socket.h>
#include <time.h>

#include "macro.h"

int loop_read_exact(int fd, void *buf, size_t n) {
        char *p = buf;

        while (n > 0) {
                ssize_t k = read(fd, p, n);
                if (k < 0) {
                        if (errno == EINTR)
                                continue;
                        return negative_errno();
                }
                if (k == 0)
                        return -EPIPE;
                p += k;
                n -= (size_t) k;
        }
        return 0;
}

int loop_write(int fd, const void *buf, size_t n) {
        const char *p = buf;

        while (n > 0) {
                ssize_t k = write(fd, p, n);
                if (k < 0) {
                        if (errno == EINTR)
                                continue;
                        return negative_errno();
                }
                p += k;
                n -= (size_t) k;
        }
        return 0;
}

unsigned long long now_usec(void) {
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (unsigned long long) ts.tv_sec * 1000000ULL + (unsigned long long) ts.tv_nsec / 1000ULL;
}

int message_set_first(char **msg, int r, const char *fmt, ...) {
        va_list ap;

        if (*msg)
                return r;
        /* %m says what r says, whatever errno became since the failure. */
        if (r < 0)
                errno = -r;
        va_start(ap, fmt);
        if (vasprintf(msg, fmt, ap) < 0)
                *msg = NULL;
        va_end(ap);
        return r;
}

int companion_program(const char *name, const char *env, char *buf, size_t size) {
        const char *e = env ? getenv(env) : NULL;
        char self[PATH_MAX];
        ssize_t n;

        if (e && *e) {
                if (access(e, X_OK) < 0 || snprintf(buf, size, "%s", e) >= (int) size)
                        return -EACCES;
                return 0;
        }
        n = readlink("/proc/self/exe", self, sizeof(self) - 1);
        if (n > 0) {
                char *slash;

                self[n] = 0;
                slash = strrchr(self, '/');
                if (slash) {
                        *slash = 0;
                        if (snprintf(buf, size, "%s/%s", self, name) < (int) size && access(buf, X_OK) == 0)
                                return 0;
                }
        }
        if (snprintf(buf, size, "%s/%s", AGENTIX_LIBEXECDIR, name) < (int) size && access(buf, X_OK) == 0)
                return 0;
        return -ENOENT;
}

int socket_reset_on_close(int fd) {
        /* Zero linger: close() aborts the connection (RST), whatever its state, and leaves no
         * TIME_WAIT behind. */
        if (setsockopt(fd, SOL_SOCKET, SO_LINGER, &(struct linger) { .l_onoff = 1, .l_linger = 0 },
                       sizeof(struct linger)) < 0)
                return negative_errno();
        return 0;
}

/* SPDX-License-Identifier: MIT */
#pragma once

/* Small systemd-style helpers: cleanup attributes, ownership transfer, array sizes.
 * libsystemd 252 exports none of these publicly, so the project keeps its own. */

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define _cleanup_(f) __attribute__((cleanup(f)))
#define _unused_ __attribute__((unused))
#define _printf_(a, b) __attribute__((format(printf, a, b)))
#define _noreturn_ __attribute__((noreturn))
#define _likely_(x) __builtin_expect(!!(x), 1)
#define _unlikely_(x) __builtin_expect(!!(x), 0)
#define _pure_ __attribute__((pure))
#define _warn_unused_result_ __attribute__((warn_unused_result))

#define ELEMENTSOF(x) (sizeof(x) / sizeof((x)[0]))
#define MIN(a, b) ((a) < (b) ? (a) : (b))
#define MAX(a, b) ((a) > (b) ? (a) : (b))
#define STRLEN(s) (sizeof(s) - 1)

#define streq(a, b) (strcmp((a), (b)) == 0)
/* Equal strings, or both NULL. */
static inline bool streq_ptr(const char *a, const char *b) {
        return a == b || (a && b && streq(a, b));
}
#define strneq(a, b, n) (strncmp((a), (b), (n)) == 0)
/* What follows prefix in s, or NULL when s does not start with it. */
static inline const char *startswith(const char *s, const char *prefix) {
        size_t n = strlen(prefix);
        return strncmp(s, prefix, n) == 0 ? s + n : NULL;
}

/* Take ownership of a pointer/fd, leaving NULL/-EBADF behind so the cleanup handler is a no-op. */
#define TAKE_PTR(p)                             \
        ({                                      \
                __typeof__(p) _tp_ = (p);       \
                (p) = NULL;                     \
                _tp_;                           \
        })
#define TAKE_FD(fd)                             \
        ({                                      \
                int _tf_ = (fd);                \
                (fd) = -EBADF;                  \
                _tf_;                           \
        })

/* Define a cleanup function that calls func(*p) when *p is not NULL. */
#define DEFINE_TRIVIAL_CLEANUP_FUNC(type, func)                 \
        static inline void func##p(type *p) {                   \
                if (*p)                                         \
                        func(*p);                               \
        }

/* free() that gives NULL back: `p = mfree(p);`. */
static inline void *mfree(void *p) {
        free(p);
        return NULL;
}

static inline void freep(void *p) {
        free(*(void **) p);
}
#define _cleanup_free_ _cleanup_(freep)

static inline int safe_close(int fd) {
        if (fd >= 0) {
                int saved = errno;
                (void) close(fd);
                errno = saved;
        }
        return -EBADF;
}

static inline void closep(int *fd) {
        *fd = safe_close(*fd);
}
#define _cleanup_close_ _cleanup_(closep)

static inline void fclosep(FILE **f) {
        if (*f)
                fclose(*f);
}
#define _cleanup_fclose_ _cleanup_(fclosep)

/* Negative errno from a libc call that set errno; never returns 0 by accident. */
static inline int negative_errno(void) {
        return errno > 0 ? -errno : -EIO;
}

static inline bool strempty(const char *s) {
        return !s || !*s;
}

static inline const char *strna(const char *s) {
        return s ?: "n/a";
}

#define ERRNO_IS_TRANSIENT(r) ((r) == -EAGAIN || (r) == -EINTR || (r) == -EWOULDBLOCK)

/* Overflow-checked size arithmetic for allocations sized by a peer. */
static inline bool size_add_overflows(size_t a, size_t b, size_t *ret) {
        return __builtin_add_overflow(a, b, ret);
}

/* Read a whole buffer of the given size from fd, retrying on EINTR; -EPIPE on early EOF. */
int loop_read_exact(int fd, void *buf, size_t n);
/* Write a whole buffer, retrying on EINTR and short writes. */
int loop_write(int fd, const void *buf, size_t n);
/* A program that ships with this one (agentix-worker, agentix-exec-as): $env when set (-EACCES
 * when it is not executable), else name beside our own executable (the build tree, a bundle's
 * bin directory), else in AGENTIX_LIBEXECDIR; -ENOENT when none is. Into buf. */
int companion_program(const char *name, const char *env, char *buf, size_t size);
/* Make close() of the TCP socket fd end its connection with a reset (SO_LINGER {1, 0}): no FIN
 * and no TIME_WAIT on our side, but whatever the peer has not acknowledged yet is lost. */
int socket_reset_on_close(int fd);
/* Monotonic time in microseconds. */
unsigned long long now_usec(void);
/* Keep the first failure's message for a person: *msg gets the formatted text unless it holds
 * one already. Returns r, so that `return message_set_first(&p->error, -EINVAL, "…", …);`; %m in
 * fmt prints what r (negative errno) means. */
int message_set_first(char **msg, int r, const char *fmt, ...) _printf_(3, 4);

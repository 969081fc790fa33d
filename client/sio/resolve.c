/* SPDX-License-Identifier: MIT */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "macro.h"
#include "resolve.h"

/* glibc's getaddrinfo() with NSS modules loaded wants more than a tiny stack. */
#define RESOLVE_STACK_SIZE (256u * 1024u)

struct ResolveQuery {
        atomic_uint refs; /* the owner's and the thread's */
        int event_fd;
        sd_event_source *source;
        resolve_handler_t handler;
        void *userdata;

        /* written by the thread before it signals event_fd */
        int error;
        struct addrinfo *result;
        char host[];
};

static void query_unref(ResolveQuery *q) {
        if (atomic_fetch_sub(&q->refs, 1) != 1)
                return;
        /* On the thread only after resolve_query_free(), which took the source away. */
        sd_event_source_disable_unref(q->source);
        if (q->result)
                freeaddrinfo(q->result);
        if (q->event_fd >= 0)
                close(q->event_fd);
        free(q);
}

static void lookup(ResolveQuery *q, int flags) {
        struct addrinfo hints = {
                .ai_socktype = SOCK_STREAM,
                .ai_flags = AI_ADDRCONFIG | flags,
        };

        q->error = getaddrinfo(q->host, NULL, &hints, &q->result);
        if (q->error == 0 && !q->result)
                q->error = EAI_NONAME;
}

static void *lookup_thread(void *userdata) {
        ResolveQuery *q = userdata;

        lookup(q, 0);
        /* The owner may have gone; the eventfd is ours until the last reference drops. */
        (void) eventfd_write(q->event_fd, 1);
        query_unref(q);
        return NULL;
}

static int on_answer(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        ResolveQuery *q = userdata;
        resolve_handler_t handler = q->handler;

        (void) sd_event_source_set_enabled(s, SD_EVENT_OFF);
        q->handler = NULL;
        if (handler)
                handler(q->error, q->error == 0 ? q->result : NULL, q->userdata);
        return 0;
}

static int start_thread(ResolveQuery *q) {
        pthread_attr_t attr;
        sigset_t all, saved;
        pthread_t thread;
        int r;

        r = -pthread_attr_init(&attr);
        if (r < 0)
                return r;
        r = -pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        if (r == 0)
                r = -pthread_attr_setstacksize(&attr, RESOLVE_STACK_SIZE);
        if (r == 0) {
                /* Signals are the loop thread's business (signalfd, sd-event). */
                sigfillset(&all);
                (void) pthread_sigmask(SIG_SETMASK, &all, &saved);
                atomic_fetch_add(&q->refs, 1);
                r = -pthread_create(&thread, &attr, lookup_thread, q);
                if (r < 0)
                        atomic_fetch_sub(&q->refs, 1);
                (void) pthread_sigmask(SIG_SETMASK, &saved, NULL);
        }
        pthread_attr_destroy(&attr);
        return r;
}

int resolve_start(sd_event *event, const char *host, resolve_handler_t handler, void *userdata,
                  ResolveQuery **ret) {
        size_t n = strlen(host);
        ResolveQuery *q;
        int r;

        q = calloc(1, sizeof(*q) + n + 1);
        if (!q)
                return -ENOMEM;
        atomic_init(&q->refs, 1);
        memcpy(q->host, host, n + 1);
        q->handler = handler;
        q->userdata = userdata;
        q->event_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (q->event_fd < 0) {
                r = -errno;
                goto fail;
        }
        r = sd_event_add_io(event, &q->source, q->event_fd, EPOLLIN, on_answer, q);
        if (r < 0)
                goto fail;
        (void) sd_event_source_set_description(q->source, "resolve");

        /* A literal needs no thread: answer it here, reported from the loop all the same. */
        lookup(q, AI_NUMERICHOST);
        if (q->error == EAI_NONAME) {
                q->error = 0;
                r = start_thread(q);
                if (r < 0)
                        goto fail;
        } else
                (void) eventfd_write(q->event_fd, 1);

        *ret = q;
        return 0;
fail:
        query_unref(q);
        return r;
}

ResolveQuery *resolve_query_free(ResolveQuery *q) {
        if (!q)
                return NULL;
        q->handler = NULL;
        /* sd-event is not thread-safe: the source goes here, on the loop's thread. */
        q->source = sd_event_source_disable_unref(q->source);
        query_unref(q);
        return NULL;
}

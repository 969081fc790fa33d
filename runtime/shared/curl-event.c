/* SPDX-License-Identifier: MIT */
#include <stdlib.h>

#include "curl-event.h"
#include "log.h"
#include "macro.h"

/* One socket curl asked us to watch. */
typedef struct CurlSocket {
        CurlEvent *glue;
        curl_socket_t fd;
        sd_event_source *source;
        struct CurlSocket *prev, *next;
} CurlSocket;

/* One running transfer (CURLOPT_PRIVATE of its easy handle). */
typedef struct CurlTransfer {
        CURL *easy;
        curl_event_done_t done;
        void *userdata;
        struct CurlTransfer *prev, *next;
} CurlTransfer;

struct CurlEvent {
        sd_event *event;
        CURLM *multi;
        sd_event_source *timer;
        sd_event_source *due;  /* defer: curl's timeout is 0 ("call me now") */
        CurlSocket *sockets;
        CurlTransfer *transfers;
        unsigned n_transfers;
        unsigned busy;       /* inside one of our handlers: a free must wait until it returns */
        bool free_requested;
};

#define LIST_REMOVE(head, item)                                 \
        do {                                                    \
                if ((item)->next)                               \
                        (item)->next->prev = (item)->prev;      \
                if ((item)->prev)                               \
                        (item)->prev->next = (item)->next;      \
                else                                            \
                        (head) = (item)->next;                  \
                (item)->prev = (item)->next = NULL;             \
        } while (0)

#define LIST_PREPEND(head, item)                                \
        do {                                                    \
                (item)->prev = NULL;                            \
                (item)->next = (head);                          \
                if (head)                                       \
                        (head)->prev = (item);                  \
                (head) = (item);                                \
        } while (0)

static void curl_event_destroy(CurlEvent *g);

static void socket_free(CurlSocket *s) {
        if (!s)
                return;
        LIST_REMOVE(s->glue->sockets, s);
        sd_event_source_disable_unref(s->source);
        free(s);
}

static void transfer_free(CurlEvent *g, CurlTransfer *t) {
        LIST_REMOVE(g->transfers, t);
        g->n_transfers--;
        free(t);
}

/* Report every finished transfer. The done callbacks may add and remove transfers (ours is the
 * only place that reads curl's message queue, and removing a handle drops its message). */
static void check_finished(CurlEvent *g) {
        CURLMsg *msg;
        int left;

        while (!g->free_requested && (msg = curl_multi_info_read(g->multi, &left))) {
                CurlTransfer *t = NULL;
                curl_event_done_t done;
                CURLcode result;
                CURL *easy;
                void *userdata;

                if (msg->msg != CURLMSG_DONE)
                        continue;
                easy = msg->easy_handle;
                result = msg->data.result;
                if (curl_easy_getinfo(easy, CURLINFO_PRIVATE, (char **) &t) != CURLE_OK || !t)
                        continue;

                done = t->done;
                userdata = t->userdata;
                (void) curl_multi_remove_handle(g->multi, easy);
                (void) curl_easy_setopt(easy, CURLOPT_PRIVATE, NULL);
                transfer_free(g, t);
                if (done)
                        done(g, easy, result, userdata);
        }
}

static void enter(CurlEvent *g) {
        g->busy++;
}

/* Returns true when the glue was freed. */
static bool leave(CurlEvent *g) {
        if (--g->busy == 0 && g->free_requested) {
                curl_event_destroy(g);
                return true;
        }
        return false;
}

static int on_io(sd_event_source *source, int fd, uint32_t revents, void *userdata) {
        CurlSocket *s = userdata;
        CurlEvent *g = s->glue;
        int action = 0, running;

        /* On hang-up or error let curl read: it finds the EOF or the error itself. */
        if (revents & (EPOLLIN | EPOLLHUP | EPOLLERR))
                action |= CURL_CSELECT_IN;
        if (revents & EPOLLOUT)
                action |= CURL_CSELECT_OUT;
        if (revents & EPOLLERR)
                action |= CURL_CSELECT_ERR;

        enter(g);
        /* May call the socket callback, which may free `s`. */
        if (curl_multi_socket_action(g->multi, fd, action, &running) != CURLM_OK)
                log_debug("curl_multi_socket_action() failed on fd %d.", fd);
        check_finished(g);
        (void) leave(g);
        return 0;
}

static void run_timeout(CurlEvent *g) {
        int running;

        enter(g);
        if (curl_multi_socket_action(g->multi, CURL_SOCKET_TIMEOUT, 0, &running) != CURLM_OK)
                log_debug("curl_multi_socket_action() failed on the timeout.");
        check_finished(g);
        (void) leave(g);
}

static int on_timer(sd_event_source *source, uint64_t usec, void *userdata) {
        run_timeout(userdata);
        return 0;
}

static int on_due(sd_event_source *source, void *userdata) {
        run_timeout(userdata);
        return 0;
}

static int socket_callback(CURL *easy, curl_socket_t fd, int what, void *userp, void *socketp) {
        CurlEvent *g = userp;
        CurlSocket *s = socketp;
        uint32_t events = 0;
        int r;

        if (what == CURL_POLL_REMOVE) {
                if (s) {
                        (void) curl_multi_assign(g->multi, fd, NULL);
                        socket_free(s);
                }
                return 0;
        }

        if (what == CURL_POLL_IN || what == CURL_POLL_INOUT)
                events |= EPOLLIN;
        if (what == CURL_POLL_OUT || what == CURL_POLL_INOUT)
                events |= EPOLLOUT;

        if (s) {
                r = sd_event_source_set_io_events(s->source, events);
                if (r >= 0)
                        r = sd_event_source_set_enabled(s->source, SD_EVENT_ON);
                if (r < 0) {
                        log_debug_errno(r, "Failed to update the io source of curl's fd %d: %m", fd);
                        return -1;
                }
                return 0;
        }

        s = calloc(1, sizeof(*s));
        if (!s)
                return -1;
        s->glue = g;
        s->fd = fd;
        r = sd_event_add_io(g->event, &s->source, fd, events, on_io, s);
        if (r < 0) {
                log_debug_errno(r, "Failed to watch curl's fd %d: %m", fd);
                free(s);
                return -1;
        }
        (void) sd_event_source_set_description(s->source, "curl-io");
        if (curl_multi_assign(g->multi, fd, s) != CURLM_OK) {
                sd_event_source_disable_unref(s->source);
                free(s);
                return -1;
        }
        LIST_PREPEND(g->sockets, s);
        return 0;
}

static int timer_callback(CURLM *multi, long timeout_ms, void *userp) {
        CurlEvent *g = userp;
        uint64_t now;
        int r;

        if (timeout_ms < 0)
                return sd_event_source_set_enabled(g->timer, SD_EVENT_OFF) < 0 ? -1 : 0;
        /* "Now" (curl says so for every transfer it starts) runs from a defer source: a timer
         * armed for now costs a timerfd_settime() to arm it, a wake-up and a read(), and one
         * more to move it back. The timer keeps its deadline; an early expiry is harmless. */
        if (timeout_ms == 0)
                return sd_event_source_set_enabled(g->due, SD_EVENT_ONESHOT) < 0 ? -1 : 0;

        r = sd_event_now(g->event, CLOCK_MONOTONIC, &now);
        if (r >= 0)
                r = sd_event_source_set_time(g->timer, now + (uint64_t) timeout_ms * 1000u);
        if (r >= 0)
                r = sd_event_source_set_enabled(g->timer, SD_EVENT_ONESHOT);
        return r < 0 ? -1 : 0;
}

int curl_event_new(sd_event *event, CurlEvent **ret) {
        CurlEvent *g;
        int r;

        /* Idempotent after the first call; curl 7.84+ makes it thread-safe. */
        if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
                return -EIO;

        g = calloc(1, sizeof(*g));
        if (!g)
                return -ENOMEM;
        g->event = sd_event_ref(event);

        g->multi = curl_multi_init();
        if (!g->multi) {
                r = -ENOMEM;
                goto fail;
        }
        /* Accuracy 1 µs: sd-event's default slack (250 ms) would delay every curl timeout. */
        r = sd_event_add_time(event, &g->timer, CLOCK_MONOTONIC, 0, 1, on_timer, g);
        if (r < 0)
                goto fail;
        (void) sd_event_source_set_enabled(g->timer, SD_EVENT_OFF);
        (void) sd_event_source_set_description(g->timer, "curl-timer");
        r = sd_event_add_defer(event, &g->due, on_due, g);
        if (r < 0)
                goto fail;
        (void) sd_event_source_set_enabled(g->due, SD_EVENT_OFF);
        (void) sd_event_source_set_description(g->due, "curl-due");

        if (curl_multi_setopt(g->multi, CURLMOPT_SOCKETFUNCTION, socket_callback) != CURLM_OK ||
            curl_multi_setopt(g->multi, CURLMOPT_SOCKETDATA, g) != CURLM_OK ||
            curl_multi_setopt(g->multi, CURLMOPT_TIMERFUNCTION, timer_callback) != CURLM_OK ||
            curl_multi_setopt(g->multi, CURLMOPT_TIMERDATA, g) != CURLM_OK) {
                r = -EIO;
                goto fail;
        }

        *ret = g;
        return 0;
fail:
        curl_event_destroy(g);
        return r;
}

sd_event *curl_event_event(CurlEvent *g) {
        return g->event;
}

CURLM *curl_event_multi(CurlEvent *g) {
        return g->multi;
}

unsigned curl_event_n_transfers(const CurlEvent *g) {
        return g->n_transfers;
}

int curl_event_add(CurlEvent *g, CURL *easy, curl_event_done_t done, void *userdata) {
        CurlTransfer *t;
        CURLMcode mc;

        if (!g || !easy || g->free_requested)
                return -EINVAL;

        t = calloc(1, sizeof(*t));
        if (!t)
                return -ENOMEM;
        t->easy = easy;
        t->done = done;
        t->userdata = userdata;

        if (curl_easy_setopt(easy, CURLOPT_PRIVATE, t) != CURLE_OK) {
                free(t);
                return -EIO;
        }
        mc = curl_multi_add_handle(g->multi, easy);
        if (mc != CURLM_OK) {
                (void) curl_easy_setopt(easy, CURLOPT_PRIVATE, NULL);
                free(t);
                return mc == CURLM_RECURSIVE_API_CALL ? -EBUSY : mc == CURLM_OUT_OF_MEMORY ? -ENOMEM : -EINVAL;
        }
        LIST_PREPEND(g->transfers, t);
        g->n_transfers++;
        return 0;
}

void curl_event_remove(CurlEvent *g, CURL *easy) {
        CurlTransfer *t = NULL;

        if (!g || !easy)
                return;
        if (curl_easy_getinfo(easy, CURLINFO_PRIVATE, (char **) &t) != CURLE_OK || !t)
                return;
        (void) curl_multi_remove_handle(g->multi, easy);
        (void) curl_easy_setopt(easy, CURLOPT_PRIVATE, NULL);
        transfer_free(g, t);
}

static void curl_event_destroy(CurlEvent *g) {
        CurlTransfer *t;

        while ((t = g->transfers)) {
                if (g->multi)
                        (void) curl_multi_remove_handle(g->multi, t->easy);
                (void) curl_easy_setopt(t->easy, CURLOPT_PRIVATE, NULL);
                transfer_free(g, t);
        }
        /* Closing cached connections still calls the socket callback: keep the sockets until
         * after the cleanup, then drop any curl did not tell us about. */
        if (g->multi)
                (void) curl_multi_cleanup(g->multi);
        while (g->sockets)
                socket_free(g->sockets);
        sd_event_source_disable_unref(g->timer);
        sd_event_source_disable_unref(g->due);
        sd_event_unref(g->event);
        free(g);
}

CurlEvent *curl_event_free(CurlEvent *g) {
        if (!g)
                return NULL;
        if (g->busy > 0) {
                /* Called from a done callback: finish when the handler returns. */
                g->free_requested = true;
                return NULL;
        }
        curl_event_destroy(g);
        return NULL;
}

/* SPDX-License-Identifier: MIT */
#include <stdlib.h>

#include "log.h"
#include "macro.h"
#include "uv-event.h"

struct UvEvent {
        sd_event *event;
        uv_loop_t loop;
        bool loop_initialized;
        sd_event_source *io;
        sd_event_source *timer;
        sd_event_source *post;
        bool running; /* guards against re-entry from callbacks */
        uint64_t armed_usec; /* when the timer fires, 0 when off */
};

static void uv_event_rearm(UvEvent *u) {
        int timeout = uv_backend_timeout(&u->loop);
        uint64_t now, when;

        if (timeout < 0) {
                if (u->armed_usec != 0) {
                        (void) sd_event_source_set_enabled(u->timer, SD_EVENT_OFF);
                        u->armed_usec = 0;
                }
                return;
        }
        if (sd_event_now(u->event, CLOCK_MONOTONIC, &now) < 0)
                return;
        when = now + (uint64_t) timeout * 1000ULL;
        /* uv timers have millisecond resolution: leave a timer alone that already fires
         * within the same millisecond (each change is a timerfd syscall). */
        if (u->armed_usec != 0 && u->armed_usec <= when && when - u->armed_usec < 1000)
                return;
        (void) sd_event_source_set_time(u->timer, when);
        (void) sd_event_source_set_enabled(u->timer, SD_EVENT_ONESHOT);
        u->armed_usec = when;
}

void uv_event_run(UvEvent *u) {
        if (u->running)
                return;
        u->running = true;
        /* uv may have more for now right away (lws's writes queue their own follow-up):
         * doing it here saves a timer for "now" and its two timerfd_settime() calls. */
        for (int i = 0; i < 4; i++) {
                (void) uv_run(&u->loop, UV_RUN_NOWAIT);
                if (uv_backend_timeout(&u->loop) != 0)
                        break;
        }
        u->running = false;
        uv_event_rearm(u);
}

static int on_io(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        uv_event_run(userdata);
        return 0;
}

static int on_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        UvEvent *u = userdata;

        u->armed_usec = 0; /* oneshot: it is off now */
        uv_event_run(u);
        return 0;
}

static int on_post(sd_event_source *s, void *userdata) {
        uv_event_run(userdata);
        return 0;
}

int uv_event_new(sd_event *event, UvEvent **ret) {
        UvEvent *u;
        int r;

        u = calloc(1, sizeof(*u));
        if (!u)
                return -ENOMEM;
        u->event = sd_event_ref(event);

        r = uv_loop_init(&u->loop);
        if (r < 0) {
                uv_event_free(u);
                return r; /* libuv errors are negative errno values on Linux */
        }
        u->loop_initialized = true;

        r = sd_event_add_io(event, &u->io, uv_backend_fd(&u->loop), EPOLLIN, on_io, u);
        if (r < 0)
                goto fail;
        r = sd_event_add_time(event, &u->timer, CLOCK_MONOTONIC, 0, 1, on_timer, u);
        if (r < 0)
                goto fail;
        (void) sd_event_source_set_enabled(u->timer, SD_EVENT_OFF);
        r = sd_event_add_post(event, &u->post, on_post, u);
        if (r < 0)
                goto fail;

        *ret = u;
        return 0;
fail:
        uv_event_free(u);
        return r;
}

uv_loop_t *uv_event_loop(UvEvent *u) {
        return &u->loop;
}

static void close_walk_cb(uv_handle_t *h, void *arg) {
        if (!uv_is_closing(h))
                uv_close(h, NULL);
}

void uv_event_settle(UvEvent *u) {
        if (!u || !u->loop_initialized)
                return;
        for (int i = 0; i < 1000 && uv_loop_alive(&u->loop); i++)
                (void) uv_run(&u->loop, UV_RUN_NOWAIT);
}

void uv_event_drain(UvEvent *u) {
        if (!u || !u->loop_initialized)
                return;
        /* Let pending close callbacks run (lws frees its handles and their memory through
         * them) before closing what is left by force. */
        uv_event_settle(u);
        uv_walk(&u->loop, close_walk_cb, NULL);
        for (int i = 0; i < 16 && uv_loop_alive(&u->loop); i++)
                (void) uv_run(&u->loop, UV_RUN_NOWAIT);
        if (uv_loop_close(&u->loop) < 0)
                log_debug("uv loop still has live handles at exit");
        u->loop_initialized = false;
}

UvEvent *uv_event_free(UvEvent *u) {
        if (!u)
                return NULL;
        sd_event_source_disable_unref(u->io);
        sd_event_source_disable_unref(u->timer);
        sd_event_source_disable_unref(u->post);
        uv_event_drain(u);
        sd_event_unref(u->event);
        free(u);
        return NULL;
}

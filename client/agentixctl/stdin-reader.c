/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <poll.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "macro.h"
#include "stdin-reader.h"

struct StdinReader {
        sd_event *event;
        sd_event_source *source;   /* io, or defer for regular files */
        sd_event_source *retry;    /* offers the held chunk again */
        stdin_data_handler handler;
        void *userdata;
        char *buf;                 /* STDIN_CHUNK bytes: the chunk being gathered */
        char *held;                /* STDIN_CHUNK bytes: a chunk the handler could not take yet */
        size_t n_held;
        bool held_eof;             /* … or the EOF */
        bool holding;              /* held/held_eof wait for stdin_reader_resume() */
        bool is_file;              /* a regular file: read whole chunks */
        bool is_tty;               /* a terminal: send every keystroke at once */
};

static void stop(StdinReader *r) {
        r->source = sd_event_source_disable_unref(r->source);
        r->retry = sd_event_source_disable_unref(r->retry);
}

static int on_retry(sd_event_source *s, uint64_t usec, void *userdata);

/* Offer a chunk (or the EOF); keep it and pause when the handler asks for later. */
static void offer(StdinReader *r, const char *data, size_t n, bool eof) {
        int k = r->handler(eof ? NULL : data, eof ? 0 : n, r->userdata);

        r->holding = false;
        if (k >= 0 && !eof) {
                r->n_held = 0;
                r->held_eof = false;
                (void) sd_event_source_set_enabled(r->source, SD_EVENT_ON);
                return;
        }
        if (k >= 0 || (k != -EAGAIN && k != -ENOBUFS)) {
                stop(r); /* the end, or the handler wants no more */
                return;
        }
        if (!eof && data != r->held)
                memcpy(r->held, data, n);
        r->n_held = eof ? 0 : n;
        r->held_eof = eof;
        (void) sd_event_source_set_enabled(r->source, SD_EVENT_OFF);
        if (k == -EAGAIN) {
                /* No polling: the consumer says when (stdin_reader_resume()). */
                r->holding = true;
                return;
        }
        if (!r->retry)
                k = sd_event_add_time_relative(r->event, &r->retry, CLOCK_MONOTONIC, STDIN_RETRY_USEC, 0, on_retry, r);
        else {
                k = sd_event_source_set_time_relative(r->retry, STDIN_RETRY_USEC);
                if (k >= 0)
                        k = sd_event_source_set_enabled(r->retry, SD_EVENT_ONESHOT);
        }
        if (k < 0)
                stop(r);
}

static int on_retry(sd_event_source *s, uint64_t usec, void *userdata) {
        StdinReader *r = userdata;

        offer(r, r->held, r->n_held, r->held_eof);
        return 0;
}

void stdin_reader_resume(StdinReader *r) {
        if (r && r->holding)
                offer(r, r->held, r->n_held, r->held_eof);
}

static bool more_is_ready(int timeout_ms) {
        struct pollfd p = { .fd = STDIN_FILENO, .events = POLLIN };

        return poll(&p, 1, timeout_ms) > 0 && (p.revents & (POLLIN | POLLHUP));
}

static void read_chunk(StdinReader *r) {
        size_t got = 0;
        ssize_t n = 0;

        /* Gather what comes within STDIN_GATHER_MSEC (a pipe hands out at most its 64 KiB buffer
         * per read); a terminal's input goes out at once. */
        while (got < STDIN_CHUNK) {
                n = read(STDIN_FILENO, r->buf + got, STDIN_CHUNK - got);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        break;
                got += (size_t) n;
                if (!r->is_file && !more_is_ready(r->is_tty ? 0 : STDIN_GATHER_MSEC))
                        break;
        }
        if (got > 0) {
                offer(r, r->buf, got, false);
                return;
        }
        if (n < 0 && errno == EAGAIN)
                return;
        /* EOF, or a read error, which ends the input just the same. */
        offer(r, NULL, 0, true);
}

static int on_io(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        read_chunk(userdata);
        return 0;
}

static int on_defer(sd_event_source *s, void *userdata) {
        read_chunk(userdata);
        return 0;
}

int stdin_reader_new(sd_event *event, stdin_data_handler handler, void *userdata, StdinReader **ret) {
        StdinReader *r;
        int k;

        r = calloc(1, sizeof(*r));
        if (!r)
                return -ENOMEM;
        r->buf = malloc(STDIN_CHUNK);
        r->held = malloc(STDIN_CHUNK);
        if (!r->buf || !r->held) {
                stdin_reader_free(r);
                return -ENOMEM;
        }
        r->event = event;
        r->handler = handler;
        r->is_tty = isatty(STDIN_FILENO);
        r->userdata = userdata;

        k = sd_event_add_io(event, &r->source, STDIN_FILENO, EPOLLIN, on_io, r);
        if (k == -EPERM) {
                /* Regular files (and /dev/null) are always readable; take turns with the network. */
                r->is_file = true;
                k = sd_event_add_defer(event, &r->source, on_defer, r);
        }
        if (k >= 0)
                k = sd_event_source_set_enabled(r->source, SD_EVENT_ON);
        if (k < 0) {
                stdin_reader_free(r);
                return k;
        }
        *ret = r;
        return 0;
}

StdinReader *stdin_reader_free(StdinReader *r) {
        if (!r)
                return NULL;
        stop(r);
        free(r->buf);
        free(r->held);
        free(r);
        return NULL;
}

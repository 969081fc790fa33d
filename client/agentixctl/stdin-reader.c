/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

#include "macro.h"
#include "stdin-reader.h"

struct StdinReader {
        sd_event_source *source;
        stdin_data_handler handler;
        void *userdata;
};

static void stop(StdinReader *r) {
        r->source = sd_event_source_disable_unref(r->source);
}

static void read_chunk(StdinReader *r) {
        char buf[STDIN_CHUNK];
        ssize_t n;

        n = read(STDIN_FILENO, buf, sizeof(buf));
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
                return;
        if (n > 0) {
                if (r->handler(buf, (size_t) n, r->userdata) < 0)
                        stop(r);
                return;
        }
        stop(r);
        (void) r->handler(NULL, 0, r->userdata);
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
        r->handler = handler;
        r->userdata = userdata;

        k = sd_event_add_io(event, &r->source, STDIN_FILENO, EPOLLIN, on_io, r);
        if (k == -EPERM)
                /* Regular files (and /dev/null) are always readable; take turns with the network. */
                k = sd_event_add_defer(event, &r->source, on_defer, r);
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
        free(r);
        return NULL;
}

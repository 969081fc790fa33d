/* SPDX-License-Identifier: MIT */
#include <sys/socket.h>

#include "frame-sink.h"
#include "frame.h"

int frame_sink_init(FrameSink *s, int fd) {
        *s = (FrameSink) { .fd = fd };
        return -pthread_mutex_init(&s->lock, NULL);
}

void frame_sink_done(FrameSink *s) {
        pthread_mutex_destroy(&s->lock);
}

int frame_sink_prepare(Buffer *b) {
        if (b->headroom == FRAME_HEADER_SIZE && b->mem) {
                buffer_clear(b);
                return 0;
        }
        buffer_done(b);
        return buffer_set_headroom(b, FRAME_HEADER_SIZE);
}

int frame_sink_send(FrameSink *s, Buffer *b, uint8_t kind) {
        uint8_t *frame;
        size_t size, done = 0;
        int r;

        if (b->headroom != FRAME_HEADER_SIZE || !b->mem)
                return -EINVAL;
        frame = b->mem;
        size = FRAME_HEADER_SIZE + b->len;
        r = frame_seal(frame, size, kind);
        if (r < 0)
                return r;

        pthread_mutex_lock(&s->lock);
        if (s->broken)
                r = -EPIPE;
        while (r >= 0 && done < size) {
                /* MSG_NOSIGNAL: a vanished server is an error to handle, not a SIGPIPE. */
                ssize_t k = send(s->fd, frame + done, size - done, MSG_NOSIGNAL);
                if (k < 0) {
                        if (errno == EINTR)
                                continue;
                        r = negative_errno();
                        s->broken = true;
                        break;
                }
                done += (size_t) k;
        }
        pthread_mutex_unlock(&s->lock);
        return r;
}

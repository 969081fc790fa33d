/* SPDX-License-Identifier: MIT */
#pragma once

/* The worker's side of the frame socket for writing: many call threads send frames, one at a
 * time (a mutex), with blocking writes — a slow server makes the writers wait, which is the
 * backpressure for streams. Frames are assembled in place behind FRAME_HEADER_SIZE bytes of
 * buffer headroom, so a result is never copied again on its way out. */

#include <pthread.h>
#include <stdbool.h>

#include "buffer.h"

typedef struct FrameSink {
        pthread_mutex_t lock;
        int fd;
        bool broken; /* a write failed: the server is gone, later sends fail fast */
} FrameSink;

int frame_sink_init(FrameSink *s, int fd);
void frame_sink_done(FrameSink *s);

/* Make `b` ready to assemble a frame: empty, with header headroom. */
int frame_sink_prepare(Buffer *b);

/* Seal the frame in `b` (prepared with frame_sink_prepare()) as `kind` and send it. */
int frame_sink_send(FrameSink *s, Buffer *b, uint8_t kind);

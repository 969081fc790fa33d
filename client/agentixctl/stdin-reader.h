/* SPDX-License-Identifier: MIT */
#pragma once

/* Our stdin, read inside the event loop in chunks: a terminal, pipe or socket when epoll says
 * so, a regular file (which epoll refuses) a chunk per loop iteration. When the consumer cannot
 * take a chunk yet, the reader keeps it and stops reading — a producer writing into our pipe
 * then waits — until the consumer says go on (stdin_reader_resume(), when the call's inbox has
 * room again), or, for a full send queue, offers it again a little later: stdin is read no
 * faster than the command in the sandbox takes it. */

#include <stddef.h>

#include <systemd/sd-event.h>

/* The sandbox counts bidi inbox items (libagentix keeps at most 64 unacknowledged, and 16 MiB),
 * so each item carries as much as there is: reads from a pipe are gathered for up to
 * STDIN_GATHER_MSEC, up to STDIN_CHUNK. */
#define STDIN_CHUNK (1024u * 1024u)
#define STDIN_GATHER_MSEC 2
#define STDIN_RETRY_USEC (5 * 1000ULL)

/* Called with each chunk, then with (NULL, 0) at EOF or on a read error (which ends the input
 * just the same). Return 0 when the chunk (or the EOF) was taken; -EAGAIN to have it offered
 * again at stdin_reader_resume(); -ENOBUFS to have it offered again after STDIN_RETRY_USEC;
 * another negative errno to stop reading. */
typedef int (*stdin_data_handler)(const void *data, size_t size, void *userdata);

typedef struct StdinReader StdinReader;

int stdin_reader_new(sd_event *event, stdin_data_handler handler, void *userdata, StdinReader **ret);
StdinReader *stdin_reader_free(StdinReader *r);
/* The consumer can take more: offer the chunk it refused with -EAGAIN (if any) now. */
void stdin_reader_resume(StdinReader *r);

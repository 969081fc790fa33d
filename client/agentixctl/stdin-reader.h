/* SPDX-License-Identifier: MIT */
#pragma once

/* Our stdin, read inside the event loop in chunks: a terminal, pipe or socket when epoll says
 * so, a regular file (which epoll refuses) a chunk per loop iteration. When the consumer cannot
 * take a chunk yet (the connection's send queue is full), the reader keeps it, stops reading
 * and offers it again a little later: stdin is read no faster than it can be sent. */

#include <stddef.h>

#include <systemd/sd-event.h>

/* The sandbox buffers bidi inbox items by count (64 per call) and sends no acknowledgement
 * back, so each item carries as much as there is: reads from a pipe are gathered for up to
 * STDIN_GATHER_MSEC, up to STDIN_CHUNK. */
#define STDIN_CHUNK (1024u * 1024u)
#define STDIN_GATHER_MSEC 2
#define STDIN_RETRY_USEC (5 * 1000ULL)

/* Called with each chunk, then with (NULL, 0) at EOF or on a read error (which ends the input
 * just the same). Return 0 when the chunk (or the EOF) was taken, -EAGAIN or -ENOBUFS to have
 * it offered again later, another negative errno to stop reading. */
typedef int (*stdin_data_handler)(const void *data, size_t size, void *userdata);

typedef struct StdinReader StdinReader;

int stdin_reader_new(sd_event *event, stdin_data_handler handler, void *userdata, StdinReader **ret);
StdinReader *stdin_reader_free(StdinReader *r);

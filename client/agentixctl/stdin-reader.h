/* SPDX-License-Identifier: MIT */
#pragma once

/* Our stdin, read inside the event loop in chunks: a terminal, pipe or socket when epoll says
 * so, a regular file (which epoll refuses) a chunk per loop iteration. */

#include <stddef.h>

#include <systemd/sd-event.h>

#define STDIN_CHUNK (64u * 1024u)

/* Called with each chunk, then once with (NULL, 0) at EOF or on a read error (which ends the
 * input just the same; the reader is stopped then). Return < 0 to stop reading. */
typedef int (*stdin_data_handler)(const void *data, size_t size, void *userdata);

typedef struct StdinReader StdinReader;

int stdin_reader_new(sd_event *event, stdin_data_handler handler, void *userdata, StdinReader **ret);
StdinReader *stdin_reader_free(StdinReader *r);

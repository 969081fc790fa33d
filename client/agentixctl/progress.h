/* SPDX-License-Identifier: MIT */
#pragma once

/* A one-line progress bar on stderr for cp: percentage, bar, bytes done of total, rate, ETA and
 * files. Drawn only when stderr is a terminal, -q is not given and the transfer runs long
 * enough to be worth watching (the first frame appears after PROGRESS_DELAY_USEC), then at
 * most every PROGRESS_INTERVAL_USEC. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PROGRESS_DELAY_USEC (300 * 1000ULL)
#define PROGRESS_INTERVAL_USEC (100 * 1000ULL)

typedef struct Progress {
        bool enabled;
        bool drawn;         /* a frame is on the screen (finish ends the line) */
        int fd;
        uint64_t total_bytes, done_bytes;
        uint64_t total_files, done_files;
        uint64_t start_usec, last_draw_usec;
} Progress;

/* quiet: never draw (-q). */
void progress_init(Progress *p, uint64_t total_bytes, uint64_t total_files, bool quiet);
void progress_add(Progress *p, uint64_t bytes, uint64_t files);
/* Draw the final frame (when anything was drawn) and end the line. */
void progress_finish(Progress *p);

/* One frame into buf (at most `width` columns, no newline). Exposed for tests. */
void progress_format(char *buf, size_t size, unsigned width, uint64_t done, uint64_t total, uint64_t files_done,
                     uint64_t files_total, uint64_t elapsed_usec);

/* SPDX-License-Identifier: MIT */
#pragma once

/* A bounded, deterministic tree walk for grep and glob: entries visited in name order,
 * symbolic links never followed into directories, a deadline and a cancellation check,
 * a depth limit (each level holds one directory fd), and a flag for anything that had to
 * be skipped so the caller can report a partial result. */

#include <dirent.h>
#include <stdbool.h>
#include <stdint.h>

#include "buffer.h"
#include "fs-ops.h"

#define FS_WALK_MAX_DEPTH 256u
#define FS_WALK_MAX_DIR_ENTRIES (1024u * 1024u)

typedef struct FsWalk FsWalk;

struct FsWalk {
        /* Set by the caller. */
        uint64_t deadline_usec;  /* CLOCK_MONOTONIC (now_usec()); 0: none */
        FsCancelled cancelled;   /* optional */
        void *userdata;

        /* A directory `name` in dir_fd (the directory with context parent_ctx) is about to be
         * entered: return 1 to descend (with *ret_child_ctx for its entries, released with
         * free_ctx), 0 to skip it, or a negative errno to abort the walk. */
        int (*on_directory)(FsWalk *w, int dir_fd, const char *name, void *parent_ctx, void **ret_child_ctx);
        void (*free_ctx)(void *ctx);
        /* A regular file or a symbolic link (type DT_REG or DT_LNK) in dir_fd. Return 0, or a
         * negative errno to abort the walk; call fs_walk_stop() to end it early. */
        int (*on_file)(FsWalk *w, int dir_fd, const char *name, unsigned char type, void *dir_ctx);

        /* While a callback runs: the absolute path of the entry, NUL-terminated. */
        Buffer path;
        size_t root_len;         /* path[0..root_len) is the root, without a trailing '/' */

        bool stopped;            /* the walk ended early (deadline, cancellation, fs_walk_stop) */
        bool incomplete;         /* something was skipped: unreadable, too deep, too big, stopped */
        unsigned ticks;
};

/* Walk the directory open as root_fd (not closed) whose absolute path is root_path. */
int fs_walk_run(FsWalk *w, const char *root_path, int root_fd, void *root_ctx);

/* True once the walk should end: deadline passed or caller cancelled (checked every call
 * for the clock is cheap, but callers doing long work per file should call it too). */
bool fs_walk_should_stop(FsWalk *w);

static inline void fs_walk_stop(FsWalk *w) {
        w->stopped = w->incomplete = true;
}

void fs_walk_done(FsWalk *w);

/* SPDX-License-Identifier: MIT */
#pragma once

/* File helpers for assembling store paths and layers on the build host. */

#include <dirent.h>
#include <sys/types.h>

/* mkdir -p, each new directory with mode 0755. */
int mkdir_parents(const char *path);
/* rm -rf (does not follow links). Missing is fine. */
int remove_tree(const char *path);
/* Copy a regular file's contents into a new file (O_EXCL) with `mode`. */
int copy_file(const char *from, const char *to, mode_t mode);
/* Read a file (not following a final link) in chunks, handing each to consume; a negative
 * return from consume stops and is returned. */
int read_file_chunks(const char *path, int (*consume)(const void *buf, size_t n, void *userdata), void *userdata);
/* The relative path from directory `from_dir` to `to`, both relative to one root. */
char *relative_path(const char *from_dir, const char *to);

static inline void closedirp(DIR **d) {
        if (*d)
                closedir(*d);
}

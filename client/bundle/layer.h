/* SPDX-License-Identifier: MIT */
#pragma once

/* Image layers: uncompressed tar archives written with libarchive, byte for byte the same for
 * the same files (sorted names, owner 0:0, no user or group names, mtime 1), hashed with
 * SHA-256 as they are written (the hash is the layer's diff id). libarchive converts names from
 * the locale's character set: run with LC_CTYPE=C.UTF-8 so that file names, which Debian
 * packages spell in UTF-8, go in unchanged whatever the user's locale. */

/* Bump when the same files would give different archive bytes: cached layers carry it. */
#define LAYER_FORMAT "l1"

#include <stdint.h>
#include <sys/types.h>

#define DIGEST_HEX_LEN 64

typedef struct LayerTree {
        const char *dir;          /* a directory on disk */
        const char *name;         /* where it goes in the archive: "nix/store/<basename>" */
} LayerTree;

/* Write the trees (each with its parent directories first) to `path`, replacing it atomically.
 * ret_diff_id: lowercase hex SHA-256 of the archive. */
int layer_write(const char *path, const LayerTree *trees, size_t n_trees, char ret_diff_id[DIGEST_HEX_LEN + 1],
                uint64_t *ret_size);

struct archive;
/* An entry's header as every archive here writes it: owner 0:0, no names, mtime 1. */
int archive_write_entry(struct archive *a, const char *name, mode_t mode, int64_t size, const char *link);
/* The contents of the file at path, after its header was written. */
int archive_write_file_data(struct archive *a, const char *path);

void digest_to_hex(const uint8_t d[32], char out[DIGEST_HEX_LEN + 1]);

/* SPDX-License-Identifier: MIT */
#pragma once

/* The bundle cache's roots (what each bundle's latest build uses) and its collection
 * (cache-gc.c): `agentixctl build --gc`. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The cache's lock: builds hold it shared, a collection alone. -EBUSY when it cannot have it
 * now (never waits). */
int cache_lock(const char *cache_dir, bool exclusive, int *ret_fd);

/* Record what the build of bundle name/version for platform used: store path names (their
 * directories under store/) and layer keys (layers/KEY.l1.tar). Replaces that bundle and
 * platform's earlier record. */
int cache_record_build(const char *cache_dir, const char *name, const char *version, const char *platform,
                       char *const *store, char *const *layers);

typedef struct CacheGcResult {
        size_t n_roots;          /* builds whose paths were kept */
        size_t n_store_paths;    /* removed */
        size_t n_layers;         /* removed */
        uint64_t bytes_freed;    /* disk space, as du counts it */
} CacheGcResult;

/* Remove every store path and layer no record names. A record that cannot be read stops it
 * (-EBADMSG, *ret_error names the file) before anything is removed; -EBUSY (*ret_error says
 * so) while a build runs. */
int cache_gc(const char *cache_dir, CacheGcResult *ret, char **ret_error);

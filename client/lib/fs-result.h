/* SPDX-License-Identifier: MIT */
#pragma once

/* Reading the fs module's result maps (runtime/modules/fs/README.md) into agentix.h's C
 * structs. Kept apart from the calls so they can be tested with hand-made maps. A result of
 * the wrong shape is -EPROTO (AGENTIX_E_PROTOCOL). */

#include <msgpack.h>

#include "agentix.h"

/* A single-file result's {error, message}: 0 when error is nil, else AGENTIX_E_FILE. */
int fs_result_check(const msgpack_object *map, agentix_error *ret_error);

/* upload/download: a list of n {path, content?, error, message} maps, in input order. */
int fs_result_files(const msgpack_object *list, size_t n, agentix_file_result **ret, agentix_error *ret_error);

int fs_result_read(const msgpack_object *map, agentix_read_result *ret, agentix_error *ret_error);

/* ls ({entries: […]}) and glob ({matches: […]}, regular files). */
int fs_result_entries(const msgpack_object *map, const char *key, agentix_entries *ret, agentix_error *ret_error);

int fs_result_matches(const msgpack_object *map, agentix_matches *ret, agentix_error *ret_error);

/* SPDX-License-Identifier: MIT */
#pragma once

/* Making a named store path exist on disk, in the build cache: files copied, links pointed
 * into the store, ELF objects patched (interpreter, RUNPATH, no default library paths) with
 * patchelf. A store path once made is reused by every later build that names it. */

#include "store-path.h"

/* cache_store: the cache's store directory. Sets *ret_made when it had to be made. On failure a
 * message for a person is in *ret_error. */
int store_path_build(StorePath *sp, const char *cache_store, bool *ret_made, char **ret_error);

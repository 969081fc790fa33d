/* SPDX-License-Identifier: MIT */
#pragma once

/* Building a [Module NAME] of agentix-bundle.conf from its Sources=: cc -shared -fPIC with
 * agentix-module.h and msgpack-c's headers on the include path, no debug information and the
 * project's directory mapped to ".", so that the same sources give the same bytes. */

#include "bundle-manifest.h"

/* Sources are relative to base_dir; include_dir holds agentix-module.h. On failure, one line
 * for a person in *ret_error (the compiler's own output has gone to stderr). */
int module_compile(const BundleModule *mod, const char *base_dir, const char *include_dir, const char *out,
                   char **ret_error);

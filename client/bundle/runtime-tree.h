/* SPDX-License-Identifier: MIT */
#pragma once

/* /nix/runtime, the part of a bundle that is not a store path: bin/ (links to every program),
 * lib/agentix/modules/ (links to the modules), lib/lws (libwebsockets' plugins), etc/environment,
 * manifest.json (every store path, its source package and version), and the manifest's
 * [Files]. */

#include "bundle-manifest.h"
#include "closure.h"

typedef struct RuntimeTree {
        Closure *c;                 /* named store paths */
        const BundleManifest *m;
        char *const *env;           /* runtime_environment() */
        const char *platform;       /* "linux/amd64" */
} RuntimeTree;

/* Write the tree under root (a new directory). On failure, one line for a person in
 * *ret_error. */
int runtime_tree_write(const RuntimeTree *t, const char *root, char **ret_error);

/* SPDX-License-Identifier: MIT */
#pragma once

/* agentixctl build: a project's manifest in, a bundle image out — closure, store paths, layers,
 * the image archive, and the image loaded into Docker (or written to a file). */

#include <stdbool.h>
#include <stdint.h>

#include "layer.h"

typedef enum BuildStep {
        BUILD_STEP_RESOLVE,
        BUILD_STEP_MODULES,
        BUILD_STEP_STORE,
        BUILD_STEP_LAYERS,
        BUILD_STEP_IMAGE,
        BUILD_STEP_LOAD,
        _BUILD_STEP_MAX,
} BuildStep;

typedef void (*BuildProgress)(BuildStep step, size_t done, size_t total, const char *what, void *userdata);

typedef struct BundleBuildOptions {
        const char *manifest;       /* agentix-bundle.conf */
        const char *platform;       /* NULL: the manifest's, else the build host's */
        const char *output;         /* write the archive here instead of loading it into Docker */
        const char *tag;            /* REPOSITORY[:TAG] instead of NAME:VERSION and NAME:latest */
        const char *cache_dir;
        const char *runtime_dir;    /* agentix-server and agentix-worker; NULL: the installed ones */
        const char *include_dir;    /* agentix-module.h for modules built from sources */
        BuildProgress progress;
        void *userdata;
} BundleBuildOptions;

typedef struct BundleBuildResult {
        char id[DIGEST_HEX_LEN + 1];  /* the image id, without "sha256:" */
        char *name, *version;
        char **tags;                  /* what the image was tagged (or the archive names) */
        size_t n_store_paths, n_layers, n_made;
        size_t n_hashed;              /* store paths whose files were read (not cached) */
        size_t n_layers_written;      /* layers written (not cached) */
        uint64_t size;                /* bytes in the layers */
        bool loaded;                  /* false: Docker had the image already (tags refreshed) */
        unsigned n_warnings;
} BundleBuildResult;

/* On failure, *ret_error is one line for a person. -ENOENT: the manifest is missing. */
int bundle_build(const BundleBuildOptions *o, BundleBuildResult *ret, char **ret_error);
void bundle_build_result_done(BundleBuildResult *r);

/* "os/arch[/variant]" of this host, as an image records it (linux/amd64). */
int platform_of_host(const char *dpkg_arch, char **ret);

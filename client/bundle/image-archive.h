/* SPDX-License-Identifier: MIT */
#pragma once

/* A bundle image as Docker's image archive (what `docker save` writes and POST /images/load
 * reads): manifest.json, the config as <id>.json, and each layer as <diff id>/layer.tar. The
 * image id is the SHA-256 of the config, which holds nothing but what the inputs decide. */

#include <stdint.h>

#include "layer.h"

typedef struct ImageLayer {
        char *path;                       /* the layer's tar on disk */
        char diff_id[DIGEST_HEX_LEN + 1];
        char *comment;                    /* history: what the layer holds */
} ImageLayer;

typedef struct ImageSpec {
        const char *os, *architecture, *variant; /* variant may be NULL */
        ImageLayer *layers;
        size_t n_layers;
        char **tags;                      /* "name:tag" */
        char **labels;                    /* "key=value" */
        char **env;                       /* the image's own Env */
} ImageSpec;

/* The config JSON (compact, sorted keys) and its id ("sha256:<hex>"). */
int image_config(const ImageSpec *spec, char **ret_json, char ret_id[DIGEST_HEX_LEN + 1]);

/* Write the archive to fd. */
int image_archive_write(int fd, const ImageSpec *spec, const char *config_json, const char *id);

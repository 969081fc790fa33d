/* SPDX-License-Identifier: MIT */
#pragma once

/* The few Docker Engine API calls a build needs, with libcurl on the daemon's unix socket
 * ($DOCKER_HOST, default unix:///var/run/docker.sock). Blocking: agentixctl waits for them. */

#include <stdbool.h>

typedef struct DockerEngine DockerEngine;

/* Connect and negotiate the API version (GET /version). On failure *ret_error says why. */
int docker_engine_open(DockerEngine **ret, char **ret_error);
DockerEngine *docker_engine_free(DockerEngine *d);

/* Is an image with this id ("sha256:<hex>") or reference there? 1 yes, 0 no. */
int docker_image_exists(DockerEngine *d, const char *ref, char **ret_error);
/* POST /images/load with the archive in `path`. */
int docker_image_load(DockerEngine *d, const char *path, char **ret_error);
/* Tag an image as repo:tag. */
int docker_image_tag(DockerEngine *d, const char *ref, const char *repo, const char *tag, char **ret_error);

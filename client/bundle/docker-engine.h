/* SPDX-License-Identifier: MIT */
#pragma once

/* The few Docker Engine API calls a build makes, blocking (agentixctl waits for them), over the
 * client agentd uses too (runtime/shared/docker-client.h), at $DOCKER_HOST (unix://PATH,
 * default /var/run/docker.sock). */

#include "docker-client.h"

/* Connect and negotiate the API version (GET /version). On failure *ret_error says why. */
int docker_engine_open(DockerClient **ret, char **ret_error);

/* Is an image with this id ("sha256:<hex>") or reference there? 1 yes, 0 no. */
int docker_image_exists(DockerClient *d, const char *ref, char **ret_error);
/* POST /images/load with the archive in `path`. */
int docker_image_load(DockerClient *d, const char *path, char **ret_error);
/* Tag an image as repo:tag. */
int docker_image_tag(DockerClient *d, const char *ref, const char *repo, const char *tag, char **ret_error);

/* SPDX-License-Identifier: MIT */
#pragma once

/* Where Docker's Engine API is: the unix socket $DOCKER_HOST names (unix://PATH), else
 * /var/run/docker.sock. Shared by agentixctl build and agentd. */

/* *ret: the socket's path (malloc'ed). -EPROTONOSUPPORT when $DOCKER_HOST is not unix://. */
int docker_socket_from_env(char **ret);

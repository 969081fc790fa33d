/* SPDX-License-Identifier: MIT */
#pragma once

/* What every Engine API backend of agentd (docker, podman, swarm) needs beside the client
 * itself (docker-client.h, shared with agentixctl build): labels, logs, errors, settings. */

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "buffer.h"
#include "docker-client.h"
#include "macro.h"

/* A label's value as a decimal number; *ok becomes false when it is missing or not one. */
uint64_t docker_label_u64(json_t *labels, const char *key, bool *ok);
/* The caller's labels among a container's or service's (all but agentd's org.agentix.*), as
 * "key=value" strings in *ret (NULL: none). 0 or -ENOMEM. */
int docker_caller_labels(json_t *labels, char ***ret);
/* The payloads of a container or service log's frames (Docker multiplexes stdout and stderr),
 * appended to out in order; -EBADMSG for what is not frames. */
int docker_logs_demultiplex(const void *frames, size_t size, Buffer *out);
/* A backend's new() failing: *ret_error (malloc'ed, NULL without memory) says why; returns r. */
int backend_new_error(char **ret_error, int r, const char *fmt, ...) _printf_(3, 4);
/* $AGENTD_BACKEND_TIMEOUT in *ret_usec when set (else untouched); -EINVAL and *ret_error
 * (malloc'ed) naming it when it is no number of seconds from 0.1 to 3600. */
int docker_timeout_from_env(uint64_t *ret_usec, char **ret_error);

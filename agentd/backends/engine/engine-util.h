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

/* Which agentd made a container, when more than one shares a service (a test's or a
 * developer's beside the host's): $AGENTD_INSTANCE, as the label org.agentix.instance on every
 * container it makes. An agentd adopts, follows and prunes only containers whose label is its
 * own name, and one that names none only containers without it (those of before the label). */
#define AGENTD_INSTANCE_ENV "AGENTD_INSTANCE"
#define AGENTD_INSTANCE_LABEL "org.agentix.instance"
#define AGENTD_INSTANCE_MAX 64
/* $AGENTD_INSTANCE in *ret (malloc'ed; NULL when unset or empty); -EINVAL and *ret_error
 * (malloc'ed) naming it when it is more than AGENTD_INSTANCE_MAX characters or holds any but
 * letters, digits, '.', '_' and '-'. */
int docker_instance_from_env(char **ret, char **ret_error);
/* Whether labels (a container's, or an event's attributes) name instance (NULL: none, which a
 * missing or empty label names). */
bool docker_labels_instance_is(json_t *labels, const char *instance);

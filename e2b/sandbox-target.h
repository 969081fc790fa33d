/* SPDX-License-Identifier: MIT */
#pragma once

/* Which sandbox and port a request for the gateway names: E2B's headers E2b-Sandbox-Id and
 * E2b-Sandbox-Port, or (with --domain) a Host of PORT-ID.DOMAIN[:N], as getHost() makes it.
 * Pure functions of the head's bytes, so that a fuzzer can drive them (fuzz-sandbox-target). */

#include <stdbool.h>
#include <stddef.h>

#include "http-head.h"

#define SANDBOX_ID_MAX 64 /* with its NUL: agentd's ids are 16 letters and digits */

/* A sandbox id as agentd makes them: 1 to SANDBOX_ID_MAX - 1 lowercase letters and digits. */
bool sandbox_id_ok(const char *s, size_t n);

/* Host (n bytes, not NUL-terminated) as PORT-ID.DOMAIN[:N]: the port and the id (NUL-terminated).
 * false when it names no sandbox. */
bool host_names_sandbox(const char *domain, const char *host, size_t n, unsigned *ret_port,
                        char ret_id[static SANDBOX_ID_MAX]);

/* The sandbox and port h names (domain: NULL when Host names none). -ENOENT: none (not sandbox
 * traffic); -EINVAL: E2b-Sandbox-Id is there but it or E2b-Sandbox-Port is not right. */
int sandbox_target(const char *domain, const HttpHead *h, char ret_id[static SANDBOX_ID_MAX], unsigned *ret_port);

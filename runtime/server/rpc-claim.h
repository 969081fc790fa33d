/* SPDX-License-Identifier: MIT */
#pragma once

/* runtime::claim, the server's half. agentd keeps sandboxes warm in pools, made with a token
 * only agentd knows; a create that takes one claims it: one call, runtime::claim(token=NEW,
 * env=…, workdir=…), made with the old token. The worker applies env and workdir (the built-in
 * module "runtime"); once it has, the server answers, takes NEW as its only token, and ends every
 * other connection (they were made with the old one). A runtime is claimed once: a second
 * claim, or one while other calls run, is refused. */

#include <msgpack.h>
#include <stdbool.h>
#include <stddef.h>

#define CLAIM_CALLABLE "runtime::claim"
#define CLAIM_TOKEN_MIN 16
#define CLAIM_TOKEN_MAX 256

static inline bool claim_is_call(const char *callable, size_t len) {
        return len == sizeof(CLAIM_CALLABLE) - 1 && memcmp(callable, CLAIM_CALLABLE, len) == 0;
}

/* The new token: the call's keyword argument token, 16 to 256 printable ASCII characters other
 * than space. NULL with *ret_error set (for a BadRequest) when it is missing or malformed. */
char *claim_token(const msgpack_object *envelope_map, const char **ret_error);

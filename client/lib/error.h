/* SPDX-License-Identifier: MIT */
#pragma once

/* Filling an agentix_error: from the wire's error map, from an fs result's error code, or for
 * a local failure. Every setter returns the negative errno it stored, so call sites can write
 * `return error_set(ret_error, AGENTIX_E_INVALID, -EINVAL, "…")`. A NULL error is fine. */

#include <msgpack.h>

#include "agentix.h"
#include "macro.h"

int error_set(agentix_error *e, agentix_error_kind kind, int code, const char *fmt, ...) _printf_(4, 5);
/* Like error_set() with a .type too (copied). */
int error_set_typed(agentix_error *e, agentix_error_kind kind, int code, const char *type, const char *fmt, ...)
        _printf_(5, 6);

/* From the `error` map of a call:error envelope ({type, message, traceback, cancelled,
 * returncode?}). A map that is not one gives AGENTIX_E_PROTOCOL. */
int error_from_wire(agentix_error *e, const msgpack_object *map);

/* From an fs result's {error, message}: AGENTIX_E_FILE with .type the code. */
int error_from_file(agentix_error *e, const msgpack_object *code, const msgpack_object *message);

int error_copy(agentix_error *dst, const agentix_error *src);

/* The kind and errno a wire error type stands for (unknown types: AGENTIX_E_REMOTE). */
agentix_error_kind error_kind_from_type(const char *type, size_t len);
int error_kind_errno(agentix_error_kind kind);
/* The errno an fs error code stands for ("file_not_found" → -ENOENT, …; unknown: -EIO). */
int error_file_errno(const char *code, size_t len);

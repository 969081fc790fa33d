/* SPDX-License-Identifier: MIT */
#pragma once

/* msgpack values on the client side: unpacking bytes that must outlive the buffer they came
 * in, checking the caller's packed arguments, and copying fields of result maps into C. */

#include <stdbool.h>
#include <stdint.h>

#include <msgpack.h>

/* Check (mp_check) and unpack one object from bytes that are only valid for now: the bytes
 * are copied into the result's zone, so the tree lives until msgpack_unpacked_destroy().
 * -EBADMSG when the bytes are not exactly one msgpack object, -ENOMEM. */
int value_unpack_owned(const void *data, size_t size, msgpack_unpacked *ret);

/* Caller-packed call arguments: exactly one msgpack array (args) or map (kwargs). */
bool value_is_packed_array(const void *data, size_t size);
bool value_is_packed_map(const void *data, size_t size);

/* A str or bin as a malloc()ed NUL-terminated copy; nil (or NULL o) gives NULL with 0.
 * -EINVAL for other types, -ENOMEM. */
int value_dup_bytes(const msgpack_object *o, char **ret, size_t *ret_size);

/* Field readers for result maps: a missing or nil field gives the default; a field of the
 * wrong type is -EPROTO. */
int value_get_bool(const msgpack_object *map, const char *key, bool def, bool *ret);
int value_get_int(const msgpack_object *map, const char *key, int64_t def, int64_t *ret);
int value_get_bytes(const msgpack_object *map, const char *key, char **ret, size_t *ret_size);

/* An env argument: "KEY=VALUE" (a bare "KEY": nil, unset) as a map of str. -E2BIG, -ENOMEM. */
int value_pack_env(msgpack_packer *pk, const char *const *env);

/* The call_id of an envelope from its first bytes only (an event too large to keep): the
 * server packs call_id first. Parsed by hand, allocating nothing. -ENOENT when not found. */
int value_scan_call_id(const uint8_t *head, size_t size, char *buf, size_t buf_size);

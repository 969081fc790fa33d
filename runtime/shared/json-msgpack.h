/* SPDX-License-Identifier: MIT */
#pragma once

/* JSON ⇄ msgpack, for the command line (agentixctl) and the programs that read JSON peers.
 *
 * JSON has no byte strings, so agentixctl spells msgpack `bin` values as {"$bytes": "<base64>"}
 * (standard alphabet, padded) in both directions; an object with exactly that one key and a
 * string value is always read as bytes. msgpack `str` values that are not valid UTF-8 come out
 * the same way, since JSON strings must be text. Map keys that are not strings are printed as
 * their JSON text ({"1": …} for the key 1). Integers beyond the signed 64-bit range become
 * JSON reals (jansson's integers are signed 64-bit); `ext` values are printed as
 * {"$ext": type, "$bytes": …} and cannot be sent. */

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>
#include <msgpack.h>

/* Pack `j` with `pk`. -EINVAL when `j` holds an object whose "$bytes" value is not canonical
 * base64, -ENOMEM on allocation failure. */
int json_to_msgpack(const json_t *j, msgpack_packer *pk);
/* The same without the "$bytes" reading: for JSON from a peer that does not use that spelling
 * (a Jupyter kernel's application/json), where such an object is just an object. */
int json_to_msgpack_plain(const json_t *j, msgpack_packer *pk);

/* A new JSON value for `o` (NULL only when out of memory). */
json_t *msgpack_to_json(const msgpack_object *o);

/* Bytes as JSON: a string when they are valid UTF-8 without NUL, else {"$bytes": …}. */
json_t *json_from_bytes(const void *data, size_t size);

/* Strict base64 (standard alphabet, padded, canonical). Encode: a malloc()ed NUL-terminated
 * string. Decode: a malloc()ed buffer (NUL-terminated too, for convenience) and its size;
 * -EINVAL for anything an encoder would not have produced. */
int base64_encode(const void *data, size_t size, char **ret);
int base64_decode(const char *text, size_t n, void **ret, size_t *ret_size);

/* SPDX-License-Identifier: MIT */
#pragma once

/* msgpack envelopes of the /rpc namespace: reading fields of a decoded map and packing the
 * maps the server and the worker send ({call_id, value}, {call_id, error: {…}}, …). */

#include <stdbool.h>
#include <stdint.h>

#include <msgpack.h>

#include "buffer.h"

/* Stable error types of the wire protocol. */
#define RPC_ERR_UNAUTHORIZED "Unauthorized"
#define RPC_ERR_BAD_REQUEST "BadRequest"
#define RPC_ERR_NO_SUCH_CALLABLE "NoSuchCallable"
#define RPC_ERR_ARGUMENT "ArgumentError"
#define RPC_ERR_CANCELLED "Cancelled"
#define RPC_ERR_DEADLINE "DeadlineExceeded"
/* One wording, whether the server or the worker saw the deadline pass first. */
#define RPC_DEADLINE_MESSAGE "the call's deadline passed before it finished"
#define RPC_ERR_WORKER_DIED "WorkerDied"
#define RPC_ERR_RESULT_UNAVAILABLE "ResultUnavailable"
#define RPC_ERR_TOO_LARGE "MessageTooLarge"
#define RPC_ERR_TOO_MANY_CALLS "TooManyCalls"

/* Longest call_id accepted (bytes). */
#define RPC_CALL_ID_MAX 128

/* Map lookup by string key; NULL when absent or when `map` is not a map. */
const msgpack_object *mp_map_get(const msgpack_object *map, const char *key);

/* A str field as a pointer/length into the decoded data (not NUL-terminated).
 * Returns 0, -ENOENT when absent, -EINVAL when present but not a str. */
int mp_map_get_str(const msgpack_object *map, const char *key, const char **ret, size_t *ret_len);
/* A str field copied into a NUL-terminated buffer of size `n`; -ENAMETOOLONG when it does
 * not fit, -EINVAL when it contains a NUL byte. */
int mp_map_copy_str(const msgpack_object *map, const char *key, char *buf, size_t n);
/* An integer field (positive or negative fixint/int); -ENOENT / -EINVAL like above. */
int mp_map_get_int(const msgpack_object *map, const char *key, int64_t *ret);

/* The Python-style name of a msgpack type, for error messages ("str", "int", "None", …). */
const char *mp_type_name(msgpack_object_type type);

/* Does the object equal this C string? */
bool mp_str_eq(const msgpack_object *o, const char *s);

/* Pack helpers. */
int mp_pack_str(msgpack_packer *pk, const char *s, size_t n);
int mp_pack_cstr(msgpack_packer *pk, const char *s); /* nil for NULL */

typedef struct RpcError {
        const char *type;
        const char *message;
        const char *traceback; /* may be NULL */
        bool cancelled;
        bool has_returncode;
        int returncode;
} RpcError;

/* Pack the error map {type, message, traceback, cancelled[, returncode]}. */
int rpc_error_pack(msgpack_packer *pk, const RpcError *e);

/* Append a whole {call_id, error: {…}} envelope to `out`. */
int rpc_envelope_error(Buffer *out, const char *call_id, size_t call_id_len, const RpcError *e);
/* Append {call_id} (call:end, call:end_in, cancel, ack). */
int rpc_envelope_call_id(Buffer *out, const char *call_id, size_t call_id_len);

/* msgpack_packer writing into a Buffer. */
int mp_buffer_write(void *data, const char *buf, size_t len);
static inline void mp_packer_init_buffer(msgpack_packer *pk, Buffer *b) {
        msgpack_packer_init(pk, b, mp_buffer_write);
}

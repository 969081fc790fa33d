/* SPDX-License-Identifier: MIT */
#include "envelope.h"

int mp_buffer_write(void *data, const char *buf, size_t len) {
        return buffer_append(data, buf, len) < 0 ? -1 : 0;
}

const char *mp_type_name(msgpack_object_type type) {
        switch (type) {
        case MSGPACK_OBJECT_NIL:
                return "None";
        case MSGPACK_OBJECT_BOOLEAN:
                return "bool";
        case MSGPACK_OBJECT_POSITIVE_INTEGER:
        case MSGPACK_OBJECT_NEGATIVE_INTEGER:
                return "int";
        case MSGPACK_OBJECT_FLOAT32:
        case MSGPACK_OBJECT_FLOAT64:
                return "float";
        case MSGPACK_OBJECT_STR:
                return "str";
        case MSGPACK_OBJECT_BIN:
                return "bytes";
        case MSGPACK_OBJECT_ARRAY:
                return "list";
        case MSGPACK_OBJECT_MAP:
                return "map";
        default:
                return "ext";
        }
}

bool mp_str_eq(const msgpack_object *o, const char *s) {
        size_t n = strlen(s);

        /* msgpack-c decodes an empty str with a NULL pointer: never hand that to memcmp(). */
        return o && o->type == MSGPACK_OBJECT_STR && o->via.str.size == n &&
               (n == 0 || memcmp(o->via.str.ptr, s, n) == 0);
}

const msgpack_object *mp_map_get(const msgpack_object *map, const char *key) {
        if (!map || map->type != MSGPACK_OBJECT_MAP)
                return NULL;
        for (uint32_t i = 0; i < map->via.map.size; i++)
                if (mp_str_eq(&map->via.map.ptr[i].key, key))
                        return &map->via.map.ptr[i].val;
        return NULL;
}

int mp_map_get_str(const msgpack_object *map, const char *key, const char **ret, size_t *ret_len) {
        const msgpack_object *v = mp_map_get(map, key);

        if (!v)
                return -ENOENT;
        if (v->type != MSGPACK_OBJECT_STR)
                return -EINVAL;
        *ret = v->via.str.ptr;
        *ret_len = v->via.str.size;
        return 0;
}

int mp_map_copy_str(const msgpack_object *map, const char *key, char *buf, size_t n) {
        const char *s;
        size_t len;
        int r;

        r = mp_map_get_str(map, key, &s, &len);
        if (r < 0)
                return r;
        if (len >= n)
                return -ENAMETOOLONG;
        if (memchr(s, 0, len))
                return -EINVAL;
        memcpy(buf, s, len);
        buf[len] = 0;
        return 0;
}

int mp_map_get_int(const msgpack_object *map, const char *key, int64_t *ret) {
        const msgpack_object *v = mp_map_get(map, key);

        if (!v)
                return -ENOENT;
        if (v->type == MSGPACK_OBJECT_POSITIVE_INTEGER) {
                if (v->via.u64 > INT64_MAX)
                        return -ERANGE;
                *ret = (int64_t) v->via.u64;
                return 0;
        }
        if (v->type == MSGPACK_OBJECT_NEGATIVE_INTEGER) {
                *ret = v->via.i64;
                return 0;
        }
        return -EINVAL;
}

int mp_pack_str(msgpack_packer *pk, const char *s, size_t n) {
        if (msgpack_pack_str(pk, n) < 0)
                return -ENOMEM;
        return msgpack_pack_str_body(pk, s, n) < 0 ? -ENOMEM : 0;
}

int mp_pack_cstr(msgpack_packer *pk, const char *s) {
        if (!s)
                return msgpack_pack_nil(pk) < 0 ? -ENOMEM : 0;
        return mp_pack_str(pk, s, strlen(s));
}

int rpc_error_pack(msgpack_packer *pk, const RpcError *e) {
        int r = 0;

        r |= msgpack_pack_map(pk, e->has_returncode ? 5 : 4);
        r |= mp_pack_cstr(pk, "type");
        r |= mp_pack_cstr(pk, e->type ?: "Error");
        r |= mp_pack_cstr(pk, "message");
        r |= mp_pack_cstr(pk, e->message ?: "");
        r |= mp_pack_cstr(pk, "traceback");
        r |= mp_pack_cstr(pk, e->traceback);
        r |= mp_pack_cstr(pk, "cancelled");
        r |= e->cancelled ? msgpack_pack_true(pk) : msgpack_pack_false(pk);
        if (e->has_returncode) {
                r |= mp_pack_cstr(pk, "returncode");
                r |= msgpack_pack_int(pk, e->returncode);
        }
        return r ? -ENOMEM : 0;
}

int rpc_envelope_error(Buffer *out, const char *call_id, size_t call_id_len, const RpcError *e) {
        msgpack_packer pk;
        int r = 0;

        mp_packer_init_buffer(&pk, out);
        r |= msgpack_pack_map(&pk, 2);
        r |= mp_pack_cstr(&pk, "call_id");
        r |= mp_pack_str(&pk, call_id ?: "", call_id ? call_id_len : 0);
        r |= mp_pack_cstr(&pk, "error");
        if (r)
                return -ENOMEM;
        return rpc_error_pack(&pk, e);
}

int rpc_envelope_call_id(Buffer *out, const char *call_id, size_t call_id_len) {
        msgpack_packer pk;
        int r = 0;

        mp_packer_init_buffer(&pk, out);
        r |= msgpack_pack_map(&pk, 1);
        r |= mp_pack_cstr(&pk, "call_id");
        r |= mp_pack_str(&pk, call_id, call_id_len);
        return r ? -ENOMEM : 0;
}

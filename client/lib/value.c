/* SPDX-License-Identifier: MIT */
#include "envelope.h"
#include "mp-check.h"
#include "value.h"

static void free_finalizer(void *p) {
        free(p);
}

int value_unpack_owned(const void *data, size_t size, msgpack_unpacked *ret) {
        _cleanup_free_ void *copy = NULL;
        msgpack_unpacked u;
        size_t off = 0;

        if (size == 0 || mp_check(data, size) < 0)
                return -EBADMSG;
        copy = malloc(size);
        if (!copy)
                return -ENOMEM;
        memcpy(copy, data, size);

        /* The tree points into `copy` (msgpack-c references str/bin bytes): tie the copy's
         * lifetime to the tree's zone. */
        msgpack_unpacked_init(&u);
        if (msgpack_unpack_next(&u, copy, size, &off) != MSGPACK_UNPACK_SUCCESS || off != size) {
                msgpack_unpacked_destroy(&u);
                return -EBADMSG;
        }
        if (!u.zone) {
                u.zone = msgpack_zone_new(MSGPACK_ZONE_CHUNK_SIZE);
                if (!u.zone)
                        return -ENOMEM;
        }
        if (!msgpack_zone_push_finalizer(u.zone, free_finalizer, copy)) {
                msgpack_unpacked_destroy(&u);
                return -ENOMEM;
        }
        TAKE_PTR(copy);
        *ret = u;
        return 0;
}

static bool packed_is(const void *data, size_t size, msgpack_object_type type) {
        const uint8_t *p = data;

        if (!p || size == 0 || mp_check(p, size) < 0)
                return false;
        if (type == MSGPACK_OBJECT_ARRAY)
                return (p[0] & 0xf0) == 0x90 || p[0] == 0xdc || p[0] == 0xdd;
        return (p[0] & 0xf0) == 0x80 || p[0] == 0xde || p[0] == 0xdf;
}

bool value_is_packed_array(const void *data, size_t size) {
        return packed_is(data, size, MSGPACK_OBJECT_ARRAY);
}

bool value_is_packed_map(const void *data, size_t size) {
        return packed_is(data, size, MSGPACK_OBJECT_MAP);
}

int value_dup_bytes(const msgpack_object *o, char **ret, size_t *ret_size) {
        const char *p;
        size_t n;
        char *s;

        if (!o || o->type == MSGPACK_OBJECT_NIL) {
                *ret = NULL;
                if (ret_size)
                        *ret_size = 0;
                return 0;
        }
        if (o->type == MSGPACK_OBJECT_STR) {
                p = o->via.str.ptr;
                n = o->via.str.size;
        } else if (o->type == MSGPACK_OBJECT_BIN) {
                p = o->via.bin.ptr;
                n = o->via.bin.size;
        } else
                return -EINVAL;

        s = malloc(n + 1);
        if (!s)
                return -ENOMEM;
        if (n > 0)
                memcpy(s, p, n);
        s[n] = 0;
        *ret = s;
        if (ret_size)
                *ret_size = n;
        return 0;
}

int value_get_bool(const msgpack_object *map, const char *key, bool def, bool *ret) {
        const msgpack_object *v = mp_map_get(map, key);

        if (!v || v->type == MSGPACK_OBJECT_NIL) {
                *ret = def;
                return 0;
        }
        if (v->type != MSGPACK_OBJECT_BOOLEAN)
                return -EPROTO;
        *ret = v->via.boolean;
        return 0;
}

int value_get_int(const msgpack_object *map, const char *key, int64_t def, int64_t *ret) {
        const msgpack_object *v = mp_map_get(map, key);

        if (!v || v->type == MSGPACK_OBJECT_NIL) {
                *ret = def;
                return 0;
        }
        return mp_map_get_int(map, key, ret) < 0 ? -EPROTO : 0;
}

int value_get_bytes(const msgpack_object *map, const char *key, char **ret, size_t *ret_size) {
        int r = value_dup_bytes(mp_map_get(map, key), ret, ret_size);

        return r == -EINVAL ? -EPROTO : r;
}

/* A str header at p: its length in *ret_len, the header's size as the result (0: not a str,
 * or cut off). */
static size_t str_header(const uint8_t *p, size_t n, size_t *ret_len) {
        if (n >= 1 && (p[0] & 0xe0) == 0xa0) {
                *ret_len = p[0] & 0x1f;
                return 1;
        }
        if (n >= 2 && p[0] == 0xd9) {
                *ret_len = p[1];
                return 2;
        }
        if (n >= 3 && p[0] == 0xda) {
                *ret_len = (size_t) p[1] << 8 | p[2];
                return 3;
        }
        if (n >= 5 && p[0] == 0xdb) {
                *ret_len = (size_t) p[1] << 24 | (size_t) p[2] << 16 | (size_t) p[3] << 8 | p[4];
                return 5;
        }
        return 0;
}

int value_scan_call_id(const uint8_t *head, size_t size, char *buf, size_t buf_size) {
        size_t off, n_pairs;

        if (size >= 1 && (head[0] & 0xf0) == 0x80)
                n_pairs = head[0] & 0x0f, off = 1;
        else if (size >= 3 && head[0] == 0xde)
                n_pairs = (size_t) head[1] << 8 | head[2], off = 3;
        else if (size >= 5 && head[0] == 0xdf)
                n_pairs = (size_t) head[1] << 24 | (size_t) head[2] << 16 | (size_t) head[3] << 8 | head[4], off = 5;
        else
                return -ENOENT;

        /* Only str keys and str values can be stepped over; call_id comes first anyway. */
        for (size_t i = 0; i < n_pairs; i++) {
                size_t klen, vlen, kh, vh;
                bool is_id;

                kh = str_header(head + off, size - off, &klen);
                if (kh == 0 || klen > size - off - kh)
                        return -ENOENT;
                is_id = klen == 7 && memcmp(head + off + kh, "call_id", 7) == 0;
                off += kh + klen;
                vh = str_header(head + off, size - off, &vlen);
                if (vh == 0 || vlen > size - off - vh)
                        return -ENOENT;
                if (is_id) {
                        if (vlen == 0 || vlen >= buf_size || memchr(head + off + vh, 0, vlen))
                                return -ENOENT;
                        memcpy(buf, head + off + vh, vlen);
                        buf[vlen] = 0;
                        return 0;
                }
                off += vh + vlen;
        }
        return -ENOENT;
}

int value_pack_env(msgpack_packer *pk, const char *const *env) {
        size_t n = 0;
        int r = 0;

        while (env[n])
                n++;
        if (n > UINT32_MAX)
                return -E2BIG;
        r |= msgpack_pack_map(pk, (uint32_t) n);
        for (size_t i = 0; i < n; i++) {
                const char *eq = strchr(env[i], '=');

                if (eq) {
                        r |= mp_pack_str(pk, env[i], (size_t) (eq - env[i]));
                        r |= mp_pack_cstr(pk, eq + 1);
                } else {
                        r |= mp_pack_cstr(pk, env[i]);
                        r |= msgpack_pack_nil(pk); /* unset */
                }
        }
        return r ? -ENOMEM : 0;
}

/* SPDX-License-Identifier: MIT */
/* The msgpack envelope readers, run the way the server runs them on untrusted call maps and
 * worker frames: mp_check(), then msgpack_unpack_next(), then mp_map_get*() /
 * mp_map_copy_str() on the object and on the maps nested one level down (the "error" map of
 * call:error). Whatever mp_check() accepts must unpack as exactly one object using every
 * byte. The packers get the input's bytes as a call_id and must round-trip it. */
#include "envelope.h"
#include "fuzz-util.h"
#include "mp-check.h"

static const char *const keys[] = {
        "call_id", "callable", "shape", "args", "kwargs", "deadline_ms", "item", "call_ids",
        "value", "error", "type", "message", "traceback", "cancelled", "returncode", "pid",
        /* Not "": msgpack-c gives an empty str a NULL ptr, and mp_str_eq() then passes NULL to
         * memcmp() (UB, reported; no caller looks up an empty key). */
};

static bool is_val_of(const msgpack_object *map, const msgpack_object *v, const char *key) {
        for (uint32_t i = 0; i < map->via.map.size; i++)
                if (&map->via.map.ptr[i].val == v)
                        return mp_str_eq(&map->via.map.ptr[i].key, key);
        return false;
}

static void probe(const msgpack_object *o) {
        for (size_t i = 0; i < ELEMENTSOF(keys); i++) {
                const msgpack_object *v = mp_map_get(o, keys[i]);
                char small[8], id[RPC_CALL_ID_MAX + 1];
                const char *s;
                size_t len;
                int64_t n;
                int r;

                if (o->type != MSGPACK_OBJECT_MAP)
                        CHECK(!v);
                if (v)
                        CHECK(is_val_of(o, v, keys[i]));

                r = mp_map_get_str(o, keys[i], &s, &len);
                CHECK(r == 0 || r == -ENOENT || r == -EINVAL);
                CHECK((r == -ENOENT) == !v);
                if (r == 0)
                        CHECK(v->type == MSGPACK_OBJECT_STR && s == v->via.str.ptr && len == v->via.str.size);

                r = mp_map_get_int(o, keys[i], &n);
                CHECK(r == 0 || r == -ENOENT || r == -EINVAL || r == -ERANGE);
                if (r == 0 && v->type == MSGPACK_OBJECT_POSITIVE_INTEGER)
                        CHECK(n >= 0 && (uint64_t) n == v->via.u64);
                if (r == 0 && v->type == MSGPACK_OBJECT_NEGATIVE_INTEGER)
                        CHECK(n == v->via.i64);

                r = mp_map_copy_str(o, keys[i], id, sizeof(id));
                CHECK(r == 0 || r == -ENOENT || r == -EINVAL || r == -ENAMETOOLONG);
                if (r == 0)
                        CHECK(strlen(id) == v->via.str.size &&
                              (v->via.str.size == 0 || memcmp(id, v->via.str.ptr, v->via.str.size) == 0));
                r = mp_map_copy_str(o, keys[i], small, sizeof(small));
                if (r == 0)
                        CHECK(strlen(small) < sizeof(small));

                if (v && v->type == MSGPACK_OBJECT_MAP)
                        for (size_t j = 0; j < ELEMENTSOF(keys); j++)
                                (void) mp_map_get_str(v, keys[j], &s, &len);
        }
}

static void pack_round_trip(const uint8_t *data, size_t size) {
        _cleanup_buffer_ Buffer b = BUFFER_NULL;
        size_t n = MIN(size, (size_t) RPC_CALL_ID_MAX), off = 0;
        RpcError e = {
                .type = RPC_ERR_BAD_REQUEST,
                .message = "fuzz",
                .cancelled = size & 1,
                .has_returncode = size & 2,
                .returncode = (int) size,
        };
        msgpack_unpacked u;
        const char *s;
        size_t len;

        CHECK(rpc_envelope_error(&b, (const char *) data, n, &e) == 0);
        CHECK(rpc_envelope_call_id(&b, (const char *) data, n) == 0);

        msgpack_unpacked_init(&u);
        for (int i = 0; i < 2; i++) {
                CHECK(msgpack_unpack_next(&u, (const char *) buffer_data(&b), b.len, &off) == MSGPACK_UNPACK_SUCCESS);
                CHECK(mp_map_get_str(&u.data, "call_id", &s, &len) == 0);
                CHECK(len == n && (n == 0 || memcmp(s, data, n) == 0));
        }
        CHECK(off == b.len);
        msgpack_unpacked_destroy(&u);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        msgpack_unpack_return ret;
        msgpack_unpacked u;
        size_t off = 0;
        int r;

        r = mp_check(data, size);
        CHECK(r == 0 || r == -EBADMSG || r == -ELOOP);
        if (r == 0) {
                msgpack_unpacked_init(&u);
                ret = msgpack_unpack_next(&u, (const char *) data, size, &off);
                if (ret != MSGPACK_UNPACK_SUCCESS) {
                        fprintf(stderr, "mp_check() accepted what msgpack-c refuses (%d)\n", (int) ret);
                        abort();
                }
                CHECK(off == size);
                probe(&u.data);
                msgpack_unpacked_destroy(&u);
        }

        pack_round_trip(data, size);
        return 0;
}

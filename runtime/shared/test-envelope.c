/* SPDX-License-Identifier: MIT */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "envelope.h"

/* Unpack a whole buffer into `u`; the buffer must hold exactly one object. */
static const msgpack_object *unpack_all(msgpack_unpacked *u, const Buffer *b) {
        size_t off = 0;

        msgpack_unpacked_init(u);
        assert_int_equal(msgpack_unpack_next(u, (const char *) buffer_data(b), b->len, &off), MSGPACK_UNPACK_SUCCESS);
        assert_int_equal(off, b->len);
        return &u->data;
}

/* {"call_id":"abc","pos":42,"neg":-5,"big":UINT64_MAX,"nul":"x\0y","arr":[1],"int_key"→…} */
static void pack_sample(Buffer *b) {
        msgpack_packer pk;

        mp_packer_init_buffer(&pk, b);
        assert_int_equal(msgpack_pack_map(&pk, 8), 0);
        assert_int_equal(mp_pack_cstr(&pk, "call_id"), 0);
        assert_int_equal(mp_pack_cstr(&pk, "abc"), 0);
        assert_int_equal(mp_pack_cstr(&pk, "pos"), 0);
        assert_int_equal(msgpack_pack_uint64(&pk, 42), 0);
        assert_int_equal(mp_pack_cstr(&pk, "neg"), 0);
        assert_int_equal(msgpack_pack_int64(&pk, -5), 0);
        assert_int_equal(mp_pack_cstr(&pk, "big"), 0);
        assert_int_equal(msgpack_pack_uint64(&pk, UINT64_MAX), 0);
        assert_int_equal(mp_pack_cstr(&pk, "nul"), 0);
        assert_int_equal(mp_pack_str(&pk, "x\0y", 3), 0);
        assert_int_equal(mp_pack_cstr(&pk, "arr"), 0);
        assert_int_equal(msgpack_pack_array(&pk, 1), 0);
        assert_int_equal(msgpack_pack_int(&pk, 1), 0);
        /* A non-string key is skipped by lookups, not an error. */
        assert_int_equal(msgpack_pack_int(&pk, 7), 0);
        assert_int_equal(mp_pack_cstr(&pk, "seven"), 0);
        assert_int_equal(mp_pack_cstr(&pk, "nil"), 0);
        assert_int_equal(msgpack_pack_nil(&pk), 0);
}

static void test_map_get(void **state) {
        _cleanup_buffer_ Buffer b = BUFFER_NULL;
        msgpack_unpacked u;
        const msgpack_object *m, *v;

        pack_sample(&b);
        m = unpack_all(&u, &b);

        v = mp_map_get(m, "call_id");
        assert_non_null(v);
        assert_true(mp_str_eq(v, "abc"));
        assert_false(mp_str_eq(v, "ab"));
        assert_false(mp_str_eq(v, "abcd"));
        assert_false(mp_str_eq(NULL, "abc"));

        v = mp_map_get(m, "arr");
        assert_non_null(v);
        assert_int_equal(v->type, MSGPACK_OBJECT_ARRAY);
        assert_int_equal(mp_map_get(m, "nil")->type, MSGPACK_OBJECT_NIL);

        assert_null(mp_map_get(m, "missing"));
        assert_null(mp_map_get(m, "call_i"));   /* prefix of a key */
        assert_null(mp_map_get(m, "call_idx"));
        assert_null(mp_map_get(m, ""));
        assert_null(mp_map_get(m, "seven"));    /* a value, not a key */
        assert_null(mp_map_get(NULL, "call_id"));
        assert_null(mp_map_get(v, "call_id")); /* not a map */
        msgpack_unpacked_destroy(&u);
}

static void test_map_get_str(void **state) {
        _cleanup_buffer_ Buffer b = BUFFER_NULL;
        msgpack_unpacked u;
        const msgpack_object *m;
        const char *s = NULL;
        size_t len = 0;

        pack_sample(&b);
        m = unpack_all(&u, &b);

        assert_int_equal(mp_map_get_str(m, "call_id", &s, &len), 0);
        assert_int_equal(len, 3);
        assert_memory_equal(s, "abc", 3);

        assert_int_equal(mp_map_get_str(m, "nul", &s, &len), 0);
        assert_int_equal(len, 3);
        assert_memory_equal(s, "x\0y", 3);

        s = NULL;
        assert_int_equal(mp_map_get_str(m, "missing", &s, &len), -ENOENT);
        assert_int_equal(mp_map_get_str(m, "pos", &s, &len), -EINVAL);
        assert_int_equal(mp_map_get_str(m, "nil", &s, &len), -EINVAL);
        assert_null(s);
        msgpack_unpacked_destroy(&u);
}

static void test_map_copy_str(void **state) {
        _cleanup_buffer_ Buffer b = BUFFER_NULL;
        msgpack_unpacked u;
        const msgpack_object *m;
        char buf[8];

        pack_sample(&b);
        m = unpack_all(&u, &b);

        memset(buf, 'Z', sizeof(buf));
        assert_int_equal(mp_map_copy_str(m, "call_id", buf, 4), 0); /* "abc" + NUL fits exactly */
        assert_string_equal(buf, "abc");
        assert_int_equal(buf[4], 'Z');

        memset(buf, 'Z', sizeof(buf));
        assert_int_equal(mp_map_copy_str(m, "call_id", buf, 3), -ENAMETOOLONG);
        assert_int_equal(buf[0], 'Z');
        assert_int_equal(mp_map_copy_str(m, "nul", buf, sizeof(buf)), -EINVAL);
        assert_int_equal(mp_map_copy_str(m, "missing", buf, sizeof(buf)), -ENOENT);
        assert_int_equal(mp_map_copy_str(m, "pos", buf, sizeof(buf)), -EINVAL);
        assert_int_equal(buf[0], 'Z');
        msgpack_unpacked_destroy(&u);
}

static void test_map_get_int(void **state) {
        _cleanup_buffer_ Buffer b = BUFFER_NULL;
        msgpack_unpacked u;
        const msgpack_object *m;
        int64_t v = 1234;

        pack_sample(&b);
        m = unpack_all(&u, &b);

        assert_int_equal(mp_map_get_int(m, "pos", &v), 0);
        assert_int_equal(v, 42);
        assert_int_equal(mp_map_get_int(m, "neg", &v), 0);
        assert_int_equal(v, -5);

        v = 1234;
        assert_int_equal(mp_map_get_int(m, "big", &v), -ERANGE);
        assert_int_equal(mp_map_get_int(m, "call_id", &v), -EINVAL);
        assert_int_equal(mp_map_get_int(m, "arr", &v), -EINVAL);
        assert_int_equal(mp_map_get_int(m, "missing", &v), -ENOENT);
        assert_int_equal(v, 1234);
        msgpack_unpacked_destroy(&u);
}

static void test_int_limits(void **state) {
        static const int64_t values[] = { 0, 1, 127, 128, -1, -32, -33, INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN };

        for (size_t i = 0; i < ELEMENTSOF(values); i++) {
                _cleanup_buffer_ Buffer b = BUFFER_NULL;
                msgpack_packer pk;
                msgpack_unpacked u;
                int64_t v;

                mp_packer_init_buffer(&pk, &b);
                assert_int_equal(msgpack_pack_map(&pk, 1), 0);
                assert_int_equal(mp_pack_cstr(&pk, "v"), 0);
                assert_int_equal(msgpack_pack_int64(&pk, values[i]), 0);
                assert_int_equal(mp_map_get_int(unpack_all(&u, &b), "v", &v), 0);
                assert_int_equal(v, values[i]);
                msgpack_unpacked_destroy(&u);
        }
}

static void check_error_envelope(const RpcError *e, const char *want_type, const char *call_id, size_t call_id_len) {
        _cleanup_buffer_ Buffer b = BUFFER_NULL;
        msgpack_unpacked u;
        const msgpack_object *m, *err, *v;
        const char *s;
        size_t len;
        int64_t rc;

        assert_int_equal(rpc_envelope_error(&b, call_id, call_id_len, e), 0);
        m = unpack_all(&u, &b);
        assert_int_equal(m->type, MSGPACK_OBJECT_MAP);
        assert_int_equal(m->via.map.size, 2);

        assert_int_equal(mp_map_get_str(m, "call_id", &s, &len), 0);
        assert_int_equal(len, call_id ? call_id_len : 0);
        if (len > 0)
                assert_memory_equal(s, call_id, len);

        err = mp_map_get(m, "error");
        assert_non_null(err);
        assert_int_equal(err->type, MSGPACK_OBJECT_MAP);
        assert_int_equal(err->via.map.size, e->has_returncode ? 5 : 4);
        assert_true(mp_str_eq(mp_map_get(err, "type"), want_type));
        assert_true(mp_str_eq(mp_map_get(err, "message"), e->message ?: ""));

        v = mp_map_get(err, "traceback");
        assert_non_null(v);
        if (e->traceback)
                assert_true(mp_str_eq(v, e->traceback));
        else
                assert_int_equal(v->type, MSGPACK_OBJECT_NIL);

        v = mp_map_get(err, "cancelled");
        assert_non_null(v);
        assert_int_equal(v->type, MSGPACK_OBJECT_BOOLEAN);
        assert_int_equal(v->via.boolean, e->cancelled);

        if (e->has_returncode) {
                assert_int_equal(mp_map_get_int(err, "returncode", &rc), 0);
                assert_int_equal(rc, e->returncode);
        } else
                assert_null(mp_map_get(err, "returncode"));
        msgpack_unpacked_destroy(&u);
}

static void test_envelope_error(void **state) {
        RpcError died = {
                .type = RPC_ERR_WORKER_DIED,
                .message = "worker exited",
                .traceback = "Traceback:\n  here",
                .has_returncode = true,
                .returncode = -9,
        };
        RpcError cancelled = {
                .type = RPC_ERR_CANCELLED,
                .message = "cancelled by the client",
                .cancelled = true,
        };
        RpcError untyped = {};

        check_error_envelope(&died, "WorkerDied", "call-1", 6);
        check_error_envelope(&cancelled, "Cancelled", "c\0id", 4); /* length, not strlen */
        check_error_envelope(&untyped, "Error", NULL, 5);
}

static void test_envelope_call_id(void **state) {
        _cleanup_buffer_ Buffer b = BUFFER_NULL;
        msgpack_unpacked u;
        const msgpack_object *m;
        char id[RPC_CALL_ID_MAX + 1];

        memset(id, 'q', sizeof(id));
        assert_int_equal(rpc_envelope_call_id(&b, id, RPC_CALL_ID_MAX), 0);
        m = unpack_all(&u, &b);
        assert_int_equal(m->via.map.size, 1);
        assert_int_equal(mp_map_copy_str(m, "call_id", id, sizeof(id)), 0);
        assert_int_equal(strlen(id), RPC_CALL_ID_MAX);
        msgpack_unpacked_destroy(&u);

        /* Appends after what the buffer already holds. */
        assert_int_equal(rpc_envelope_call_id(&b, "x", 1), 0);
        {
                size_t off = 0;
                msgpack_unpacked_init(&u);
                assert_int_equal(msgpack_unpack_next(&u, (const char *) buffer_data(&b), b.len, &off),
                                 MSGPACK_UNPACK_SUCCESS);
                assert_int_equal(msgpack_unpack_next(&u, (const char *) buffer_data(&b), b.len, &off),
                                 MSGPACK_UNPACK_SUCCESS);
                assert_int_equal(off, b.len);
                assert_true(mp_str_eq(mp_map_get(&u.data, "call_id"), "x"));
                msgpack_unpacked_destroy(&u);
        }
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_map_get),
                cmocka_unit_test(test_map_get_str),
                cmocka_unit_test(test_map_copy_str),
                cmocka_unit_test(test_map_get_int),
                cmocka_unit_test(test_int_limits),
                cmocka_unit_test(test_envelope_error),
                cmocka_unit_test(test_envelope_call_id),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}

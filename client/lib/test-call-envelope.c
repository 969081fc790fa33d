/* SPDX-License-Identifier: MIT */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "call-envelope.h"
#include "test-mp.h"
#include "value.h"

static const msgpack_object *unpack_buffer(const Buffer *b, msgpack_unpacked *u) {
        size_t off = 0;

        msgpack_unpacked_init(u);
        assert_int_equal(msgpack_unpack_next(u, (const char *) buffer_data(b), b->len, &off), MSGPACK_UNPACK_SUCCESS);
        assert_int_equal(off, b->len);
        return &u->data;
}

static void test_call_id(void **state) {
        char a[33], b[33], ids[40][33];
        CallIdPool pool = {};

        assert_int_equal(call_id_new(NULL, a), 0);
        assert_int_equal(call_id_new(NULL, b), 0);
        assert_int_equal(strlen(a), 32);
        assert_int_equal(strspn(a, "0123456789abcdef"), 32);
        assert_string_not_equal(a, b);

        /* From a pool: more ids than one fill of it gives, every one different. */
        for (size_t i = 0; i < ELEMENTSOF(ids); i++) {
                assert_int_equal(call_id_new(&pool, ids[i]), 0);
                assert_int_equal(strlen(ids[i]), 32);
                assert_int_equal(strspn(ids[i], "0123456789abcdef"), 32);
                for (size_t k = 0; k < i; k++)
                        assert_string_not_equal(ids[i], ids[k]);
        }
}

static void test_call(void **state) {
        _cleanup_buffer_ Buffer args_b, kwargs_b, out = BUFFER_NULL;
        msgpack_unpacked args_u, kwargs_u, u;
        const msgpack_object *m, *v;
        int64_t i;

        test_mp("[\"x\",1]", &args_b, &args_u);
        test_mp("{\"cwd\":\"/tmp\"}", &kwargs_b, &kwargs_u);
        msgpack_unpacked_destroy(&args_u);
        msgpack_unpacked_destroy(&kwargs_u);

        assert_int_equal(call_envelope_pack(&out, "id1", "sandbox::exec", AGENTIX_CALL_STREAM,
                                            &(agentix_args) { buffer_data(&args_b), args_b.len, buffer_data(&kwargs_b),
                                                              kwargs_b.len },
                                            2500),
                         0);
        m = unpack_buffer(&out, &u);
        assert_int_equal(m->via.map.size, 6);
        assert_true(mp_str_eq(mp_map_get(m, "call_id"), "id1"));
        assert_true(mp_str_eq(mp_map_get(m, "callable"), "sandbox::exec"));
        assert_true(mp_str_eq(mp_map_get(m, "shape"), "stream"));
        v = mp_map_get(m, "args");
        assert_int_equal(v->type, MSGPACK_OBJECT_ARRAY);
        assert_int_equal(v->via.array.size, 2);
        assert_true(mp_str_eq(&v->via.array.ptr[0], "x"));
        v = mp_map_get(m, "kwargs");
        assert_true(mp_str_eq(mp_map_get(v, "cwd"), "/tmp"));
        assert_int_equal(mp_map_get_int(m, "deadline_ms", &i), 0);
        assert_int_equal(i, 2500);
        msgpack_unpacked_destroy(&u);

        /* No arguments: [] and {}; no deadline: no field. */
        buffer_clear(&out);
        assert_int_equal(call_envelope_pack(&out, "id2", "sandbox::echo", AGENTIX_CALL_UNARY, NULL, 0), 0);
        m = unpack_buffer(&out, &u);
        assert_int_equal(m->via.map.size, 5);
        assert_true(mp_str_eq(mp_map_get(m, "shape"), "unary"));
        assert_int_equal(mp_map_get(m, "args")->via.array.size, 0);
        assert_int_equal(mp_map_get(m, "kwargs")->type, MSGPACK_OBJECT_MAP);
        assert_null(mp_map_get(m, "deadline_ms"));
        assert_null(mp_map_get(m, "in_ack"));
        msgpack_unpacked_destroy(&u);

        /* Bidi calls ask for flow control of their inbox. */
        buffer_clear(&out);
        assert_int_equal(call_envelope_pack(&out, "id3", "sandbox::exec", AGENTIX_CALL_BIDI, NULL, 0), 0);
        m = unpack_buffer(&out, &u);
        assert_int_equal(m->via.map.size, 6);
        v = mp_map_get(m, "in_ack");
        assert_non_null(v);
        assert_int_equal(v->type, MSGPACK_OBJECT_BOOLEAN);
        assert_true(v->via.boolean);
        msgpack_unpacked_destroy(&u);
}

static void test_item_and_resume(void **state) {
        _cleanup_buffer_ Buffer item_b, out = BUFFER_NULL;
        const char *ids[] = { "a", "bb", "ccc" };
        msgpack_unpacked item_u, u;
        const msgpack_object *m, *v;

        test_mp("{\"stdin\":\"bin:hi\"}", &item_b, &item_u);
        msgpack_unpacked_destroy(&item_u);
        assert_int_equal(call_envelope_pack_item(&out, "id", buffer_data(&item_b), item_b.len, false), 0);
        m = unpack_buffer(&out, &u);
        assert_true(mp_str_eq(mp_map_get(m, "call_id"), "id"));
        v = mp_map_get(mp_map_get(m, "item"), "stdin");
        assert_int_equal(v->type, MSGPACK_OBJECT_BIN);
        assert_memory_equal(v->via.bin.ptr, "hi", 2);
        v = mp_map_get(m, "seq");
        assert_int_equal(v->type, MSGPACK_OBJECT_POSITIVE_INTEGER);
        assert_int_equal(v->via.u64, 0);
        msgpack_unpacked_destroy(&u);

        /* Urgent items say so; the seq stays last. */
        buffer_clear(&out);
        assert_int_equal(call_envelope_pack_item(&out, "id", buffer_data(&item_b), item_b.len, true), 0);
        m = unpack_buffer(&out, &u);
        assert_int_equal(m->via.map.size, 4);
        assert_int_equal(mp_map_get(m, "urgent")->type, MSGPACK_OBJECT_BOOLEAN);
        assert_true(mp_map_get(m, "urgent")->via.boolean);
        assert_null(mp_map_get(m, "nope"));
        msgpack_unpacked_destroy(&u);

        /* The seq is filled in where it was reserved, small or large. */
        for (uint64_t seq = 1; seq != 0; seq = seq < UINT64_MAX / 300 ? seq * 300 : 0) {
                call_envelope_set_seq(buffer_data(&out), out.len, seq);
                m = unpack_buffer(&out, &u);
                assert_int_equal(mp_map_get(m, "seq")->via.u64, seq);
                assert_true(mp_str_eq(mp_map_get(m, "call_id"), "id"));
                msgpack_unpacked_destroy(&u);
        }

        buffer_clear(&out);
        assert_int_equal(call_envelope_pack_resume(&out, ids, 3), 0);
        m = unpack_buffer(&out, &u);
        v = mp_map_get(m, "call_ids");
        assert_int_equal(v->via.array.size, 3);
        assert_true(mp_str_eq(&v->via.array.ptr[2], "ccc"));
        msgpack_unpacked_destroy(&u);
}

static void test_packed_checks(void **state) {
        static const uint8_t huge_array[] = { 0xdd, 0xff, 0xff, 0xff, 0xff }; /* 4G elements, no bytes */
        static const uint8_t two[] = { 0x90, 0x90 };                        /* trailing bytes */
        static const uint8_t arr[] = { 0x91, 0x01 }, map[] = { 0x81, 0xa1, 'k', 0xc0 }, str[] = { 0xa1, 'x' };

        assert_true(value_is_packed_array(arr, sizeof(arr)));
        assert_false(value_is_packed_map(arr, sizeof(arr)));
        assert_true(value_is_packed_map(map, sizeof(map)));
        assert_false(value_is_packed_array(map, sizeof(map)));
        assert_false(value_is_packed_array(str, sizeof(str)));
        assert_false(value_is_packed_array(huge_array, sizeof(huge_array)));
        assert_false(value_is_packed_array(two, sizeof(two)));
        assert_false(value_is_packed_array(NULL, 3));
        assert_false(value_is_packed_array(arr, 0));
}

/* The tree outlives the bytes it came from (ASan would see a use after free otherwise). */
static void test_unpack_owned(void **state) {
        static const uint8_t scalar[] = { 0xa3, 'a', 'b', 'c' };
        msgpack_unpacked u;
        uint8_t *copy;
        Buffer b;

        test_mp("{\"call_id\":\"x\",\"value\":[\"bin:payload\",\"text\"]}", &b, &u);
        msgpack_unpacked_destroy(&u);
        assert_int_equal(value_unpack_owned(buffer_data(&b), b.len, &u), 0);
        memset(buffer_data(&b), 0, b.len);
        buffer_done(&b);
        assert_memory_equal(mp_map_get(&u.data, "value")->via.array.ptr[0].via.bin.ptr, "payload", 7);
        assert_true(mp_str_eq(&mp_map_get(&u.data, "value")->via.array.ptr[1], "text"));
        msgpack_unpacked_destroy(&u);

        /* A top-level str has no zone of its own in msgpack-c: it still gets one. */
        copy = malloc(sizeof(scalar));
        memcpy(copy, scalar, sizeof(scalar));
        assert_int_equal(value_unpack_owned(copy, sizeof(scalar), &u), 0);
        free(copy);
        assert_true(mp_str_eq(&u.data, "abc"));
        msgpack_unpacked_destroy(&u);

        assert_int_equal(value_unpack_owned(scalar, 2, &u), -EBADMSG);
        assert_int_equal(value_unpack_owned(scalar, 0, &u), -EBADMSG);
}

/* The call_id of a message too large to keep, from its first bytes. */
static void test_scan_call_id(void **state) {
        msgpack_unpacked u;
        char id[129];
        Buffer b;

        test_mp("{\"call_id\":\"abc123\",\"value\":\"bin:xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"}", &b, &u);
        msgpack_unpacked_destroy(&u);
        assert_int_equal(value_scan_call_id(buffer_data(&b), b.len, id, sizeof(id)), 0);
        assert_string_equal(id, "abc123");
        /* Only the head of the message: enough. Cut inside the id: not found. */
        assert_int_equal(value_scan_call_id(buffer_data(&b), 16, id, sizeof(id)), 0);
        assert_string_equal(id, "abc123");
        assert_int_equal(value_scan_call_id(buffer_data(&b), 12, id, sizeof(id)), -ENOENT);
        assert_int_equal(value_scan_call_id(buffer_data(&b), b.len, id, 4), -ENOENT); /* does not fit */
        buffer_done(&b);

        /* After other str fields it is still found; after a non-str value it is not looked for. */
        test_mp("{\"kind\":\"x\",\"call_id\":\"id2\"}", &b, &u);
        msgpack_unpacked_destroy(&u);
        assert_int_equal(value_scan_call_id(buffer_data(&b), b.len, id, sizeof(id)), 0);
        assert_string_equal(id, "id2");
        buffer_done(&b);
        test_mp("{\"n\":1,\"call_id\":\"id3\"}", &b, &u);
        msgpack_unpacked_destroy(&u);
        assert_int_equal(value_scan_call_id(buffer_data(&b), b.len, id, sizeof(id)), -ENOENT);
        buffer_done(&b);
        test_mp("[\"call_id\",\"x\"]", &b, &u);
        msgpack_unpacked_destroy(&u);
        assert_int_equal(value_scan_call_id(buffer_data(&b), b.len, id, sizeof(id)), -ENOENT);
        buffer_done(&b);
        /* A map announcing 4 billion pairs over a few bytes. */
        assert_int_equal(value_scan_call_id((const uint8_t *) "\xdf\xff\xff\xff\xff\xa1", 6, id, sizeof(id)), -ENOENT);
        assert_int_equal(value_scan_call_id(NULL, 0, id, sizeof(id)), -ENOENT);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_call_id),       cmocka_unit_test(test_call),
                cmocka_unit_test(test_item_and_resume), cmocka_unit_test(test_packed_checks),
                cmocka_unit_test(test_unpack_owned),   cmocka_unit_test(test_scan_call_id),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}

/* SPDX-License-Identifier: MIT */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "buffer.h"
#include "envelope.h"
#include "json-msgpack.h"

/* JSON text → msgpack → JSON text. */
static char *roundtrip(const char *text) {
        _cleanup_buffer_ Buffer b = BUFFER_NULL;
        msgpack_unpacked u;
        msgpack_packer pk;
        json_error_t err;
        json_t *in, *out;
        char *s;

        in = json_loads(text, JSON_DECODE_ANY, &err);
        assert_non_null(in);
        mp_packer_init_buffer(&pk, &b);
        assert_int_equal(json_to_msgpack(in, &pk), 0);
        json_decref(in);

        msgpack_unpacked_init(&u);
        assert_int_equal(msgpack_unpack_next(&u, (const char *) buffer_data(&b), b.len, NULL), MSGPACK_UNPACK_SUCCESS);
        out = msgpack_to_json(&u.data);
        msgpack_unpacked_destroy(&u);
        assert_non_null(out);
        s = json_dumps(out, JSON_COMPACT | JSON_ENCODE_ANY);
        json_decref(out);
        return s;
}

static void check_roundtrip(const char *text) {
        char *s = roundtrip(text);
        assert_string_equal(s, text);
        free(s);
}

static void test_roundtrip_values(void **state) {
        check_roundtrip("null");
        check_roundtrip("true");
        check_roundtrip("false");
        check_roundtrip("0");
        check_roundtrip("-1");
        check_roundtrip("9223372036854775807");
        check_roundtrip("-9223372036854775808");
        check_roundtrip("1.5");
        check_roundtrip("\"h\xc3\xa9llo\"");
        check_roundtrip("[]");
        check_roundtrip("{}");
        check_roundtrip("[1,[2,[3]],{\"a\":{\"b\":null}}]");
        check_roundtrip("{\"x\":1,\"y\":\"z\"}");
}

static void test_bytes_both_ways(void **state) {
        _cleanup_buffer_ Buffer b = BUFFER_NULL;
        msgpack_unpacked u;
        msgpack_packer pk;
        json_t *in;

        /* {"$bytes": base64} becomes bin with exactly those bytes. */
        in = json_pack("{s:s}", "$bytes", "AP8Kgw==");
        mp_packer_init_buffer(&pk, &b);
        assert_int_equal(json_to_msgpack(in, &pk), 0);
        json_decref(in);
        msgpack_unpacked_init(&u);
        assert_int_equal(msgpack_unpack_next(&u, (const char *) buffer_data(&b), b.len, NULL), MSGPACK_UNPACK_SUCCESS);
        assert_int_equal(u.data.type, MSGPACK_OBJECT_BIN);
        assert_int_equal(u.data.via.bin.size, 4);
        assert_memory_equal(u.data.via.bin.ptr, "\x00\xff\x0a\x83", 4);
        msgpack_unpacked_destroy(&u);

        check_roundtrip("{\"$bytes\":\"AP8Kgw==\"}");
        check_roundtrip("{\"$bytes\":\"\"}");
        /* Not the bytes form: two keys, or a non-string value, stay maps. */
        check_roundtrip("{\"$bytes\":\"AA==\",\"x\":1}");
        check_roundtrip("{\"$bytes\":1}");
}

static void test_plain_keeps_bytes_objects(void **state) {
        _cleanup_buffer_ Buffer b = BUFFER_NULL;
        msgpack_unpacked u;
        msgpack_packer pk;
        json_t *in;

        /* A peer's {"$bytes": …} is an object like any other, even with bad base64. */
        in = json_pack("[{s:s},{s:s}]", "$bytes", "AP8Kgw==", "$bytes", "not base64");
        mp_packer_init_buffer(&pk, &b);
        assert_int_equal(json_to_msgpack_plain(in, &pk), 0);
        json_decref(in);
        msgpack_unpacked_init(&u);
        assert_int_equal(msgpack_unpack_next(&u, (const char *) buffer_data(&b), b.len, NULL), MSGPACK_UNPACK_SUCCESS);
        assert_int_equal(u.data.type, MSGPACK_OBJECT_ARRAY);
        for (unsigned i = 0; i < 2; i++) {
                const msgpack_object *m = &u.data.via.array.ptr[i];
                assert_int_equal(m->type, MSGPACK_OBJECT_MAP);
                assert_int_equal(m->via.map.size, 1);
                assert_int_equal(m->via.map.ptr[0].val.type, MSGPACK_OBJECT_STR);
        }
        msgpack_unpacked_destroy(&u);
}

static void test_bad_base64_refused(void **state) {
        static const char *const bad[] = { "A", "AAA", "A===", "QR==", "@@@@", "AA=A", "AAAA\n" };

        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                _cleanup_buffer_ Buffer b = BUFFER_NULL;
                msgpack_packer pk;
                json_t *in = json_pack("[{s:s}]", "$bytes", bad[i]);

                mp_packer_init_buffer(&pk, &b);
                assert_int_equal(json_to_msgpack(in, &pk), -EINVAL);
                json_decref(in);
        }
}

static void test_invalid_utf8_str_becomes_bytes(void **state) {
        msgpack_sbuffer sb;
        msgpack_packer pk;
        msgpack_unpacked u;
        json_t *j;
        char *s;

        msgpack_sbuffer_init(&sb);
        msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
        msgpack_pack_map(&pk, 2);
        msgpack_pack_str_with_body(&pk, "bad", 3);
        msgpack_pack_str_with_body(&pk, "\xff\xfe", 2);
        msgpack_pack_int(&pk, 7); /* a non-string key */
        msgpack_pack_bin_with_body(&pk, "hi", 2);

        msgpack_unpacked_init(&u);
        assert_int_equal(msgpack_unpack_next(&u, sb.data, sb.size, NULL), MSGPACK_UNPACK_SUCCESS);
        j = msgpack_to_json(&u.data);
        s = json_dumps(j, JSON_COMPACT);
        assert_string_equal(s, "{\"bad\":{\"$bytes\":\"//4=\"},\"7\":{\"$bytes\":\"aGk=\"}}");
        free(s);
        json_decref(j);
        msgpack_unpacked_destroy(&u);
        msgpack_sbuffer_destroy(&sb);
}

static void test_json_from_bytes(void **state) {
        json_t *j;

        j = json_from_bytes("text", 4);
        assert_true(json_is_string(j));
        assert_string_equal(json_string_value(j), "text");
        json_decref(j);

        j = json_from_bytes("a\0b", 3); /* NUL is valid text */
        assert_true(json_is_string(j));
        assert_int_equal(json_string_length(j), 3);
        json_decref(j);

        j = json_from_bytes("\x80", 1);
        assert_true(json_is_object(j));
        assert_string_equal(json_string_value(json_object_get(j, "$bytes")), "gA==");
        json_decref(j);
}

static void test_base64_all_lengths(void **state) {
        unsigned char data[300];

        for (size_t i = 0; i < sizeof(data); i++)
                data[i] = (unsigned char) (i * 7 + 3);
        for (size_t n = 0; n <= sizeof(data); n++) {
                char *text;
                void *back;
                size_t size;

                assert_int_equal(base64_encode(data, n, &text), 0);
                assert_int_equal(strlen(text), (n + 2) / 3 * 4);
                assert_int_equal(base64_decode(text, strlen(text), &back, &size), 0);
                assert_int_equal(size, n);
                assert_memory_equal(back, data, n);
                free(text);
                free(back);
        }
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_roundtrip_values),
                cmocka_unit_test(test_bytes_both_ways),
                cmocka_unit_test(test_plain_keeps_bytes_objects),
                cmocka_unit_test(test_bad_base64_refused),
                cmocka_unit_test(test_invalid_utf8_str_becomes_bytes),
                cmocka_unit_test(test_json_from_bytes),
                cmocka_unit_test(test_base64_all_lengths),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}

/* SPDX-License-Identifier: MIT */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "eio-packet.h"
#include "sio-packet.h"

static int decode_cstr(const char *s, SioPacket *ret) {
        return sio_packet_decode(s, strlen(s), ret);
}

/* Encode into a fresh NUL-terminated string. */
static char *encode_str(const SioPacket *p) {
        _cleanup_buffer_ Buffer b = BUFFER_NULL;

        assert_int_equal(sio_packet_encode(p, &b), 0);
        return (char *) buffer_steal(&b, NULL);
}

static void assert_data_is(const json_t *data, const char *json) {
        json_t *want;

        if (!json) {
                assert_null(data);
                return;
        }
        want = json_loads(json, JSON_DECODE_ANY, NULL);
        assert_non_null(want);
        assert_non_null(data);
        assert_true(json_equal(want, (json_t *) data));
        json_decref(want);
}

/* Packets in their canonical form: decode gives these fields, encode gives the text back. */
static const struct {
        const char *text;
        SioType type;
        const char *nsp;
        int64_t ack_id;
        unsigned attachments;
        const char *data;
} canonical[] = {
        { "0", SIO_CONNECT, "/", -1, 0, NULL },
        { "0{\"token\":\"abc\"}", SIO_CONNECT, "/", -1, 0, "{\"token\":\"abc\"}" },
        { "0/admin,", SIO_CONNECT, "/admin", -1, 0, NULL },
        { "0/admin,{\"sid\":\"x\"}", SIO_CONNECT, "/admin", -1, 0, "{\"sid\":\"x\"}" },
        { "1", SIO_DISCONNECT, "/", -1, 0, NULL },
        { "1/admin,", SIO_DISCONNECT, "/admin", -1, 0, NULL },
        { "2[\"hello\",1]", SIO_EVENT, "/", -1, 0, "[\"hello\",1]" },
        { "2/nsp,[\"hello\",{\"a\":[1,2.5,null,true]}]", SIO_EVENT, "/nsp", -1, 0,
          "[\"hello\",{\"a\":[1,2.5,null,true]}]" },
        { "212[\"ev\"]", SIO_EVENT, "/", 12, 0, "[\"ev\"]" },
        { "2/nsp,7[\"ev\",\"x\"]", SIO_EVENT, "/nsp", 7, 0, "[\"ev\",\"x\"]" },
        { "20[\"ev\"]", SIO_EVENT, "/", 0, 0, "[\"ev\"]" },
        { "2[\"caf\xc3\xa9\",\"a\\nb\\\"c\"]", SIO_EVENT, "/", -1, 0, "[\"caf\xc3\xa9\",\"a\\nb\\\"c\"]" },
        { "3/nsp,12[]", SIO_ACK, "/nsp", 12, 0, "[]" },
        { "31[\"ok\",{\"z\":1,\"a\":2}]", SIO_ACK, "/", 1, 0, "[\"ok\",{\"z\":1,\"a\":2}]" },
        { "4{\"message\":\"Invalid namespace\"}", SIO_CONNECT_ERROR, "/", -1, 0, "{\"message\":\"Invalid namespace\"}" },
        { "4/nsp,{\"message\":\"Invalid namespace\"}", SIO_CONNECT_ERROR, "/nsp", -1, 0,
          "{\"message\":\"Invalid namespace\"}" },
        { "4\"oops\"", SIO_CONNECT_ERROR, "/", -1, 0, "\"oops\"" },
        { "51-[\"ev\",{\"_placeholder\":true,\"num\":0}]", SIO_BINARY_EVENT, "/", -1, 1,
          "[\"ev\",{\"_placeholder\":true,\"num\":0}]" },
        { "51-/rpc,[\"call\",{\"_placeholder\":true,\"num\":0}]", SIO_BINARY_EVENT, "/rpc", -1, 1,
          "[\"call\",{\"_placeholder\":true,\"num\":0}]" },
        { "52-/rpc,9[\"ev\",{\"_placeholder\":true,\"num\":1},{\"x\":{\"_placeholder\":true,\"num\":0}}]",
          SIO_BINARY_EVENT, "/rpc", 9, 2,
          "[\"ev\",{\"_placeholder\":true,\"num\":1},{\"x\":{\"_placeholder\":true,\"num\":0}}]" },
        { "61-/nsp,3[{\"_placeholder\":true,\"num\":0}]", SIO_BINARY_ACK, "/nsp", 3, 1,
          "[{\"_placeholder\":true,\"num\":0}]" },
        { "61-3[{\"_placeholder\":true,\"num\":0}]", SIO_BINARY_ACK, "/", 3, 1,
          "[{\"_placeholder\":true,\"num\":0}]" },
        { "29223372036854775807[\"max\"]", SIO_EVENT, "/", INT64_MAX, 0, "[\"max\"]" },
};

static void test_canonical_round_trip(void **state) {
        for (size_t i = 0; i < ELEMENTSOF(canonical); i++) {
                SioPacket p = SIO_PACKET_NULL, q = SIO_PACKET_NULL;
                _cleanup_free_ char *text = NULL, *again = NULL;

                if (decode_cstr(canonical[i].text, &p) != 0)
                        fail_msg("failed to decode %s", canonical[i].text);
                assert_int_equal(p.type, canonical[i].type);
                assert_string_equal(p.nsp, canonical[i].nsp);
                assert_int_equal(p.ack_id, canonical[i].ack_id);
                assert_int_equal(p.attachments, canonical[i].attachments);
                assert_data_is(p.data, canonical[i].data);

                text = encode_str(&p);
                assert_string_equal(text, canonical[i].text);

                /* And once more through the decoder. */
                assert_int_equal(decode_cstr(text, &q), 0);
                assert_int_equal(q.type, p.type);
                assert_string_equal(q.nsp, p.nsp);
                assert_int_equal(q.ack_id, p.ack_id);
                assert_int_equal(q.attachments, p.attachments);
                assert_true((!p.data && !q.data) || json_equal(p.data, q.data));
                again = encode_str(&q);
                assert_string_equal(again, text);

                sio_packet_done(&p);
                sio_packet_done(&q);
                assert_null(p.nsp);
                assert_null(p.data);
                assert_int_equal(p.ack_id, -1);
        }
}

/* Accepted forms that encode to a different (canonical) text. */
static void test_normalising_decode(void **state) {
        static const struct {
                const char *in, *out;
        } v[] = {
                { "501-[\"ev\",{\"_placeholder\":true,\"num\":0}]", "51-[\"ev\",{\"_placeholder\":true,\"num\":0}]" },
                { "2007[\"a\"]", "27[\"a\"]" },
                { "0/", "0" },           /* the root namespace named explicitly */
                { "0/,", "0" },
                { "2/,[\"a\"]", "2[\"a\"]" },
                { "2 [ \"a\" , 1 ] ", "2[\"a\",1]" },
                { "0/admin", "0/admin," }, /* namespace running to the end of the packet */
                { "2[\"a\",{\"k\":1,\"k\":2}]", "2[\"a\",{\"k\":2}]" },
        };

        for (size_t i = 0; i < ELEMENTSOF(v); i++) {
                SioPacket p = SIO_PACKET_NULL;
                _cleanup_free_ char *text = NULL;

                if (decode_cstr(v[i].in, &p) != 0)
                        fail_msg("failed to decode %s", v[i].in);
                text = encode_str(&p);
                assert_string_equal(text, v[i].out);
                sio_packet_done(&p);
        }
}

static void test_rejected(void **state) {
        static const char *const bad[] = {
                /* type */
                "", "7", "9[]", "x", "-1", " 2[\"a\"]",
                /* attachments */
                "5", "5-[\"ev\",{\"_placeholder\":true,\"num\":0}]", "5a-[\"ev\",{\"_placeholder\":true,\"num\":0}]",
                "51[\"ev\",{\"_placeholder\":true,\"num\":0}]", "51", "51-",
                "50-[\"ev\"]",                                     /* BINARY_* with none */
                "51025-[\"ev\"]",                                  /* > SIO_ATTACHMENTS_MAX */
                "599999999999999999999999999-[\"ev\"]",            /* overflow */
                "6-1[]",
                /* attachments only for BINARY_*: the digits read as an ack id, "-" as bad JSON */
                "21-[\"ev\"]", "31-[]",
                /* placeholders */
                "52-[\"ev\",{\"_placeholder\":true,\"num\":0}]",   /* fewer than announced */
                "51-[\"ev\",{\"_placeholder\":true,\"num\":0},{\"_placeholder\":true,\"num\":1}]",
                "52-[\"ev\",{\"_placeholder\":true,\"num\":0},{\"_placeholder\":true,\"num\":0}]", /* duplicate */
                "51-[\"ev\",{\"_placeholder\":true,\"num\":1}]",   /* out of range */
                "51-[\"ev\",{\"_placeholder\":true,\"num\":-1}]",
                "51-[\"ev\",{\"_placeholder\":true,\"num\":\"0\"}]",
                "51-[\"ev\",{\"_placeholder\":true,\"num\":0.0}]",
                "51-[\"ev\",{\"_placeholder\":true}]",
                "51-[\"ev\",{\"_placeholder\":true,\"num\":4294967296}]",
                "51-[\"ev\"]",
                "61-[]",
                "2[\"ev\",{\"_placeholder\":true,\"num\":0}]",     /* placeholders outside BINARY_* */
                "3[{\"a\":[{\"_placeholder\":true,\"num\":0}]}]",
                "0{\"_placeholder\":true,\"num\":0}",
                /* namespace: ends at ',' only, so a missing comma swallows the rest */
                "2/nsp[\"ev\"]",
                /* ack id overflow */
                "29223372036854775808[\"a\"]",
                "299999999999999999999999[\"a\"]",
                /* JSON */
                "2[\"a\"", "2[\"a\"]x", "2[\"a\"] [\"b\"]", "2{bad}", "2[\"a\",]", "2[\"\xff\"]", "2 ", "0{}}",
                /* payload kind per type */
                "0[]", "0\"x\"", "0null", "01[]",
                "1{}", "1[]", "1\"x\"", "1/a,{}",
                "2", "2/nsp,", "2[]", "2[1]", "2{}", "2\"x\"", "2[null]", "2[[\"a\"]]", "27",
                "2[\"connect\"]", "2[\"connect_error\"]", "2[\"disconnect\",1]", "2[\"disconnecting\"]",
                "2[\"newListener\"]", "2[\"removeListener\"]", "2[\"a\\u0000b\"]",
                "3", "3/nsp,", "3{}", "3\"x\"", "312",
                "4", "4[]", "41", "4null", "4/nsp,",
                "51-{\"_placeholder\":true,\"num\":0}",
                "61-{\"a\":{\"_placeholder\":true,\"num\":0}}",
        };

        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                SioPacket p = { .type = SIO_ACK, .nsp = (char *) "untouched", .ack_id = 5 };

                if (sio_packet_decode(bad[i], strlen(bad[i]), &p) != -EBADMSG)
                        fail_msg("accepted %s", bad[i]);
                assert_string_equal(p.nsp, "untouched");
                assert_int_equal(p.ack_id, 5);
        }
}

static void test_rejected_nul(void **state) {
        static const char nul_in_nsp[] = "2/a\0b,[\"ev\"]";
        static const char nul_outside_json_string[] = "2[\"ev\"\0]";
        static const char nul_in_json_string[] = "2[\"ev\",\"a\0b\"]";
        SioPacket p = SIO_PACKET_NULL;

        assert_int_equal(sio_packet_decode(nul_in_nsp, sizeof(nul_in_nsp) - 1, &p), -EBADMSG);
        assert_int_equal(sio_packet_decode(nul_outside_json_string, sizeof(nul_outside_json_string) - 1, &p), -EBADMSG);
        /* A raw control character inside a JSON string is invalid JSON. */
        assert_int_equal(sio_packet_decode(nul_in_json_string, sizeof(nul_in_json_string) - 1, &p), -EBADMSG);

        /* An escaped NUL in data (not in the event name) is fine, as for JSON.parse(). */
        assert_int_equal(decode_cstr("2[\"ev\",\"a\\u0000b\"]", &p), 0);
        assert_int_equal(json_string_length(json_array_get(p.data, 1)), 3);
        sio_packet_done(&p);
}

static void test_namespace_length(void **state) {
        char s[SIO_NSP_MAX + 16];
        SioPacket p = SIO_PACKET_NULL;

        /* Exactly SIO_NSP_MAX bytes: accepted. */
        s[0] = '0';
        s[1] = '/';
        memset(s + 2, 'n', SIO_NSP_MAX - 1);
        s[SIO_NSP_MAX + 1] = ',';
        assert_int_equal(sio_packet_decode(s, SIO_NSP_MAX + 2, &p), 0);
        assert_int_equal(strlen(p.nsp), SIO_NSP_MAX);
        sio_packet_done(&p);

        /* Also when it runs to the end of the packet. */
        assert_int_equal(sio_packet_decode(s, SIO_NSP_MAX + 1, &p), 0);
        assert_int_equal(strlen(p.nsp), SIO_NSP_MAX);
        sio_packet_done(&p);

        /* One more: refused. */
        memset(s + 2, 'n', SIO_NSP_MAX);
        s[SIO_NSP_MAX + 2] = ',';
        assert_int_equal(sio_packet_decode(s, SIO_NSP_MAX + 3, &p), -EBADMSG);
        assert_int_equal(sio_packet_decode(s, SIO_NSP_MAX + 2, &p), -EBADMSG);
}

static void test_attachments_max(void **state) {
        SioPacket p = { .type = SIO_BINARY_EVENT, .nsp = (char *) "/", .ack_id = -1 };
        SioPacket q = SIO_PACKET_NULL;
        _cleanup_free_ char *text = NULL;

        p.data = json_array();
        assert_non_null(p.data);
        assert_int_equal(json_array_append_new(p.data, json_string("many")), 0);
        /* Placeholders in reverse order: the order in the data does not matter. */
        for (unsigned i = SIO_ATTACHMENTS_MAX; i > 0; i--)
                assert_int_equal(json_array_append_new(p.data, sio_placeholder_new(i - 1)), 0);

        p.attachments = SIO_ATTACHMENTS_MAX;
        text = encode_str(&p);
        assert_int_equal(decode_cstr(text, &q), 0);
        assert_int_equal(q.attachments, SIO_ATTACHMENTS_MAX);
        assert_true(json_equal(p.data, q.data));
        sio_packet_done(&q);

        /* One placeholder short of the announced count. */
        assert_int_equal(json_array_remove(p.data, 1), 0);
        free(text);
        text = encode_str(&p);
        assert_int_equal(decode_cstr(text, &q), -EBADMSG);
        json_decref(p.data);
}

static void test_encode(void **state) {
        _cleanup_buffer_ Buffer b = BUFFER_NULL;
        SioPacket p = SIO_PACKET_NULL;
        json_t *obj;

        /* NULL namespace means the root one. */
        p.type = SIO_CONNECT;
        assert_int_equal(sio_packet_encode(&p, &b), 0);
        assert_int_equal(b.len, 1);
        assert_memory_equal(buffer_data(&b), "0", 1);

        /* Appends to what is there; key order is kept, not sorted. */
        obj = json_object();
        assert_int_equal(json_object_set_new(obj, "z", json_integer(1)), 0);
        assert_int_equal(json_object_set_new(obj, "a", json_string("x/y")), 0);
        assert_int_equal(json_object_set_new(obj, "m", json_array()), 0);
        p = (SioPacket) { .type = SIO_CONNECT, .nsp = (char *) "/", .ack_id = -1, .data = obj };
        assert_int_equal(sio_packet_encode(&p, &b), 0);
        assert_int_equal(b.len, strlen("00{\"z\":1,\"a\":\"x/y\",\"m\":[]}"));
        assert_memory_equal(buffer_data(&b), "00{\"z\":1,\"a\":\"x/y\",\"m\":[]}", b.len);

        /* Refused without touching the buffer. */
        p.nsp = (char *) "admin";
        assert_int_equal(sio_packet_encode(&p, &b), -EINVAL);
        p.nsp = (char *) "/a,b";
        assert_int_equal(sio_packet_encode(&p, &b), -EINVAL);
        p.nsp = (char *) "";
        assert_int_equal(sio_packet_encode(&p, &b), -EINVAL);
        p.nsp = NULL;
        p.type = _SIO_TYPE_MAX;
        assert_int_equal(sio_packet_encode(&p, &b), -EINVAL);
        assert_int_equal(b.len, strlen("00{\"z\":1,\"a\":\"x/y\",\"m\":[]}"));
        json_decref(obj);
}

static void test_placeholders(void **state) {
        json_t *v = sio_placeholder_new(7), *w;
        char *s;

        s = json_dumps(v, JSON_COMPACT | JSON_PRESERVE_ORDER);
        assert_string_equal(s, "{\"_placeholder\":true,\"num\":7}");
        free(s);
        assert_int_equal(sio_placeholder_num(v), 7);
        json_decref(v);

        assert_int_equal(sio_placeholder_num(NULL), -1);
        w = json_loads("{\"_placeholder\":false,\"num\":1}", 0, NULL);
        assert_int_equal(sio_placeholder_num(w), -1);
        json_decref(w);
        w = json_loads("{\"num\":1}", 0, NULL);
        assert_int_equal(sio_placeholder_num(w), -1);
        json_decref(w);
        w = json_loads("{\"_placeholder\":true,\"num\":-2}", 0, NULL);
        assert_int_equal(sio_placeholder_num(w), -1);
        json_decref(w);
        w = json_loads("[{\"_placeholder\":true,\"num\":0}]", 0, NULL);
        assert_int_equal(sio_placeholder_num(w), -1);
        json_decref(w);
}

static void test_binary_event1(void **state) {
        _cleanup_buffer_ Buffer b = BUFFER_NULL, ref = BUFFER_NULL;
        static const char want[] = "451-/rpc,[\"call:result\",{\"_placeholder\":true,\"num\":0}]";
        static const char want_root[] = "451-[\"x\",{\"_placeholder\":true,\"num\":0}]";
        SioPacket p = SIO_PACKET_NULL;
        EioPacket e;

        assert_int_equal(sio_encode_binary_event1(&b, "/rpc", "call:result"), 0);
        assert_int_equal(b.len, sizeof(want) - 1);
        assert_memory_equal(buffer_data(&b), want, b.len);

        /* A complete Engine.IO text frame: MESSAGE + the Socket.IO packet, which is byte for
         * byte what the general encoder gives for the same packet. */
        assert_int_equal(eio_ws_decode(buffer_data(&b), b.len, false, &e), 0);
        assert_int_equal(e.type, EIO_MESSAGE);
        assert_int_equal(sio_packet_decode((const char *) e.data, e.size, &p), 0);
        assert_int_equal(p.type, SIO_BINARY_EVENT);
        assert_int_equal(p.attachments, 1);
        assert_int_equal(p.ack_id, -1);
        assert_string_equal(p.nsp, "/rpc");
        assert_int_equal(sio_packet_encode(&p, &ref), 0);
        assert_int_equal(ref.len, e.size);
        assert_memory_equal(buffer_data(&ref), e.data, e.size);
        sio_packet_done(&p);

        /* Appends; the root namespace is omitted, named or not. */
        buffer_clear(&b);
        assert_int_equal(buffer_append_byte(&b, '#'), 0);
        assert_int_equal(sio_encode_binary_event1(&b, "/", "x"), 0);
        assert_int_equal(b.len, sizeof(want_root));
        assert_memory_equal(buffer_data(&b) + 1, want_root, b.len - 1);
        buffer_clear(&b);
        assert_int_equal(sio_encode_binary_event1(&b, NULL, "x"), 0);
        assert_int_equal(b.len, sizeof(want_root) - 1);
        assert_memory_equal(buffer_data(&b), want_root, b.len);

        /* Anything that would need escaping, or a namespace the decoder would split wrongly. */
        buffer_clear(&b);
        assert_int_equal(sio_encode_binary_event1(&b, "/rpc", "a\"b"), -EINVAL);
        assert_int_equal(sio_encode_binary_event1(&b, "/rpc", "a\\b"), -EINVAL);
        assert_int_equal(sio_encode_binary_event1(&b, "/rpc", "a\nb"), -EINVAL);
        assert_int_equal(sio_encode_binary_event1(&b, "/rpc", "caf\xc3\xa9"), -EINVAL);
        assert_int_equal(sio_encode_binary_event1(&b, "/rpc", NULL), -EINVAL);
        assert_int_equal(sio_encode_binary_event1(&b, "rpc", "x"), -EINVAL);
        assert_int_equal(sio_encode_binary_event1(&b, "/r,pc", "x"), -EINVAL);
        assert_int_equal(sio_encode_binary_event1(&b, "/r\"pc", "x"), -EINVAL);
        assert_int_equal(b.len, 0);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_canonical_round_trip),
                cmocka_unit_test(test_normalising_decode),
                cmocka_unit_test(test_rejected),
                cmocka_unit_test(test_rejected_nul),
                cmocka_unit_test(test_namespace_length),
                cmocka_unit_test(test_attachments_max),
                cmocka_unit_test(test_encode),
                cmocka_unit_test(test_placeholders),
                cmocka_unit_test(test_binary_event1),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}

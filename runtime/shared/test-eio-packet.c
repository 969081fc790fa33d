/* SPDX-License-Identifier: MIT */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>
#include <jansson.h>

#include "eio-packet.h"

/* A decoded packet copied out of the callback (binary data lives in a scratch buffer). */
typedef struct Got {
        EioType type;
        bool binary;
        uint8_t *data;
        size_t size;
} Got;

typedef struct Collect {
        Got got[16];
        size_t n;
        int fail_at; /* return -ECANCELED for this packet index; -1 never */
} Collect;

static int collect_cb(const EioPacket *p, void *userdata) {
        Collect *c = userdata;
        Got *g;

        assert_true(c->n < ELEMENTSOF(c->got));
        if ((int) c->n == c->fail_at)
                return -ECANCELED;
        g = &c->got[c->n++];
        g->type = p->type;
        g->binary = p->binary;
        g->size = p->size;
        g->data = malloc(p->size + 1);
        assert_non_null(g->data);
        if (p->size > 0)
                memcpy(g->data, p->data, p->size);
        return 0;
}

static void collect_done(Collect *c) {
        for (size_t i = 0; i < c->n; i++)
                free(c->got[i].data);
        *c = (Collect) { .fail_at = -1 };
}

static int decode_str(const char *s, size_t n, Collect *c) {
        *c = (Collect) { .fail_at = -1 };
        return eio_payload_decode((const uint8_t *) s, n, collect_cb, c);
}

static void test_ws_text_every_type(void **state) {
        for (int t = 0; t < _EIO_TYPE_MAX; t++) {
                char frame[16];
                EioPacket p = { .type = 99 };

                snprintf(frame, sizeof(frame), "%dprobe", t);
                assert_int_equal(eio_ws_decode((const uint8_t *) frame, strlen(frame), false, &p), 0);
                assert_int_equal(p.type, t);
                assert_false(p.binary);
                assert_int_equal(p.size, 5);
                assert_memory_equal(p.data, "probe", 5);

                /* A type digit alone is a packet without data. */
                assert_int_equal(eio_ws_decode((const uint8_t *) frame, 1, false, &p), 0);
                assert_int_equal(p.type, t);
                assert_int_equal(p.size, 0);
        }
}

static void test_ws_text_malformed(void **state) {
        const char *bad[] = { "7", "9x", "x", "b", "bAQID", "-1", " 4", "\x1e" };
        EioPacket p = { .type = EIO_NOOP, .size = 1234 };

        assert_int_equal(eio_ws_decode((const uint8_t *) "", 0, false, &p), -EBADMSG);
        for (size_t i = 0; i < ELEMENTSOF(bad); i++)
                assert_int_equal(eio_ws_decode((const uint8_t *) bad[i], strlen(bad[i]), false, &p), -EBADMSG);
        /* Failure leaves the output untouched. */
        assert_int_equal(p.type, EIO_NOOP);
        assert_int_equal(p.size, 1234);
}

static void test_ws_binary(void **state) {
        const uint8_t raw[] = { 0x00, 0x04, 0xff, '4' };
        EioPacket p;

        assert_int_equal(eio_ws_decode(raw, sizeof(raw), true, &p), 0);
        assert_int_equal(p.type, EIO_MESSAGE);
        assert_true(p.binary);
        assert_ptr_equal(p.data, raw); /* points into the frame, no type byte stripped */
        assert_int_equal(p.size, sizeof(raw));

        /* An empty binary message is a valid message. */
        assert_int_equal(eio_ws_decode(raw, 0, true, &p), 0);
        assert_true(p.binary);
        assert_int_equal(p.size, 0);
}

static void test_text_encode(void **state) {
        _cleanup_buffer_ Buffer b = BUFFER_NULL;
        EioPacket p;

        for (int t = 0; t < _EIO_TYPE_MAX; t++) {
                char want[8];

                buffer_clear(&b);
                assert_int_equal(eio_text_encode(&b, t, "probe", 5), 0);
                snprintf(want, sizeof(want), "%dprobe", t);
                assert_int_equal(b.len, strlen(want));
                assert_memory_equal(buffer_data(&b), want, b.len);

                /* And back. */
                assert_int_equal(eio_ws_decode(buffer_data(&b), b.len, false, &p), 0);
                assert_int_equal(p.type, t);
                assert_int_equal(p.size, 5);
        }

        buffer_clear(&b);
        assert_int_equal(eio_text_encode(&b, EIO_PING, NULL, 0), 0);
        assert_int_equal(b.len, 1);
        assert_int_equal(buffer_data(&b)[0], '2');

        assert_int_equal(eio_text_encode(&b, _EIO_TYPE_MAX, "x", 1), -EINVAL);
        assert_int_equal(eio_text_encode(&b, (EioType) -1, "x", 1), -EINVAL);
        assert_int_equal(b.len, 1);
}

static void test_payload_single_and_every_type(void **state) {
        Collect c;

        for (int t = 0; t < _EIO_TYPE_MAX; t++) {
                char s[8];

                snprintf(s, sizeof(s), "%dab", t);
                assert_int_equal(decode_str(s, strlen(s), &c), 0);
                assert_int_equal(c.n, 1);
                assert_int_equal(c.got[0].type, t);
                assert_false(c.got[0].binary);
                assert_int_equal(c.got[0].size, 2);
                assert_memory_equal(c.got[0].data, "ab", 2);
                collect_done(&c);
        }
}

static void test_payload_several_with_binary(void **state) {
        /* The spec's example plus a ping, an empty binary message and a bare noop. */
        static const char s[] = "4hello\x1e" "bAQID\x1e" "2probe\x1e" "b\x1e" "4\xe2\x82\xac\x1e" "6";
        Collect c;

        assert_int_equal(decode_str(s, sizeof(s) - 1, &c), 0);
        assert_int_equal(c.n, 6);

        assert_int_equal(c.got[0].type, EIO_MESSAGE);
        assert_false(c.got[0].binary);
        assert_int_equal(c.got[0].size, 5);
        assert_memory_equal(c.got[0].data, "hello", 5);

        assert_int_equal(c.got[1].type, EIO_MESSAGE);
        assert_true(c.got[1].binary);
        assert_int_equal(c.got[1].size, 3);
        assert_memory_equal(c.got[1].data, "\x01\x02\x03", 3);

        assert_int_equal(c.got[2].type, EIO_PING);
        assert_memory_equal(c.got[2].data, "probe", 5);

        assert_true(c.got[3].binary);
        assert_int_equal(c.got[3].size, 0);

        assert_int_equal(c.got[4].type, EIO_MESSAGE);
        assert_int_equal(c.got[4].size, 3);
        assert_memory_equal(c.got[4].data, "\xe2\x82\xac", 3);

        assert_int_equal(c.got[5].type, EIO_NOOP);
        assert_int_equal(c.got[5].size, 0);
        collect_done(&c);
}

static void test_payload_build(void **state) {
        _cleanup_buffer_ Buffer b = BUFFER_NULL;
        static const char want[] = "4hello\x1e" "bAQID\x1e" "2probe\x1e" "b\x1e" "6";

        assert_int_equal(eio_payload_append(&b, EIO_MESSAGE, false, "hello", 5), 0);
        /* No separator before the first packet. */
        assert_int_equal(b.len, 6);
        assert_int_equal(eio_payload_append(&b, EIO_MESSAGE, true, "\x01\x02\x03", 3), 0);
        assert_int_equal(eio_payload_append(&b, EIO_PING, false, "probe", 5), 0);
        assert_int_equal(eio_payload_append(&b, EIO_MESSAGE, true, NULL, 0), 0);
        assert_int_equal(eio_payload_append(&b, EIO_NOOP, false, NULL, 0), 0);
        assert_int_equal(b.len, sizeof(want) - 1);
        assert_memory_equal(buffer_data(&b), want, b.len);

        /* Refused: unknown type, binary non-message, text holding the separator. Nothing is
         * left behind in the buffer. */
        assert_int_equal(eio_payload_append(&b, _EIO_TYPE_MAX, false, "x", 1), -EINVAL);
        assert_int_equal(eio_payload_append(&b, EIO_PING, true, "x", 1), -EINVAL);
        assert_int_equal(eio_payload_append(&b, EIO_MESSAGE, false, "a\x1e" "4b", 4), -EINVAL);
        assert_int_equal(b.len, sizeof(want) - 1);
}

static void test_payload_malformed(void **state) {
        static const struct {
                const char *s;
                size_t len;
                size_t delivered; /* packets handed to the callback before the error */
        } cases[] = {
#define C(str, d) { str, sizeof(str) - 1, d }
                C("", 0),
                C("\x1e", 0),                  /* two empty packets */
                C("4a\x1e", 1),                /* trailing separator: empty last packet */
                C("\x1e" "4a", 0),             /* leading separator */
                C("4a\x1e\x1e" "4b", 1),       /* empty packet in the middle */
                C("7", 0),                     /* unknown type */
                C("4a\x1e" "9", 1),
                C("x", 0),
                C(" 4", 0),
                C("bAQI", 0),                  /* base64 length not a multiple of 4 */
                C("bAQ", 0),
                C("bA", 0),
                C("bAQ!D", 0),                 /* bad character */
                C("bAQ I", 0),
                C("bAQ\nI", 0),                /* lws would skip the newline */
                C("bAQ-_", 0),                 /* URL alphabet */
                C("b-_-_", 0),
                C("b====", 0),
                C("bA===", 0),
                C("bAQ=D", 0),                 /* padding in the middle */
                C("bAQ==AQID", 0),
                C("bQR==", 0),                 /* non-zero padding bits */
                C("bQZ==", 0),
                C("bQUJ=", 0),
                C("bAQ\0D", 0),                /* NUL */
                C("4ok\x1e" "bAQID=", 1),
#undef C
        };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                Collect c;

                assert_int_equal(decode_str(cases[i].s, cases[i].len, &c), -EBADMSG);
                assert_int_equal(c.n, cases[i].delivered);
                collect_done(&c);
        }

        /* Non-canonical padding bits: "QR==" would decode to the same byte as "QQ==". */
        {
                Collect c;
                assert_int_equal(decode_str("bQQ==", 5, &c), 0);
                assert_int_equal(c.got[0].size, 1);
                assert_int_equal(c.got[0].data[0], 'A');
                collect_done(&c);
                assert_int_equal(decode_str("bQR==", 5, &c), -EBADMSG);
                collect_done(&c);
                assert_int_equal(decode_str("bQUI=", 5, &c), 0); /* "AB" */
                collect_done(&c);
                assert_int_equal(decode_str("bQUJ=", 5, &c), -EBADMSG);
                collect_done(&c);
        }

        assert_int_equal(eio_payload_decode(NULL, 0, collect_cb, NULL), -EBADMSG);
}

static void test_payload_callback_stops(void **state) {
        static const char s[] = "4a\x1e" "4b\x1e" "4c";
        Collect c = { .fail_at = 1 };

        assert_int_equal(eio_payload_decode((const uint8_t *) s, sizeof(s) - 1, collect_cb, &c), -ECANCELED);
        assert_int_equal(c.n, 1);
        collect_done(&c);
}

static void test_base64_vectors(void **state) {
        /* RFC 4648 section 10. */
        static const struct {
                const char *plain, *b64;
        } v[] = {
                { "f", "Zg==" },
                { "fo", "Zm8=" },
                { "foo", "Zm9v" },
                { "foob", "Zm9vYg==" },
                { "fooba", "Zm9vYmE=" },
                { "foobar", "Zm9vYmFy" },
        };

        for (size_t i = 0; i < ELEMENTSOF(v); i++) {
                _cleanup_buffer_ Buffer b = BUFFER_NULL;
                Collect c;

                assert_int_equal(eio_payload_append(&b, EIO_MESSAGE, true, v[i].plain, strlen(v[i].plain)), 0);
                assert_int_equal(b.len, 1 + strlen(v[i].b64));
                assert_int_equal(buffer_data(&b)[0], 'b');
                assert_memory_equal(buffer_data(&b) + 1, v[i].b64, strlen(v[i].b64));

                assert_int_equal(decode_str((const char *) buffer_data(&b), b.len, &c), 0);
                assert_int_equal(c.n, 1);
                assert_int_equal(c.got[0].size, strlen(v[i].plain));
                assert_memory_equal(c.got[0].data, v[i].plain, strlen(v[i].plain));
                collect_done(&c);
        }
}

static void test_base64_all_bytes(void **state) {
        uint8_t all[256];

        for (size_t i = 0; i < sizeof(all); i++)
                all[i] = (uint8_t) i;

        /* Every length from 0 to 256 (all three padding cases many times) and every starting
         * byte, so each value appears in each position of a group. */
        for (size_t off = 0; off < 3; off++)
                for (size_t len = 0; len + off <= sizeof(all); len++) {
                        _cleanup_buffer_ Buffer b = BUFFER_NULL;
                        Collect c;

                        assert_int_equal(eio_payload_append(&b, EIO_MESSAGE, false, "x", 1), 0);
                        assert_int_equal(eio_payload_append(&b, EIO_MESSAGE, true, all + off, len), 0);
                        assert_int_equal(b.len, 2 + 1 + 1 + (len + 2) / 3 * 4);

                        assert_int_equal(decode_str((const char *) buffer_data(&b), b.len, &c), 0);
                        assert_int_equal(c.n, 2);
                        assert_true(c.got[1].binary);
                        assert_int_equal(c.got[1].size, len);
                        if (len > 0)
                                assert_memory_equal(c.got[1].data, all + off, len);
                        collect_done(&c);
                }
}

static void test_open_json(void **state) {
        _cleanup_buffer_ Buffer b = BUFFER_NULL;
        static const char want_up[] =
                "{\"sid\":\"lv_VI97HAXpY6yYWAAAC\",\"upgrades\":[\"websocket\"],\"pingInterval\":25000,"
                "\"pingTimeout\":20000,\"maxPayload\":1000000}";
        static const char want_ws[] =
                "{\"sid\":\"abc\",\"upgrades\":[],\"pingInterval\":1,\"pingTimeout\":2,\"maxPayload\":104857600}";
        json_error_t err;
        json_t *j;

        assert_int_equal(eio_open_json(&b, "lv_VI97HAXpY6yYWAAAC", true, 25000, 20000, 1000000), 0);
        assert_int_equal(b.len, sizeof(want_up) - 1);
        assert_memory_equal(buffer_data(&b), want_up, b.len);

        j = json_loadb((const char *) buffer_data(&b), b.len, 0, &err);
        assert_non_null(j);
        assert_string_equal(json_string_value(json_object_get(j, "sid")), "lv_VI97HAXpY6yYWAAAC");
        assert_int_equal(json_array_size(json_object_get(j, "upgrades")), 1);
        assert_int_equal(json_integer_value(json_object_get(j, "pingInterval")), 25000);
        assert_int_equal(json_integer_value(json_object_get(j, "pingTimeout")), 20000);
        assert_int_equal(json_integer_value(json_object_get(j, "maxPayload")), 1000000);
        json_decref(j);

        buffer_clear(&b);
        assert_int_equal(eio_open_json(&b, "abc", false, 1, 2, 100u * 1024 * 1024), 0);
        assert_int_equal(b.len, sizeof(want_ws) - 1);
        assert_memory_equal(buffer_data(&b), want_ws, b.len);

        /* Appends: the '0' type digit can be written first. */
        buffer_clear(&b);
        assert_int_equal(buffer_append_byte(&b, '0'), 0);
        assert_int_equal(eio_open_json(&b, "abc", false, 1, 2, 100u * 1024 * 1024), 0);
        assert_int_equal(b.len, sizeof(want_ws));
        assert_memory_equal(buffer_data(&b) + 1, want_ws, b.len - 1);

        /* A sid that would need escaping is refused. */
        buffer_clear(&b);
        assert_int_equal(eio_open_json(&b, "a\"b", true, 1, 1, 1), -EINVAL);
        assert_int_equal(eio_open_json(&b, "a\\b", true, 1, 1, 1), -EINVAL);
        assert_int_equal(eio_open_json(&b, "a\nb", true, 1, 1, 1), -EINVAL);
        assert_int_equal(eio_open_json(&b, "", true, 1, 1, 1), -EINVAL);
        assert_int_equal(eio_open_json(&b, NULL, true, 1, 1, 1), -EINVAL);
        assert_int_equal(b.len, 0);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_ws_text_every_type),
                cmocka_unit_test(test_ws_text_malformed),
                cmocka_unit_test(test_ws_binary),
                cmocka_unit_test(test_text_encode),
                cmocka_unit_test(test_payload_single_and_every_type),
                cmocka_unit_test(test_payload_several_with_binary),
                cmocka_unit_test(test_payload_build),
                cmocka_unit_test(test_payload_malformed),
                cmocka_unit_test(test_payload_callback_stops),
                cmocka_unit_test(test_base64_vectors),
                cmocka_unit_test(test_base64_all_bytes),
                cmocka_unit_test(test_open_json),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}

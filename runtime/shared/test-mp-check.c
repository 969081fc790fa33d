/* SPDX-License-Identifier: MIT */
#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <msgpack.h>

#include "mp-check.h"

#define CHECK(buf, expected)                                                                   \
        do {                                                                                   \
                int _r = mp_check((const uint8_t *) (buf), sizeof(buf) - 1);                   \
                if (_r != (expected)) {                                                        \
                        fprintf(stderr, "%s:%d: mp_check(%s) = %d, expected %d\n", __FILE__,   \
                                __LINE__, #buf, _r, (expected));                               \
                        exit(1);                                                               \
                }                                                                              \
        } while (0)

/* Whatever msgpack-c packs, mp_check accepts, byte for byte. */
static void test_round_trips(void) {
        msgpack_sbuffer sb;
        msgpack_packer pk;

        msgpack_sbuffer_init(&sb);
        msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
        msgpack_pack_map(&pk, 3);
        msgpack_pack_str_with_body(&pk, "call_id", 7);
        msgpack_pack_str_with_body(&pk, "abc", 3);
        msgpack_pack_str_with_body(&pk, "args", 4);
        msgpack_pack_array(&pk, 12);
        msgpack_pack_nil(&pk);
        msgpack_pack_true(&pk);
        msgpack_pack_int64(&pk, -1234567890123LL);
        msgpack_pack_uint64(&pk, 18446744073709551615ULL);
        msgpack_pack_int8(&pk, -5);
        msgpack_pack_uint16(&pk, 65535);
        msgpack_pack_float(&pk, 1.5f);
        msgpack_pack_double(&pk, 2.5);
        msgpack_pack_bin_with_body(&pk, "\0\1\2", 3);
        msgpack_pack_ext_with_body(&pk, "xyzw", 4, 7);
        msgpack_pack_ext_with_body(&pk, "123456789", 9, 1);
        msgpack_pack_array(&pk, 0);
        msgpack_pack_str_with_body(&pk, "big", 3);
        {
                static char blob[70000];
                memset(blob, 'x', sizeof(blob));
                msgpack_pack_bin_with_body(&pk, blob, sizeof(blob));
        }
        assert(mp_check((const uint8_t *) sb.data, sb.size) == 0);
        /* Every strict prefix is truncated; trailing garbage is refused. */
        for (size_t i = 0; i < sb.size; i += (i < 200 ? 1 : 997))
                assert(mp_check((const uint8_t *) sb.data, i) == -EBADMSG);
        msgpack_sbuffer_write(&sb, "\xc0", 1);
        assert(mp_check((const uint8_t *) sb.data, sb.size) == -EBADMSG);
        msgpack_sbuffer_destroy(&sb);
}

static void test_hostile_headers(void) {
        CHECK("\xdd\xff\xff\xff\xff", -EBADMSG);         /* array32 of 4G elements, no bytes */
        CHECK("\xdf\x7f\xff\xff\xff\xc0", -EBADMSG);     /* map32 */
        CHECK("\xdc\x00\x03\xc0\xc0", -EBADMSG);         /* array16 short by one */
        CHECK("\xdc\x00\x03\xc0\xc0\xc0", 0);
        CHECK("\xdb\xff\xff\xff\xff", -EBADMSG);         /* str32 longer than the data */
        CHECK("\xc6\x00\x00\x00\x02\x01", -EBADMSG);     /* bin32 short */
        CHECK("\xc6\x00\x00\x00\x02\x01\x02", 0);
        CHECK("\xc9\x00\x00\x00\x01\x05", -EBADMSG);     /* ext32: type byte plus one data byte */
        CHECK("\xc9\x00\x00\x00\x01\x05\x00", 0);
        CHECK("\xc1", -EBADMSG);                         /* never-used byte */
        CHECK("\x81\xa1k", -EBADMSG);                    /* map missing its value */
        CHECK("\x81\xa1k\x01", 0);
        CHECK("", -EBADMSG);
}

/* Whatever mp_check accepts, msgpack-c must unpack (and vice versa for depth). */
static int unpacks(const uint8_t *d, size_t n) {
        msgpack_unpacked u;
        size_t off = 0;
        int r;

        msgpack_unpacked_init(&u);
        r = msgpack_unpack_next(&u, (const char *) d, n, &off);
        msgpack_unpacked_destroy(&u);
        return r == MSGPACK_UNPACK_SUCCESS;
}

static void test_depth(void) {
        uint8_t deep[64];

        /* 32 one-element arrays around an empty one: 33 containers, too deep for msgpack-c. */
        memset(deep, 0x91, 32);
        deep[32] = 0x90;
        assert(!unpacks(deep, 33));
        assert(mp_check(deep, 33) == -ELOOP);
        deep[31] = 0x90;
        assert(unpacks(deep, 32));
        assert(mp_check(deep, 32) == 0);

        memset(deep, 0x91, sizeof(deep)); /* [[[[…]]]] */
        deep[MP_CHECK_MAX_DEPTH] = 0xc0;
        assert(mp_check(deep, MP_CHECK_MAX_DEPTH + 1) == 0);
        deep[MP_CHECK_MAX_DEPTH] = 0x91;
        deep[MP_CHECK_MAX_DEPTH + 1] = 0xc0;
        assert(mp_check(deep, MP_CHECK_MAX_DEPTH + 2) == -ELOOP);
}

/* mp_get_int on what msgpack-c unpacks: 2^64-1 and 2^63 are not -1 and INT64_MIN. */
static int64_t get_int(void (*pack)(msgpack_packer *pk, uint64_t v), uint64_t v, int64_t min, int64_t max, int *ret_r) {
        msgpack_sbuffer sb;
        msgpack_packer pk;
        msgpack_unpacked u;
        int64_t out = 0x5a5a;

        msgpack_sbuffer_init(&sb);
        msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
        pack(&pk, v);
        msgpack_unpacked_init(&u);
        assert(msgpack_unpack_next(&u, sb.data, sb.size, NULL) == MSGPACK_UNPACK_SUCCESS);
        *ret_r = mp_get_int(&u.data, min, max, &out);
        msgpack_unpacked_destroy(&u);
        msgpack_sbuffer_destroy(&sb);
        return out;
}

static void pack_u64(msgpack_packer *pk, uint64_t v) {
        msgpack_pack_uint64(pk, v);
}

static void pack_i64(msgpack_packer *pk, uint64_t v) {
        msgpack_pack_int64(pk, (int64_t) v);
}

static void pack_double(msgpack_packer *pk, uint64_t v) {
        msgpack_pack_double(pk, (double) v);
}

static void pack_str(msgpack_packer *pk, uint64_t v) {
        msgpack_pack_str_with_body(pk, "12", 2);
}

static void test_get_int(void) {
        int r;

        assert(get_int(pack_u64, UINT64_MAX, 0, 1 << 20, &r) == 0x5a5a && r == -ERANGE);
        assert(get_int(pack_u64, UINT64_MAX, INT64_MIN, INT64_MAX, &r) == 0x5a5a && r == -ERANGE);
        assert(get_int(pack_u64, 1ULL << 63, 0, 1 << 20, &r) == 0x5a5a && r == -ERANGE);
        assert(get_int(pack_u64, (1ULL << 63) - 1, 0, INT64_MAX, &r) == INT64_MAX && r == 0);
        assert(get_int(pack_i64, (uint64_t) -1, 0, 1 << 20, &r) == 0x5a5a && r == -ERANGE);
        assert(get_int(pack_i64, (uint64_t) -1, -1, 1 << 20, &r) == -1 && r == 0);
        assert(get_int(pack_i64, (uint64_t) INT64_MIN, INT64_MIN, 0, &r) == INT64_MIN && r == 0);
        assert(get_int(pack_u64, 1 << 20, 0, 1 << 20, &r) == 1 << 20 && r == 0);
        assert(get_int(pack_u64, (1 << 20) + 1, 0, 1 << 20, &r) == 0x5a5a && r == -ERANGE);
        assert(get_int(pack_u64, 0, 0, 0, &r) == 0 && r == 0);
        assert(get_int(pack_u64, 0, 1, 10, &r) == 0x5a5a && r == -ERANGE);
        assert(get_int(pack_double, 3, 0, 10, &r) == 0x5a5a && r == -EINVAL);
        assert(get_int(pack_str, 0, 0, 100, &r) == 0x5a5a && r == -EINVAL);
}

int main(void) {
        test_round_trips();
        test_get_int();
        test_hostile_headers();
        test_depth();
        printf("test-mp-check: ok\n");
        return 0;
}

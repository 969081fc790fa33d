/* SPDX-License-Identifier: MIT */
/* The client's WebSocket frame pieces: header bytes for each length form, the word-wise mask
 * against the byte-wise definition (any length, any alignment, in place), and masking keys. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "ws-frame.h"

static const uint8_t key[4] = { 0x11, 0x22, 0x83, 0xf4 };

static void test_header_lengths(void **state) {
        static const struct {
                uint64_t len;
                size_t size;
                uint8_t b1;
        } cases[] = {
                { 0, 6, 0x80 },       { 125, 6, 0x80 | 125 },   { 126, 8, 0x80 | 126 },
                { 65535, 8, 0x80 | 126 }, { 65536, 14, 0x80 | 127 }, { (1ULL << 32) + 5, 14, 0x80 | 127 },
        };
        uint8_t h[WS_FRAME_HEADER_MAX];

        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                uint64_t len = cases[i].len, got = 0;
                size_t n = ws_frame_header(h, WS_OP_BINARY, true, len, key);

                assert_int_equal(n, cases[i].size);
                assert_int_equal(n, ws_frame_header_size(len));
                assert_int_equal(h[0], 0x80 | WS_OP_BINARY);
                assert_int_equal(h[1], cases[i].b1);
                if (n == 6)
                        got = h[1] & 0x7f;
                else if (n == 8)
                        got = (uint64_t) h[2] << 8 | h[3];
                else
                        for (unsigned k = 0; k < 8; k++)
                                got = got << 8 | h[2 + k];
                assert_true(got == len);
                /* The key follows the length, as the server reads it. */
                assert_memory_equal(h + n - 4, key, 4);
        }
}

static void test_header_opcode_fin(void **state) {
        uint8_t h[WS_FRAME_HEADER_MAX];

        (void) ws_frame_header(h, WS_OP_TEXT, false, 3, key);
        assert_int_equal(h[0], WS_OP_TEXT);
        (void) ws_frame_header(h, WS_OP_CONTINUATION, true, 3, key);
        assert_int_equal(h[0], 0x80);
        (void) ws_frame_header(h, WS_OP_CONTINUATION, false, 3, key);
        assert_int_equal(h[0], 0);
}

static void test_mask(void **state) {
        uint8_t src[160], want[160], out[168], inplace[168];

        for (size_t i = 0; i < sizeof(src); i++)
                src[i] = (uint8_t) (i * 37 + 5);
        for (size_t n = 0; n <= 150; n++)
                for (size_t align = 0; align < 8; align++) {
                        for (size_t i = 0; i < n; i++)
                                want[i] = src[i] ^ key[i % 4]; /* RFC 6455 5.3 */

                        ws_mask(out + align, src, n, key);
                        assert_memory_equal(out + align, want, n);

                        memcpy(inplace + align, src, n);
                        ws_mask(inplace + align, inplace + align, n, key);
                        assert_memory_equal(inplace + align, want, n);

                        /* Masking twice gives the payload back. */
                        ws_mask(inplace + align, inplace + align, n, key);
                        assert_memory_equal(inplace + align, src, n);
                }
}

static void test_mask_keys(void **state) {
        WsMaskKeys k = {};
        uint8_t first[4], next[4];
        unsigned same = 0;

        /* More than one pool's worth: the pool is refilled. */
        assert_int_equal(ws_mask_key(&k, first), 0);
        for (unsigned i = 0; i < 200; i++) {
                assert_int_equal(ws_mask_key(&k, next), 0);
                same += memcmp(first, next, 4) == 0;
        }
        assert_true(same < 3); /* 32 random bits repeat about never */
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_header_lengths),
                cmocka_unit_test(test_header_opcode_fin),
                cmocka_unit_test(test_mask),
                cmocka_unit_test(test_mask_keys),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}

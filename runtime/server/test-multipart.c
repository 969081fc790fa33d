/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "multipart.h"

static void test_boundary(void **state) {
        char b[MULTIPART_BOUNDARY_MAX + 1];

        assert_int_equal(multipart_boundary("multipart/form-data; boundary=----formdata-undici-0123", b), 0);
        assert_string_equal(b, "----formdata-undici-0123");
        assert_int_equal(multipart_boundary("Multipart/Form-Data;charset=x; boundary=\"a b:c\"", b), 0);
        assert_string_equal(b, "a b:c");
        assert_int_equal(multipart_boundary("multipart/form-data; boundary=abc; x=y", b), 0);
        assert_string_equal(b, "abc");
        assert_int_equal(multipart_boundary("application/json", b), -EINVAL);
        assert_int_equal(multipart_boundary("multipart/form-data", b), -EINVAL);
        assert_int_equal(multipart_boundary("multipart/form-data; boundary=", b), -EINVAL);
        assert_int_equal(multipart_boundary("multipart/form-data; boundary=\"unclosed", b), -EINVAL);
        assert_int_equal(multipart_boundary("multipart/form-data; boundary=a\x01", b), -EINVAL);
        assert_int_equal(multipart_boundary("multipart/form-data; boundary="
                                            "12345678901234567890123456789012345678901234567890123456789012345678901", b),
                         -EINVAL);
}

#define BODY(...) __VA_ARGS__

static void test_two_files(void **state) {
        static const char body[] =
                "--XyZ\r\n"
                "Content-Disposition: form-data; name=\"file\"; filename=\"/tmp/a.txt\"\r\n"
                "Content-Type: application/octet-stream\r\n"
                "\r\n"
                "hello\r\n--Xy not a delimiter\r\n"
                "--XyZ\r\n"
                "Content-Disposition: form-data; name=file; filename=b.bin\r\n"
                "\r\n"
                "\x00\x01\x02"
                "\r\n--XyZ--\r\n"
                "epilogue";
        MultipartPart *parts = NULL;
        size_t n = 0;

        assert_int_equal(multipart_parse((const uint8_t *) body, sizeof(body) - 1, "XyZ", &parts, &n), 0);
        assert_int_equal(n, 2);
        assert_string_equal(parts[0].name, "file");
        assert_string_equal(parts[0].filename, "/tmp/a.txt");
        assert_int_equal(parts[0].size, strlen("hello\r\n--Xy not a delimiter"));
        assert_memory_equal(parts[0].data, "hello\r\n--Xy not a delimiter", parts[0].size);
        assert_string_equal(parts[1].filename, "b.bin");
        assert_int_equal(parts[1].size, 3);
        assert_memory_equal(parts[1].data, "\x00\x01\x02", 3);
        free(parts);
}

static void test_preamble_empty_part_and_no_headers(void **state) {
        static const char body[] = "preamble\r\n--b\r\n\r\n\r\n--b\r\nContent-Disposition: form-data; name=\"x\"\r\n\r\n\r\n--b--";
        MultipartPart *parts = NULL;
        size_t n = 0;

        assert_int_equal(multipart_parse((const uint8_t *) body, sizeof(body) - 1, "b", &parts, &n), 0);
        assert_int_equal(n, 2);
        assert_string_equal(parts[0].name, "");
        assert_int_equal(parts[0].size, 0);
        assert_string_equal(parts[1].name, "x");
        assert_string_equal(parts[1].filename, "");
        assert_int_equal(parts[1].size, 0);
        free(parts);
}

static void test_bad_bodies(void **state) {
        static const char *const bad[] = {
                "",
                "no delimiter at all",
                "--b\r\nContent-Disposition: form-data; name=x\r\n\r\nunterminated",
                "--b\r\nContent-Disposition: form-data; name=x\r\nno blank line\r\n--b--",
                "--bX\r\n\r\ndata\r\n--b--",
                "--b\r\n\r\ndata\r\n--b",
        };
        MultipartPart *parts = NULL;
        size_t n = 0;

        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
                assert_int_equal(multipart_parse((const uint8_t *) bad[i], strlen(bad[i]), "b", &parts, &n), -EBADMSG);
        assert_int_equal(multipart_parse((const uint8_t *) "--b--", 5, "", &parts, &n), -EINVAL);
        assert_int_equal(multipart_parse((const uint8_t *) "--b--", 5, "b", &parts, &n), 0);
        assert_int_equal(n, 0);
        free(parts);
}

static void test_too_many_parts(void **state) {
        size_t size = (MULTIPART_MAX_PARTS + 1) * 11 + 8, off = 0;
        char *body = malloc(size);
        MultipartPart *parts = NULL;
        size_t n = 0;

        assert_non_null(body);
        for (size_t i = 0; i <= MULTIPART_MAX_PARTS; i++) {
                /* The CRLF before a delimiter is the delimiter's. */
                static const char part[] = "\r\n--b\r\n\r\nx";
                size_t skip = i == 0 ? 2 : 0;

                memcpy(body + off, &part[skip], sizeof(part) - 1 - skip);
                off += sizeof(part) - 1 - skip;
        }
        memcpy(body + off, "\r\n--b--", 7);
        off += 7;
        assert_int_equal(multipart_parse((const uint8_t *) body, off, "b", &parts, &n), -E2BIG);
        free(body);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_boundary),
                cmocka_unit_test(test_two_files),
                cmocka_unit_test(test_preamble_empty_part_and_no_headers),
                cmocka_unit_test(test_bad_bodies),
                cmocka_unit_test(test_too_many_parts),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}

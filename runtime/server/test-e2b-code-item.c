/* SPDX-License-Identifier: MIT */
/* code::run items as E2B's /execute lines. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>
#include <cmocka.h>

#include "buffer.h"
#include "e2b-code-item.h"
#include "envelope.h"
#include "json-msgpack.h"

/* The item, given as JSON (bytes as {"$bytes": base64}), converted; its line as compact JSON
 * with sorted keys, or NULL when it has none. */
static char *line_of(const char *item_json) {
        _cleanup_buffer_ Buffer b = BUFFER_NULL;
        json_error_t e;
        json_t *j = json_loads(item_json, JSON_DECODE_ANY, &e), *out = NULL;
        msgpack_packer pk;
        msgpack_unpacked u;
        size_t off = 0;
        char *text = NULL;

        assert_non_null(j);
        mp_packer_init_buffer(&pk, &b);
        assert_int_equal(json_to_msgpack(j, &pk), 0);
        json_decref(j);
        msgpack_unpacked_init(&u);
        assert_int_equal(msgpack_unpack_next(&u, (const char *) buffer_data(&b), b.len, &off), MSGPACK_UNPACK_SUCCESS);
        if (e2b_code_item_to_json(&u.data, 1234, &out) == 0) {
                text = json_dumps(out, JSON_COMPACT | JSON_SORT_KEYS);
                json_decref(out);
        }
        msgpack_unpacked_destroy(&u);
        return text;
}

static void expect_line(const char *item_json, const char *expected) {
        char *line = line_of(item_json);

        if (!expected) {
                if (line)
                        fail_msg("%s gave %s, expected none", item_json, line);
                return;
        }
        if (!line)
                fail_msg("%s gave no line", item_json);
        assert_string_equal(line, expected);
        free(line);
}

static void test_output_and_counts(void **state) {
        expect_line("{\"type\": \"stdout\", \"text\": \"hi\\n\"}", "{\"text\":\"hi\\n\",\"timestamp\":1234,\"type\":\"stdout\"}");
        expect_line("{\"type\": \"stderr\", \"text\": \"x\", \"truncated\": true}",
                    "{\"text\":\"x\",\"timestamp\":1234,\"type\":\"stderr\"}");
        expect_line("{\"type\": \"execution_count\", \"execution_count\": 7}",
                    "{\"execution_count\":7,\"type\":\"number_of_executions\"}");
        expect_line("{\"type\": \"error\", \"name\": \"E\", \"value\": \"v\", \"traceback\": \"t\"}",
                    "{\"name\":\"E\",\"traceback\":\"t\",\"type\":\"error\",\"value\":\"v\"}");
        expect_line("{\"type\": \"error\", \"name\": \"E\", \"value\": \"v\"}",
                    "{\"name\":\"E\",\"traceback\":\"\",\"type\":\"error\",\"value\":\"v\"}");
}

static void test_results(void **state) {
        /* Known types by E2B's names, images as base64, JSON as values, the rest in extra. */
        expect_line("{\"type\": \"result\", \"is_main_result\": true, \"execution_count\": 3, \"data\": {"
                    "\"text/plain\": \"2\", \"text/html\": \"<b>2</b>\", \"image/png\": {\"$bytes\": \"iVBO\"},"
                    "\"application/json\": {\"a\": [1]}, \"text/csv\": \"a\", \"image/gif\": {\"$bytes\": \"R0lG\"}}}",
                    "{\"extra\":{\"image/gif\":\"R0lG\",\"text/csv\":\"a\"},\"html\":\"<b>2</b>\",\"is_main_result\":true,"
                    "\"json\":{\"a\":[1]},\"png\":\"iVBO\",\"text\":\"2\",\"type\":\"result\"}");
        expect_line("{\"type\": \"result\", \"data\": {\"image/svg+xml\": \"<svg/>\", \"text/markdown\": \"*a*\","
                    "\"text/latex\": \"$x$\", \"application/pdf\": \"JVBE\", \"image/jpeg\": {\"$bytes\": \"/9j/\"},"
                    "\"application/javascript\": \"f()\"}}",
                    "{\"is_main_result\":false,\"javascript\":\"f()\",\"jpeg\":\"/9j/\",\"latex\":\"$x$\","
                    "\"markdown\":\"*a*\",\"pdf\":\"JVBE\",\"svg\":\"<svg/>\",\"type\":\"result\"}");
}

/* The worker runs user code: what is not an item gives no line. */
static void test_not_items(void **state) {
        expect_line("{\"type\": \"stdout\"}", NULL);
        expect_line("{\"type\": \"stdout\", \"text\": 5}", NULL);
        expect_line("{\"type\": \"result\"}", NULL);
        expect_line("{\"type\": \"result\", \"data\": [1]}", NULL);
        expect_line("{\"type\": \"error\", \"name\": \"E\"}", NULL);
        expect_line("{\"type\": \"execution_count\"}", NULL);
        expect_line("{\"type\": \"status\"}", NULL);
        expect_line("{\"text\": \"x\"}", NULL);
        expect_line("[1, 2]", NULL);
        expect_line("\"stdout\"", NULL);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_output_and_counts),
                cmocka_unit_test(test_results),
                cmocka_unit_test(test_not_items),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}

/* SPDX-License-Identifier: MIT */
/* code::run items as E2B's /execute lines (e2b-code-item.c), with any msgpack: the worker runs
 * user code, so its items are input like any other. An item gives a line that is a JSON object
 * with a type E2B knows, or nothing; never a crash, a leak or a read out of bounds. */
#include <string.h>

#include "e2b-code-item.h"
#include "fuzz-util.h"
#include "mp-check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        msgpack_unpacked u;
        size_t off = 0;
        json_t *line = NULL;

        if (size > 256 * 1024 || mp_check(data, size) < 0)
                return 0;
        msgpack_unpacked_init(&u);
        if (msgpack_unpack_next(&u, (const char *) data, size, &off) == MSGPACK_UNPACK_SUCCESS &&
            e2b_code_item_to_json(&u.data, 1, &line) == 0) {
                const char *type = json_string_value(json_object_get(line, "type"));
                char *text;

                CHECK(json_is_object(line) && type);
                CHECK(strcmp(type, "stdout") == 0 || strcmp(type, "stderr") == 0 || strcmp(type, "result") == 0 ||
                      strcmp(type, "error") == 0 || strcmp(type, "number_of_executions") == 0);
                text = json_dumps(line, JSON_COMPACT);
                CHECK(text && !strchr(text, '\n')); /* one NDJSON line */
                free(text);
                json_decref(line);
        }
        msgpack_unpacked_destroy(&u);
        return 0;
}

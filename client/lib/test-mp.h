/* SPDX-License-Identifier: MIT */
#pragma once

/* Tests: msgpack values written as JSON. A string "bin:<text>" packs as bin <text>; JSON
 * cannot say NUL bytes, so "\u0000" inside a bin string is kept (jansson decodes it with
 * JSON_ALLOW_NUL). */

#include <jansson.h>

#include "envelope.h"

static inline int test_pack_json_value(msgpack_packer *pk, json_t *j) {
        int r = 0;

        switch (json_typeof(j)) {
        case JSON_OBJECT: {
                const char *k;
                json_t *v;
                r |= msgpack_pack_map(pk, (uint32_t) json_object_size(j));
                json_object_foreach(j, k, v) {
                        r |= mp_pack_cstr(pk, k);
                        r |= test_pack_json_value(pk, v);
                }
                return r;
        }
        case JSON_ARRAY: {
                size_t i;
                json_t *v;
                r |= msgpack_pack_array(pk, (uint32_t) json_array_size(j));
                json_array_foreach(j, i, v)
                        r |= test_pack_json_value(pk, v);
                return r;
        }
        case JSON_STRING: {
                const char *s = json_string_value(j);
                size_t n = json_string_length(j);
                if (n >= 4 && memcmp(s, "bin:", 4) == 0) {
                        r |= msgpack_pack_bin(pk, n - 4);
                        return r | msgpack_pack_bin_body(pk, s + 4, n - 4);
                }
                return mp_pack_str(pk, s, n);
        }
        case JSON_INTEGER:
                return msgpack_pack_int64(pk, json_integer_value(j));
        case JSON_REAL:
                return msgpack_pack_double(pk, json_real_value(j));
        case JSON_TRUE:
                return msgpack_pack_true(pk);
        case JSON_FALSE:
                return msgpack_pack_false(pk);
        default:
                return msgpack_pack_nil(pk);
        }
}

/* Pack `json` into a fresh buffer and unpack it into u (u's tree points into *b). */
static inline const msgpack_object *test_mp(const char *json, Buffer *b, msgpack_unpacked *u) {
        json_error_t err;
        json_t *j = json_loads(json, JSON_DECODE_ANY | JSON_ALLOW_NUL, &err);
        msgpack_packer pk;
        size_t off = 0;

        if (!j) {
                fprintf(stderr, "bad test JSON: %s: %s\n", err.text, json);
                abort();
        }
        *b = BUFFER_NULL;
        mp_packer_init_buffer(&pk, b);
        if (test_pack_json_value(&pk, j) != 0)
                abort();
        json_decref(j);
        msgpack_unpacked_init(u);
        if (msgpack_unpack_next(u, (const char *) buffer_data(b), b->len, &off) != MSGPACK_UNPACK_SUCCESS)
                abort();
        return &u->data;
}

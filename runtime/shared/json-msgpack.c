/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include <libwebsockets.h>

#include "json-msgpack.h"
#include "macro.h"

#define BYTES_KEY "$bytes"
#define EXT_KEY "$ext"

static bool b64_char_is_valid(char c) {
        return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '+' || c == '/';
}

int base64_encode(const void *data, size_t size, char **ret) {
        size_t enc;
        char *out;
        int k;

        if (size > (size_t) INT_MAX / 4 * 3 - 3)
                return -EMSGSIZE;
        enc = (size + 2) / 3 * 4;
        /* lws wants room for the NUL and one spare byte. */
        out = malloc(enc + 2);
        if (!out)
                return -ENOMEM;
        if (size == 0)
                k = 0;
        else
                k = lws_b64_encode_string(data, (int) size, out, (int) enc + 2);
        if (k < 0 || (size_t) k != enc) {
                free(out);
                return -EIO;
        }
        out[enc] = 0;
        *ret = out;
        return 0;
}

int base64_decode(const char *text, size_t n, void **ret, size_t *ret_size) {
        _cleanup_free_ char *out = NULL, *check = NULL;
        size_t pad = 0, decoded;
        int k, r;

        if (n % 4 != 0 || n > (size_t) INT_MAX / 2)
                return -EINVAL;
        if (n > 0 && text[n - 1] == '=')
                pad = text[n - 2] == '=' ? 2 : 1;
        for (size_t i = 0; i < n - pad; i++)
                if (!b64_char_is_valid(text[i]))
                        return -EINVAL;
        decoded = n / 4 * 3 - pad;

        /* lws stops once fewer than 3 bytes of room remain and NUL-terminates: leave slack. */
        out = malloc(n / 4 * 3 + 4);
        if (!out)
                return -ENOMEM;
        if (n > 0) {
                k = lws_b64_decode_string_len(text, (int) n, out, (int) (n / 4 * 3 + 4));
                if (k < 0 || (size_t) k != decoded)
                        return -EINVAL;

                /* Reject non-zero padding bits ("QR==" for "QQ=="): re-encode the last group. */
                size_t tail = decoded % 3 ?: 3;
                r = base64_encode(out + decoded - tail, tail, &check);
                if (r < 0)
                        return r;
                if (memcmp(check, text + n - 4, 4) != 0)
                        return -EINVAL;
        }
        out[decoded] = 0;
        *ret = TAKE_PTR(out);
        *ret_size = decoded;
        return 0;
}

/* {"$bytes": "..."} and nothing else. */
static const json_t *bytes_object_payload(const json_t *j) {
        const json_t *v;

        if (!json_is_object(j) || json_object_size(j) != 1)
                return NULL;
        v = json_object_get(j, BYTES_KEY);
        return json_is_string(v) ? v : NULL;
}

static int pack_value(const json_t *j, msgpack_packer *pk, bool read_bytes) {
        const json_t *b;
        int r;

        switch (json_typeof(j)) {
        case JSON_NULL:
                return msgpack_pack_nil(pk) < 0 ? -ENOMEM : 0;
        case JSON_TRUE:
                return msgpack_pack_true(pk) < 0 ? -ENOMEM : 0;
        case JSON_FALSE:
                return msgpack_pack_false(pk) < 0 ? -ENOMEM : 0;
        case JSON_INTEGER:
                return msgpack_pack_int64(pk, json_integer_value(j)) < 0 ? -ENOMEM : 0;
        case JSON_REAL:
                return msgpack_pack_double(pk, json_real_value(j)) < 0 ? -ENOMEM : 0;
        case JSON_STRING:
                if (msgpack_pack_str_with_body(pk, json_string_value(j), json_string_length(j)) < 0)
                        return -ENOMEM;
                return 0;
        case JSON_ARRAY: {
                size_t i;
                json_t *e;

                if (msgpack_pack_array(pk, json_array_size(j)) < 0)
                        return -ENOMEM;
                json_array_foreach(j, i, e) {
                        r = pack_value(e, pk, read_bytes);
                        if (r < 0)
                                return r;
                }
                return 0;
        }
        case JSON_OBJECT: {
                const char *key;
                size_t key_len;
                json_t *v;

                b = read_bytes ? bytes_object_payload(j) : NULL;
                if (b) {
                        _cleanup_free_ void *data = NULL;
                        size_t size;

                        r = base64_decode(json_string_value(b), json_string_length(b), &data, &size);
                        if (r < 0)
                                return r;
                        return msgpack_pack_bin_with_body(pk, data, size) < 0 ? -ENOMEM : 0;
                }
                if (msgpack_pack_map(pk, json_object_size(j)) < 0)
                        return -ENOMEM;
                json_object_keylen_foreach((json_t *) j, key, key_len, v) {
                        if (msgpack_pack_str_with_body(pk, key, key_len) < 0)
                                return -ENOMEM;
                        r = pack_value(v, pk, read_bytes);
                        if (r < 0)
                                return r;
                }
                return 0;
        }
        }
        return -EINVAL;
}

int json_to_msgpack(const json_t *j, msgpack_packer *pk) {
        return pack_value(j, pk, true);
}

int json_to_msgpack_plain(const json_t *j, msgpack_packer *pk) {
        return pack_value(j, pk, false);
}

json_t *json_from_bytes(const void *data, size_t size) {
        _cleanup_free_ char *b64 = NULL;
        json_t *s;

        /* json_stringn() checks the UTF-8 and refuses invalid text. */
        s = json_stringn(data ?: "", size);
        if (s)
                return s;
        if (base64_encode(data, size, &b64) < 0)
                return NULL;
        return json_pack("{s:s}", BYTES_KEY, b64);
}

/* A map key as an object key: text strings as they are, anything else as its JSON text. */
static json_t *key_string(const msgpack_object *k) {
        json_t *j, *s;
        char *text;

        j = msgpack_to_json(k);
        if (!j || json_is_string(j))
                return j;
        text = json_dumps(j, JSON_COMPACT | JSON_ENCODE_ANY);
        json_decref(j);
        if (!text)
                return NULL;
        s = json_string(text);
        free(text);
        return s;
}

json_t *msgpack_to_json(const msgpack_object *o) {
        switch (o->type) {
        case MSGPACK_OBJECT_NIL:
                return json_null();
        case MSGPACK_OBJECT_BOOLEAN:
                return json_boolean(o->via.boolean);
        case MSGPACK_OBJECT_POSITIVE_INTEGER:
                if (o->via.u64 > (uint64_t) INT64_MAX)
                        return json_real((double) o->via.u64);
                return json_integer((json_int_t) o->via.u64);
        case MSGPACK_OBJECT_NEGATIVE_INTEGER:
                return json_integer((json_int_t) o->via.i64);
        case MSGPACK_OBJECT_FLOAT32:
        case MSGPACK_OBJECT_FLOAT64:
                /* JSON has no NaN or infinities: jansson refuses them, and so do we (null). */
                return json_real(o->via.f64) ?: json_null();
        case MSGPACK_OBJECT_STR:
                return json_from_bytes(o->via.str.ptr, o->via.str.size);
        case MSGPACK_OBJECT_BIN: {
                _cleanup_free_ char *b64 = NULL;

                if (base64_encode(o->via.bin.ptr, o->via.bin.size, &b64) < 0)
                        return NULL;
                return json_pack("{s:s}", BYTES_KEY, b64);
        }
        case MSGPACK_OBJECT_EXT: {
                _cleanup_free_ char *b64 = NULL;

                if (base64_encode(o->via.ext.ptr, o->via.ext.size, &b64) < 0)
                        return NULL;
                return json_pack("{s:i,s:s}", EXT_KEY, (json_int_t) o->via.ext.type, BYTES_KEY, b64);
        }
        case MSGPACK_OBJECT_ARRAY: {
                json_t *a = json_array();

                if (!a)
                        return NULL;
                for (uint32_t i = 0; i < o->via.array.size; i++)
                        if (json_array_append_new(a, msgpack_to_json(&o->via.array.ptr[i])) < 0) {
                                json_decref(a);
                                return NULL;
                        }
                return a;
        }
        case MSGPACK_OBJECT_MAP: {
                json_t *m = json_object();

                if (!m)
                        return NULL;
                for (uint32_t i = 0; i < o->via.map.size; i++) {
                        json_t *k = key_string(&o->via.map.ptr[i].key);
                        int r;

                        r = k ? json_object_setn_new(m, json_string_value(k), json_string_length(k),
                                                     msgpack_to_json(&o->via.map.ptr[i].val))
                              : -1;
                        json_decref(k);
                        if (r < 0) {
                                json_decref(m);
                                return NULL;
                        }
                }
                return m;
        }
        }
        return json_null();
}

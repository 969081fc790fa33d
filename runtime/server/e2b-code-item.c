/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <string.h>

#include "e2b-code-item.h"
#include "json-msgpack.h"
#include "macro.h"
#include "utf8.h"
#include "envelope.h"

/* The MIME types E2B names a field after; the others go to `extra` under their own name. */
static const struct {
        const char *mime, *field;
} known_types[] = {
        { "text/plain", "text" },
        { "text/html", "html" },
        { "text/markdown", "markdown" },
        { "image/svg+xml", "svg" },
        { "image/png", "png" },
        { "image/jpeg", "jpeg" },
        { "application/pdf", "pdf" },
        { "text/latex", "latex" },
        { "application/json", "json" },
        { "application/javascript", "javascript" },
};

static bool str_is(const msgpack_object *o, const char *s) {
        size_t n = strlen(s);

        return o && o->type == MSGPACK_OBJECT_STR && o->via.str.size == n && memcmp(o->via.str.ptr, s, n) == 0;
}

/* Text as a JSON string; bytes that are not UTF-8 (the worker runs user code) become U+FFFD. */
static json_t *text_json(const char *p, size_t n) {
        _cleanup_buffer_ Buffer b = BUFFER_NULL;

        if (utf8_valid_prefix((const uint8_t *) p, n) == n)
                return json_stringn(p, n);
        if (utf8_append_sanitized(&b, (const uint8_t *) p, n) < 0)
                return NULL;
        return json_stringn((const char *) buffer_data(&b), b.len);
}

static json_t *string_of(const msgpack_object *o) {
        if (!o || o->type != MSGPACK_OBJECT_STR)
                return NULL;
        return text_json(o->via.str.ptr, o->via.str.size);
}

/* A bundle value as E2B has it: bytes (images) as base64 text, the rest as JSON. */
static json_t *bundle_value(const msgpack_object *v) {
        if (v->type == MSGPACK_OBJECT_BIN) {
                _cleanup_free_ char *b64 = NULL;

                if (base64_encode(v->via.bin.ptr, v->via.bin.size, &b64) < 0)
                        return NULL;
                return json_string(b64);
        }
        return msgpack_to_json(v);
}

static int result_to_json(const msgpack_object *item, json_t *out) {
        const msgpack_object *data = mp_map_get(item, "data"), *main = mp_map_get(item, "is_main_result");
        json_t *extra = NULL;

        if (!data || data->type != MSGPACK_OBJECT_MAP)
                return -EBADMSG;
        for (uint32_t i = 0; i < data->via.map.size; i++) {
                const msgpack_object_kv *kv = &data->via.map.ptr[i];
                const char *field = NULL;
                json_t *v;

                if (kv->key.type != MSGPACK_OBJECT_STR)
                        return -EBADMSG;
                for (size_t k = 0; k < ELEMENTSOF(known_types); k++)
                        if (str_is(&kv->key, known_types[k].mime))
                                field = known_types[k].field;
                v = bundle_value(&kv->val);
                if (!v)
                        return -ENOMEM;
                if (field) {
                        if (json_object_set_new(out, field, v) < 0)
                                return -ENOMEM;
                        continue;
                }
                if (!extra && (!(extra = json_object()) || json_object_set_new(out, "extra", extra) < 0)) {
                        json_decref(v);
                        return -ENOMEM;
                }
                {
                        json_t *key = text_json(kv->key.via.str.ptr, kv->key.via.str.size);
                        int r = key ? json_object_setn_new(extra, json_string_value(key), json_string_length(key), v) : -1;

                        json_decref(key);
                        if (r < 0)
                                return -ENOMEM;
                }
        }
        return json_object_set_new(out, "is_main_result",
                                   json_boolean(main && main->type == MSGPACK_OBJECT_BOOLEAN && main->via.boolean)) < 0
                       ? -ENOMEM
                       : 0;
}

int e2b_code_item_to_json(const msgpack_object *item, uint64_t timestamp_usec, json_t **ret) {
        const msgpack_object *type = item && item->type == MSGPACK_OBJECT_MAP ? mp_map_get(item, "type") : NULL;
        json_t *out = json_object();
        int r = 0;

        if (!out)
                return -ENOMEM;
        if (str_is(type, "stdout") || str_is(type, "stderr")) {
                json_t *text = string_of(mp_map_get(item, "text"));

                r = !text ? -EBADMSG
                  : json_object_set_new(out, "type", string_of(type)) < 0 || json_object_set_new(out, "text", text) < 0 ||
                                    json_object_set_new(out, "timestamp", json_integer((json_int_t) timestamp_usec)) < 0
                          ? -ENOMEM
                          : 0;
        } else if (str_is(type, "result")) {
                r = json_object_set_new(out, "type", json_string("result")) < 0 ? -ENOMEM : result_to_json(item, out);
        } else if (str_is(type, "error")) {
                json_t *name = string_of(mp_map_get(item, "name")), *value = string_of(mp_map_get(item, "value")),
                       *traceback = string_of(mp_map_get(item, "traceback"));

                if (!name || !value) {
                        json_decref(name);
                        json_decref(value);
                        json_decref(traceback);
                        r = -EBADMSG;
                } else
                        r = json_object_set_new(out, "type", json_string("error")) < 0 ||
                                            json_object_set_new(out, "name", name) < 0 ||
                                            json_object_set_new(out, "value", value) < 0 ||
                                            json_object_set_new(out, "traceback", traceback ?: json_string("")) < 0
                                    ? -ENOMEM
                                    : 0;
        } else if (str_is(type, "execution_count")) {
                int64_t count;

                r = mp_map_get_int(item, "execution_count", &count) < 0 ? -EBADMSG
                  : json_object_set_new(out, "type", json_string("number_of_executions")) < 0 ||
                                    json_object_set_new(out, "execution_count", json_integer(count)) < 0
                          ? -ENOMEM
                          : 0;
        } else
                r = -EBADMSG;
        if (r < 0) {
                json_decref(out);
                return r;
        }
        *ret = out;
        return 0;
}

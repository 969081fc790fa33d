/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "code-output.h"
#include "envelope.h"
#include "json-msgpack.h"
#include "macro.h"

static size_t remaining(const CodeOutput *o) {
        return o->used < o->max_output ? o->max_output - o->used : 0;
}

/* At most n bytes of s, not ending inside a UTF-8 sequence. */
static size_t utf8_cut(const char *s, size_t len, size_t n) {
        if (len <= n)
                return len;
        while (n > 0 && ((unsigned char) s[n] & 0xc0) == 0x80)
                n--;
        return n;
}

static int pack_text_item(CodeOutput *o, msgpack_packer *pk, const char *type, const char *text, size_t len) {
        size_t n = utf8_cut(text, len, remaining(o));
        int r = 0;

        if (n < len)
                o->truncated = true;
        if (n == 0)
                return 0;
        o->used += n;
        r |= msgpack_pack_map(pk, 2);
        r |= mp_pack_cstr(pk, "type");
        r |= mp_pack_cstr(pk, type);
        r |= mp_pack_cstr(pk, "text");
        r |= mp_pack_str(pk, text, n);
        return r < 0 ? -ENOMEM : 1;
}

static bool is_binary_mime(const char *mime) {
        return strncmp(mime, "image/", 6) == 0 && !streq(mime, "image/svg+xml");
}

static bool is_json_mime(const char *mime) {
        size_t n = strlen(mime);

        return streq(mime, "application/json") || (n > 5 && streq(mime + n - 5, "+json"));
}

/* The base64 of a binary MIME value, whitespace removed (IPython may end it with a newline),
 * decoded; NULL when it is not base64. */
static void *decode_base64(const char *text, size_t len, size_t *ret_size) {
        _cleanup_free_ char *clean = malloc(len + 1);
        void *data = NULL;
        size_t n = 0;

        if (!clean)
                return NULL;
        for (size_t i = 0; i < len; i++)
                if (!strchr(" \t\r\n", text[i]))
                        clean[n++] = text[i];
        if (base64_decode(clean, n, &data, ret_size) < 0)
                return NULL;
        return data;
}

/* A result's MIME values are sized first, to hold the whole result against the cap, then
 * packed. */
typedef struct MimeValue {
        const char *mime;
        const json_t *value;
        void *bytes;           /* decoded, for binary types */
        size_t size;           /* what it costs against the cap */
} MimeValue;

static int pack_result_item(CodeOutput *o, msgpack_packer *pk, const JupyterMessage *m, bool main_result) {
        const json_t *data = json_object_get(m->content, "data"), *count = json_object_get(m->content, "execution_count");
        _cleanup_free_ MimeValue *values = NULL;
        size_t n = 0, total = 0;
        const char *mime;
        json_t *v;
        int r = 0;

        if (!json_is_object(data))
                return 0;
        values = calloc(json_object_size(data) + 1, sizeof(MimeValue));
        if (!values)
                return -ENOMEM;
        json_object_foreach((json_t *) data, mime, v) {
                MimeValue *mv = &values[n++];

                mv->mime = mime;
                mv->value = v;
                if (is_binary_mime(mime) && json_is_string(v))
                        mv->bytes = decode_base64(json_string_value(v), json_string_length(v), &mv->size);
                if (!mv->bytes) {
                        _cleanup_free_ char *text = json_is_string(v) ? NULL : json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
                        mv->size = json_is_string(v) ? json_string_length(v) : text ? strlen(text) : 0;
                }
                total += mv->size;
        }
        if (total > remaining(o)) {
                /* A PNG cannot be cut in half: the whole result goes. */
                o->truncated = true;
                r = 0;
                goto done;
        }
        o->used += total;
        r |= msgpack_pack_map(pk, 3 + json_is_integer(count));
        r |= mp_pack_cstr(pk, "type");
        r |= mp_pack_cstr(pk, "result");
        r |= mp_pack_cstr(pk, "is_main_result");
        r |= main_result ? msgpack_pack_true(pk) : msgpack_pack_false(pk);
        if (json_is_integer(count)) {
                r |= mp_pack_cstr(pk, "execution_count");
                r |= msgpack_pack_int64(pk, json_integer_value(count));
        }
        r |= mp_pack_cstr(pk, "data");
        r |= msgpack_pack_map(pk, n);
        for (size_t i = 0; i < n && r >= 0; i++) {
                const MimeValue *mv = &values[i];

                r |= mp_pack_cstr(pk, mv->mime);
                if (mv->bytes)
                        r |= msgpack_pack_bin_with_body(pk, mv->bytes, mv->size);
                else if (json_is_string(mv->value) && !is_json_mime(mv->mime))
                        r |= mp_pack_str(pk, json_string_value(mv->value), json_string_length(mv->value));
                else if (json_is_array(mv->value) && !is_json_mime(mv->mime)) {
                        /* nbformat's multi-line form: a list of lines, to be joined. */
                        size_t j, len = 0;
                        json_t *line;
                        _cleanup_free_ char *joined = NULL;
                        FILE *f = open_memstream(&joined, &len);

                        if (!f) {
                                r = -ENOMEM;
                                break;
                        }
                        json_array_foreach(mv->value, j, line)
                                if (json_is_string(line))
                                        fwrite(json_string_value(line), 1, json_string_length(line), f);
                        if (fclose(f) != 0) {
                                r = -ENOMEM;
                                break;
                        }
                        r |= mp_pack_str(pk, joined, len);
                } else
                        r |= json_to_msgpack_plain(mv->value, pk);
        }
        r = r < 0 ? -ENOMEM : 1;
done:
        for (size_t i = 0; i < n; i++)
                free(values[i].bytes);
        return r;
}

/* An error item, each field cut to its bound (not inside a UTF-8 sequence); *ret_size: what it
 * carries. */
static int pack_error_item(msgpack_packer *pk, const char *name, const char *value, const json_t *traceback,
                           size_t *ret_size) {
        _cleanup_free_ char *joined = NULL;
        size_t len = 0, name_len, value_len;
        int r = 0;

        if (json_is_array(traceback)) {
                FILE *f = open_memstream(&joined, &len);
                json_t *line;
                size_t i;

                if (!f)
                        return -ENOMEM;
                json_array_foreach(traceback, i, line)
                        if (json_is_string(line))
                                fprintf(f, "%s%s", i ? "\n" : "", json_string_value(line));
                if (fclose(f) != 0)
                        return -ENOMEM;
        }
        name = name ?: "";
        value = value ?: "";
        name_len = utf8_cut(name, strlen(name), CODE_ERROR_NAME_MAX);
        value_len = utf8_cut(value, strlen(value), CODE_ERROR_VALUE_MAX);
        len = utf8_cut(joined ?: "", len, CODE_TRACEBACK_MAX);
        r |= msgpack_pack_map(pk, 4);
        r |= mp_pack_cstr(pk, "type");
        r |= mp_pack_cstr(pk, "error");
        r |= mp_pack_cstr(pk, "name");
        r |= mp_pack_str(pk, name, name_len);
        r |= mp_pack_cstr(pk, "value");
        r |= mp_pack_str(pk, value, value_len);
        r |= mp_pack_cstr(pk, "traceback");
        r |= mp_pack_str(pk, joined ?: "", len);
        if (ret_size)
                *ret_size = name_len + value_len + len;
        return r < 0 ? -ENOMEM : 1;
}

int code_output_pack_error(msgpack_packer *pk, const char *name, const char *value) {
        int r = pack_error_item(pk, name, value, NULL, NULL);

        return r < 0 ? r : 0;
}

int code_output_pack(CodeOutput *o, const JupyterMessage *m, msgpack_packer *pk) {
        const json_t *c = m->content;

        if (streq(m->msg_type, "stream")) {
                const char *name = json_string_value(json_object_get(c, "name"));
                const json_t *text = json_object_get(c, "text");

                if (!json_is_string(text))
                        return 0;
                return pack_text_item(o, pk, streq(name ?: "", "stderr") ? "stderr" : "stdout", json_string_value(text),
                                      json_string_length(text));
        }
        if (streq(m->msg_type, "execute_result") || streq(m->msg_type, "display_data") ||
            streq(m->msg_type, "update_display_data"))
                return pack_result_item(o, pk, m, streq(m->msg_type, "execute_result"));
        if (streq(m->msg_type, "error")) {
                size_t size = 0;
                int r;

                if (o->errors >= CODE_ERRORS_PAST_CAP && remaining(o) == 0) {
                        o->truncated = true;
                        return 0;
                }
                r = pack_error_item(pk, json_string_value(json_object_get(c, "ename")),
                                    json_string_value(json_object_get(c, "evalue")), json_object_get(c, "traceback"), &size);
                if (r > 0) {
                        o->errors++;
                        o->used += size; /* may pass max_output: remaining() is 0 then */
                }
                return r;
        }
        if (streq(m->msg_type, "execute_input")) {
                const json_t *count = json_object_get(c, "execution_count");
                int r = 0;

                if (!json_is_integer(count))
                        return 0;
                r |= msgpack_pack_map(pk, 2);
                r |= mp_pack_cstr(pk, "type");
                r |= mp_pack_cstr(pk, "execution_count");
                r |= mp_pack_cstr(pk, "execution_count");
                r |= msgpack_pack_int64(pk, json_integer_value(count));
                return r < 0 ? -ENOMEM : 1;
        }
        return 0;
}

bool code_output_notice_due(const CodeOutput *o) {
        return o->truncated && !o->notice_sent;
}

int code_output_pack_notice(CodeOutput *o, msgpack_packer *pk) {
        char text[128];
        int r = 0;

        o->notice_sent = true;
        snprintf(text, sizeof(text), "\n[output truncated: more than %zu bytes]\n", o->max_output);
        r |= msgpack_pack_map(pk, 3);
        r |= mp_pack_cstr(pk, "type");
        r |= mp_pack_cstr(pk, "stderr");
        r |= mp_pack_cstr(pk, "text");
        r |= mp_pack_cstr(pk, text);
        r |= mp_pack_cstr(pk, "truncated");
        r |= msgpack_pack_true(pk);
        return r < 0 ? -ENOMEM : 0;
}

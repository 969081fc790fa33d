/* SPDX-License-Identifier: MIT */
/* libagentix-calls: make the calls listed in a JSON table (identical-calls.json) through
 * libagentix and print what came back, one line of canonical JSON per call, for
 * test_identical.py to compare with what python-socketio sees for the same calls.
 *
 * Usage: libagentix-calls URL TOKEN websocket|polling DIR TABLE
 *
 * A table entry: {"name", "callable", "shape"?: "unary"|"stream", "args"?: [...],
 * "kwargs"?: {...}, "deadline_ms"?: N, "cancel_after_ms"?: N, "cancel_after_items"?: N}. Every "$DIR" in a string is
 * replaced by DIR; {"$bytes": base64} is a msgpack bin. Output per call:
 *   {"name": …, "items": [...]?, "result": v}          unary success
 *   {"name": …, "items": [...], "end": true}           stream end
 *   {"name": …, "items": [...]?, "error": {"type", "message", "cancelled", "returncode"?,
 *                                          "traceback"?}}
 * Values are msgpack turned into JSON with bytes as {"$bytes": base64} (keys sorted, compact).
 * Unary calls without a cancel go through agentix_call(); the others through
 * agentix_call_start() and agentix_request_next(). Exit status 0 when every call got an
 * answer (success or remote error), 1 otherwise. */
#include <jansson.h>

#include "agentix.h"
#include "buffer.h"
#include "envelope.h"
#include "json-msgpack.h"
#include "macro.h"

DEFINE_TRIVIAL_CLEANUP_FUNC(agentix_client *, agentix_client_unref);
DEFINE_TRIVIAL_CLEANUP_FUNC(agentix_request *, agentix_request_unref);

static const char *dir;

/* A copy of `j` with "$DIR" in every string (keys included) replaced by `dir`. */
static json_t *substitute(const json_t *j) {
        switch (json_typeof(j)) {
        case JSON_STRING: {
                _cleanup_buffer_ Buffer b = BUFFER_NULL;
                const char *s = json_string_value(j), *p;
                size_t n = json_string_length(j);

                while ((p = memmem(s, n, "$DIR", 4))) {
                        if (buffer_append(&b, s, (size_t) (p - s)) < 0 || buffer_append(&b, dir, strlen(dir)) < 0)
                                return NULL;
                        n -= (size_t) (p - s) + 4;
                        s = p + 4;
                }
                if (buffer_append(&b, s, n) < 0)
                        return NULL;
                return json_stringn(b.len > 0 ? (const char *) buffer_data(&b) : "", b.len);
        }
        case JSON_ARRAY: {
                json_t *a = json_array(), *v;
                size_t i;

                if (!a)
                        return NULL;
                json_array_foreach(j, i, v)
                        if (json_array_append_new(a, substitute(v)) < 0) {
                                json_decref(a);
                                return NULL;
                        }
                return a;
        }
        case JSON_OBJECT: {
                json_t *o = json_object(), *v;
                const char *k;

                if (!o)
                        return NULL;
                json_object_foreach((json_t *) j, k, v)
                        if (json_object_set_new(o, k, substitute(v)) < 0) {
                                json_decref(o);
                                return NULL;
                        }
                return o;
        }
        default:
                return json_deep_copy(j);
        }
}

/* JSON (after "$DIR" substitution) → packed msgpack; `fallback` when absent. */
static int pack(const json_t *j, const char *fallback, Buffer *out) {
        _cleanup_(json_decrefp) json_t *s = NULL, *def = NULL;
        msgpack_packer pk;

        if (!j)
                j = def = json_loads(fallback, 0, NULL);
        s = j ? substitute(j) : NULL;
        if (!s)
                return -ENOMEM;
        mp_packer_init_buffer(&pk, out);
        return json_to_msgpack(s, &pk);
}

static json_t *error_json(const agentix_error *e) {
        json_t *o = json_pack("{s:s,s:s,s:b}", "type", e->type ?: agentix_error_kind_name(e->kind), "message",
                              e->message ?: "", "cancelled", e->cancelled);

        if (o && e->has_returncode)
                (void) json_object_set_new(o, "returncode", json_integer(e->returncode));
        if (o && e->traceback)
                (void) json_object_set_new(o, "traceback", json_string(e->traceback));
        return o;
}

static int print_line(json_t *line) {
        _cleanup_free_ char *s = json_dumps(line, JSON_COMPACT | JSON_SORT_KEYS);

        if (!s)
                return -ENOMEM;
        puts(s);
        fflush(stdout);
        return 0;
}

/* Drive a started request to its end, collecting items into `line`; cancel it once
 * cancel_after_usec have passed or cancel_after_items have arrived (0: never). */
static int collect(agentix_request *r, bool unary, uint64_t cancel_after_usec, size_t cancel_after_items,
                   json_t *line) {
        _cleanup_(agentix_error_done) agentix_error e = AGENTIX_ERROR_NULL;
        json_t *items = json_array();
        uint64_t cancel_at = cancel_after_usec ? now_usec() + cancel_after_usec : 0;
        int k;

        if (!items || json_object_set_new(line, "items", items) < 0)
                return -ENOMEM;
        for (;;) {
                msgpack_unpacked item;
                uint64_t wait = 0;

                if (cancel_at) {
                        uint64_t now = now_usec();

                        if (now >= cancel_at) {
                                k = agentix_request_cancel(r);
                                if (k < 0)
                                        return k;
                                cancel_at = 0;
                        } else
                                wait = cancel_at - now;
                }
                k = agentix_request_next(r, &item, wait, &e);
                if (k == -ETIMEDOUT && e.kind == AGENTIX_E_TIMEOUT && cancel_at) {
                        agentix_error_done(&e);
                        continue; /* time to cancel */
                }
                if (k < 0)
                        return json_object_set_new(line, "error", error_json(&e));
                if (k == 0)
                        return json_object_set_new(line, "end", json_true());
                if (unary) {
                        /* A unary call's one item is its result. */
                        json_object_del(line, "items");
                        k = json_object_set_new(line, "result", msgpack_to_json(&item.data));
                        msgpack_unpacked_destroy(&item);
                        return k;
                }
                k = json_array_append_new(items, msgpack_to_json(&item.data));
                msgpack_unpacked_destroy(&item);
                if (k < 0)
                        return -ENOMEM;
                if (cancel_after_items > 0 && json_array_size(items) == cancel_after_items) {
                        k = agentix_request_cancel(r);
                        if (k < 0)
                                return k;
                }
        }
}

static int run_one(agentix_client *c, const json_t *entry) {
        _cleanup_(agentix_error_done) agentix_error e = AGENTIX_ERROR_NULL;
        _cleanup_(agentix_request_unrefp) agentix_request *r = NULL;
        _cleanup_(json_decrefp) json_t *line = NULL;
        _cleanup_buffer_ Buffer args = BUFFER_NULL, kwargs = BUFFER_NULL;
        const char *name = json_string_value(json_object_get(entry, "name")),
                   *callable = json_string_value(json_object_get(entry, "callable")),
                   *shape = json_string_value(json_object_get(entry, "shape")) ?: "unary";
        json_int_t deadline_ms = json_integer_value(json_object_get(entry, "deadline_ms")),
                   cancel_after_ms = json_integer_value(json_object_get(entry, "cancel_after_ms")),
                   cancel_after_items = json_integer_value(json_object_get(entry, "cancel_after_items"));
        agentix_call_options o = {
                .shape = streq(shape, "stream") ? AGENTIX_CALL_STREAM : AGENTIX_CALL_UNARY,
                .deadline_ms = (uint64_t) deadline_ms,
        };
        agentix_args a;
        int k;

        if (!name || !callable) {
                fprintf(stderr, "table entry without name or callable\n");
                return -EINVAL;
        }
        if (pack(json_object_get(entry, "args"), "[]", &args) < 0 ||
            pack(json_object_get(entry, "kwargs"), "{}", &kwargs) < 0) {
                fprintf(stderr, "%s: cannot pack the arguments\n", name);
                return -EINVAL;
        }
        a = (agentix_args) { .args = buffer_data(&args), .args_size = args.len, .kwargs = buffer_data(&kwargs),
                             .kwargs_size = kwargs.len };
        line = json_pack("{s:s}", "name", name);
        if (!line)
                return -ENOMEM;

        if (o.shape == AGENTIX_CALL_UNARY && cancel_after_ms <= 0 && cancel_after_items <= 0) {
                msgpack_unpacked res;

                k = agentix_call(c, callable, &a, &o, &res, &e);
                if (k < 0)
                        k = json_object_set_new(line, "error", error_json(&e));
                else {
                        k = json_object_set_new(line, "result", msgpack_to_json(&res.data));
                        msgpack_unpacked_destroy(&res);
                }
        } else {
                k = agentix_call_start(c, callable, &a, &o, &r);
                if (k < 0) {
                        fprintf(stderr, "%s: cannot start the call: %s\n", name, strerror(-k));
                        return k;
                }
                k = collect(r, o.shape == AGENTIX_CALL_UNARY, (uint64_t) MAX(cancel_after_ms, 0) * 1000,
                            (size_t) MAX(cancel_after_items, 0), line);
        }
        if (k < 0)
                return -ENOMEM;
        /* Only answers from the server count: a client-side failure is not something to compare. */
        if (json_object_get(line, "error")) {
                json_t *err = json_object_get(line, "error");
                const char *type = json_string_value(json_object_get(err, "type"));

                /* error_json() names client-side errors by their kind. */
                if (type && (streq(type, "ConnectionError") || streq(type, "Timeout") || streq(type, "ProtocolError") ||
                             streq(type, "InvalidArgument") || streq(type, "Overflow"))) {
                        fprintf(stderr, "%s: %s: %s\n", name, type, strna(json_string_value(json_object_get(err, "message"))));
                        return -EIO;
                }
        }
        return print_line(line);
}

int main(int argc, char **argv) {
        _cleanup_(agentix_error_done) agentix_error e = AGENTIX_ERROR_NULL;
        _cleanup_(agentix_client_unrefp) agentix_client *c = NULL;
        _cleanup_(json_decrefp) json_t *table = NULL;
        json_error_t jerr;
        json_t *entry;
        size_t i;
        int r, failed = 0;

        if (argc != 6) {
                fprintf(stderr, "Usage: %s URL TOKEN websocket|polling DIR TABLE\n", argv[0]);
                return 2;
        }
        dir = argv[4];
        table = json_load_file(argv[5], 0, &jerr);
        if (!json_is_array(table)) {
                fprintf(stderr, "%s:%d: %s\n", argv[5], jerr.line, jerr.text);
                return 2;
        }

        r = agentix_client_new(&(agentix_options) {
                                       .url = argv[1],
                                       .token = argv[2],
                                       .transport = streq(argv[3], "polling") ? AGENTIX_TRANSPORT_POLLING
                                                                              : AGENTIX_TRANSPORT_WEBSOCKET,
                               },
                               NULL, &c);
        if (r >= 0)
                r = agentix_client_connect(c, &e);
        if (r < 0) {
                fprintf(stderr, "connect to %s: %s\n", argv[1], e.message ?: strerror(-r));
                return 1;
        }
        if (!streq(strna(agentix_client_transport(c)), argv[3])) {
                fprintf(stderr, "connected over %s, not %s\n", strna(agentix_client_transport(c)), argv[3]);
                return 1;
        }

        json_array_foreach(table, i, entry)
                if (run_one(c, entry) < 0)
                        failed++;
        return failed ? 1 : 0;
}

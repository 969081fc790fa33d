/* SPDX-License-Identifier: MIT */
/* Runs example.so through the module registry and signature binding, with a stand-in for the
 * worker's call object: the agentix_call_* functions below record what the module packs and
 * feed it a scripted inbox. This keeps the example honest without starting a worker.
 * Argument: the path of the built example.so. */

#include <errno.h>
#include <libgen.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "macro.h"
#include "module-registry.h"

#define check(expr)                                                                     \
        do {                                                                            \
                if (!(expr)) {                                                          \
                        fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #expr); \
                        abort();                                                        \
                }                                                                       \
        } while (0)

/* What agentix_call_raise() returns in this stand-in; the module must pass it back. */
#define RAISED (-EBADE)

struct agentix_call {
        msgpack_sbuffer out; /* results and items, packed one after another */
        msgpack_packer pk;
        unsigned n_items;
        unsigned cancel_after; /* item_end() reports -ECANCELED from this item on; 0: never */
        const msgpack_object *inbox;
        size_t n_inbox, next_inbox;
        char error_type[64], error_message[256];
};

msgpack_packer *agentix_call_result(agentix_call *call) {
        return &call->pk;
}

msgpack_packer *agentix_call_item_begin(agentix_call *call) {
        return &call->pk;
}

int agentix_call_item_end(agentix_call *call) {
        call->n_items++;
        return call->cancel_after && call->n_items >= call->cancel_after ? -ECANCELED : 0;
}

int agentix_call_raisev(agentix_call *call, const char *type, const char *fmt, va_list ap) {
        snprintf(call->error_type, sizeof(call->error_type), "%s", type);
        vsnprintf(call->error_message, sizeof(call->error_message), fmt, ap);
        return RAISED;
}

int agentix_call_raise(agentix_call *call, const char *type, const char *fmt, ...) {
        va_list ap;
        int r;

        va_start(ap, fmt);
        r = agentix_call_raisev(call, type, fmt, ap);
        va_end(ap);
        return r;
}

int agentix_call_inbox_next(agentix_call *call, msgpack_object *ret_item, int timeout_ms) {
        if (call->next_inbox >= call->n_inbox)
                return 0;
        *ret_item = call->inbox[call->next_inbox++];
        return 1;
}

bool agentix_call_cancelled(agentix_call *call) {
        return false;
}

static ModuleRegistry *reg;
static msgpack_zone *zone;

/* Convert JSON to a msgpack object in the zone (enough of it for these tests). */
static void from_json(json_t *j, msgpack_object *o) {
        switch (json_typeof(j)) {
        case JSON_ARRAY: {
                size_t n = json_array_size(j);
                *o = (msgpack_object) { .type = MSGPACK_OBJECT_ARRAY, .via.array.size = (uint32_t) n };
                o->via.array.ptr = msgpack_zone_malloc(zone, MAX(n, (size_t) 1) * sizeof(msgpack_object));
                for (size_t i = 0; i < n; i++)
                        from_json(json_array_get(j, i), &o->via.array.ptr[i]);
                break;
        }
        case JSON_OBJECT: {
                size_t n = json_object_size(j), i = 0;
                const char *key;
                json_t *v;
                *o = (msgpack_object) { .type = MSGPACK_OBJECT_MAP, .via.map.size = (uint32_t) n };
                o->via.map.ptr = msgpack_zone_malloc(zone, MAX(n, (size_t) 1) * sizeof(msgpack_object_kv));
                json_object_foreach(j, key, v) {
                        o->via.map.ptr[i].key = (msgpack_object) { .type = MSGPACK_OBJECT_STR,
                                                                    .via.str = { (uint32_t) strlen(key), key } };
                        from_json(v, &o->via.map.ptr[i++].val);
                }
                break;
        }
        case JSON_STRING:
                *o = (msgpack_object) { .type = MSGPACK_OBJECT_STR,
                                        .via.str = { (uint32_t) json_string_length(j), json_string_value(j) } };
                break;
        case JSON_INTEGER:
                if (json_integer_value(j) >= 0)
                        *o = (msgpack_object) { .type = MSGPACK_OBJECT_POSITIVE_INTEGER,
                                                .via.u64 = (uint64_t) json_integer_value(j) };
                else
                        *o = (msgpack_object) { .type = MSGPACK_OBJECT_NEGATIVE_INTEGER, .via.i64 = json_integer_value(j) };
                break;
        default:
                *o = (msgpack_object) { .type = MSGPACK_OBJECT_NIL };
        }
}

/* Call example::<function> with JSON args/kwargs/inbox; returns what the function returned and
 * leaves the packed output as compact JSON in *ret_out (values separated by spaces). The JSON
 * documents stay alive in `keep` because the objects point into them. */
static int run(const char *callable, agentix_shape shape, const char *args, const char *kwargs, const char *inbox,
               unsigned cancel_after, agentix_call *call, char **ret_out) {
        json_t *keep = json_array();
        const ResolvedCallable *c;
        _cleanup_free_ char *error = NULL;
        msgpack_object a = { .type = MSGPACK_OBJECT_NIL }, k = a, in = a, *argv;
        msgpack_unpacked u;
        size_t off = 0;
        char *out = NULL;
        size_t out_size = 0;
        FILE *f;
        int r;

        if (module_registry_resolve(reg, callable, shape, &c, &error) < 0) {
                fprintf(stderr, "resolve %s: %s\n", callable, error);
                abort();
        }
        const char *texts[] = { args, kwargs, inbox };
        msgpack_object *objs[] = { &a, &k, &in };
        for (size_t i = 0; i < 3; i++)
                if (texts[i]) {
                        json_t *j = json_loads(texts[i], JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL);
                        check(j);
                        json_array_append_new(keep, j);
                        from_json(j, objs[i]);
                }

        *call = (agentix_call) { .cancel_after = cancel_after };
        msgpack_sbuffer_init(&call->out);
        msgpack_packer_init(&call->pk, &call->out, msgpack_sbuffer_write);
        if (in.type == MSGPACK_OBJECT_ARRAY) {
                call->inbox = in.via.array.ptr;
                call->n_inbox = in.via.array.size;
        }

        check(signature_bind(c->signature, c->function->name, &a, &k, zone, &argv, &error) == 0);
        r = c->function->impl(call, argv, signature_n_params(c->signature));

        /* Render the output values as text to compare. */
        f = open_memstream(&out, &out_size);
        check(f);
        msgpack_unpacked_init(&u);
        while (msgpack_unpack_next(&u, call->out.data, call->out.size, &off) == MSGPACK_UNPACK_SUCCESS) {
                if (off != 0 && ftell(f) > 0)
                        fputc(' ', f);
                msgpack_object_print(f, u.data);
        }
        msgpack_unpacked_destroy(&u);
        fclose(f);
        msgpack_sbuffer_destroy(&call->out);
        json_decref(keep);
        *ret_out = out;
        return r;
}

static void expect(const char *callable, agentix_shape shape, const char *args, const char *kwargs, const char *inbox,
                   unsigned cancel_after, int expected_r, const char *expected_out, const char *expected_error) {
        agentix_call call;
        _cleanup_free_ char *out = NULL;
        int r;

        r = run(callable, shape, args, kwargs, inbox, cancel_after, &call, &out);
        if (r != expected_r || !streq(out, expected_out) ||
            !streq(expected_error ?: "", expected_error ? call.error_type : "")) {
                fprintf(stderr, "%s %s: returned %d, output \"%s\", error %s: %s\n", callable, strna(args), r, out,
                        call.error_type, call.error_message);
                abort();
        }
}

int main(int argc, char *argv[]) {
        _cleanup_free_ char *dir = NULL;

        check(argc == 2);
        dir = strdup(argv[1]);
        check(dir);
        check(module_registry_new(dirname(dir), &reg) == 0);
        zone = msgpack_zone_new(4096);
        check(zone);

        expect("example::add", AGENTIX_SHAPE_UNARY, "[2]", NULL, NULL, 0, 0, "3", NULL);
        expect("example::add", AGENTIX_SHAPE_UNARY, "[2]", "{\"b\": 40}", NULL, 0, 0, "42", NULL);
        expect("example::add", AGENTIX_SHAPE_UNARY, "[-5, 2]", NULL, NULL, 0, 0, "-3", NULL);
        expect("example::add", AGENTIX_SHAPE_UNARY, "[9223372036854775807]", NULL, NULL, 0, RAISED, "", "OverflowError");

        expect("example::greet", AGENTIX_SHAPE_UNARY, "[\"Ada\"]", NULL, NULL, 0, 0, "\"Hello, Ada!\"", NULL);
        expect("example::greet", AGENTIX_SHAPE_UNARY, NULL, "{\"name\": \"nul\\u0000\"}", NULL, 0, RAISED, "", "ValueError");

        expect("example::count", AGENTIX_SHAPE_STREAM, "[3]", "{\"start\": 5}", NULL, 0, 0, "5 6 7", NULL);
        expect("example::count", AGENTIX_SHAPE_STREAM, "[0]", NULL, NULL, 0, 0, "", NULL);
        expect("example::count", AGENTIX_SHAPE_STREAM, "[-1]", NULL, NULL, 0, RAISED, "", "ValueError");
        /* Cancelled after the second item: the function stops and passes -ECANCELED on. */
        expect("example::count", AGENTIX_SHAPE_STREAM, "[1000]", NULL, NULL, 2, -ECANCELED, "0 1", NULL);

        expect("example::upper", AGENTIX_SHAPE_BIDI, NULL, NULL, "[\"abc\", \"Hi there!\", \"\"]", 0, 0,
               "\"ABC\" \"HI THERE!\" \"\"", NULL);
        expect("example::upper", AGENTIX_SHAPE_BIDI, NULL, NULL, "[\"ok\", 1]", 0, RAISED, "\"OK\"", "TypeError");
        expect("example::upper", AGENTIX_SHAPE_BIDI, NULL, NULL, "[\"a\", \"b\"]", 1, -ECANCELED, "\"A\"", NULL);

        /* An item longer than the module's 256-byte chunk. */
        char long_in[2000], long_out[2000], inbox[2100], expected[2100];
        for (size_t i = 0; i < sizeof(long_in) - 1; i++) {
                long_in[i] = (char) ('a' + i % 26);
                long_out[i] = (char) ('A' + i % 26);
        }
        long_in[sizeof(long_in) - 1] = long_out[sizeof(long_out) - 1] = 0;
        snprintf(inbox, sizeof(inbox), "[\"%s\"]", long_in);
        snprintf(expected, sizeof(expected), "\"%s\"", long_out);
        expect("example::upper", AGENTIX_SHAPE_BIDI, NULL, NULL, inbox, 0, 0, expected, NULL);

        msgpack_zone_free(zone);
        module_registry_free(reg);
        printf("test-example-module: all passed\n");
        return 0;
}

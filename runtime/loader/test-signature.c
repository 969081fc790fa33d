/* SPDX-License-Identifier: MIT */
/* Signature parsing and argument binding: every type and default form, every parse error, every
 * binding rule with its exact (Python-worded) message, list indices, int→float, limits. */

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include <msgpack.h>

#include "macro.h"
#include "signature.h"

#define check(expr)                                                                     \
        do {                                                                            \
                if (!(expr)) {                                                          \
                        fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #expr); \
                        abort();                                                        \
                }                                                                       \
        } while (0)

#define check_streq(a, b)                                                               \
        do {                                                                            \
                const char *_a = (a), *_b = (b);                                        \
                if (!_a || !_b || strcmp(_a, _b) != 0) {                                \
                        fprintf(stderr, "%s:%d: \"%s\" != \"%s\"\n", __FILE__, __LINE__, strna(_a), strna(_b)); \
                        abort();                                                        \
                }                                                                       \
        } while (0)

static msgpack_zone *zone;

static char *mfree_str(char *p) {
        free(p);
        return NULL;
}

/* ---- building msgpack objects from JSON; a string "b:…" becomes bin ------------------------ */

static char *zone_strdup(const char *s, size_t n) {
        char *p = msgpack_zone_malloc(zone, n + 1);
        check(p);
        memcpy(p, s, n);
        p[n] = 0;
        return p;
}

static void from_json(json_t *j, msgpack_object *o) {
        size_t i, n;

        switch (json_typeof(j)) {
        case JSON_OBJECT: {
                const char *key;
                json_t *v;

                n = json_object_size(j);
                *o = (msgpack_object) { .type = MSGPACK_OBJECT_MAP, .via.map.size = (uint32_t) n };
                o->via.map.ptr = msgpack_zone_malloc(zone, MAX(n, (size_t) 1) * sizeof(msgpack_object_kv));
                i = 0;
                json_object_foreach(j, key, v) {
                        msgpack_object_kv *kv = &o->via.map.ptr[i++];
                        kv->key = (msgpack_object) { .type = MSGPACK_OBJECT_STR,
                                                     .via.str = { (uint32_t) strlen(key), zone_strdup(key, strlen(key)) } };
                        from_json(v, &kv->val);
                }
                break;
        }
        case JSON_ARRAY:
                n = json_array_size(j);
                *o = (msgpack_object) { .type = MSGPACK_OBJECT_ARRAY, .via.array.size = (uint32_t) n };
                o->via.array.ptr = msgpack_zone_malloc(zone, MAX(n, (size_t) 1) * sizeof(msgpack_object));
                for (i = 0; i < n; i++)
                        from_json(json_array_get(j, i), &o->via.array.ptr[i]);
                break;
        case JSON_STRING: {
                const char *s = json_string_value(j);
                size_t len = json_string_length(j);
                if (len >= 2 && strneq(s, "b:", 2))
                        *o = (msgpack_object) { .type = MSGPACK_OBJECT_BIN,
                                                .via.bin = { (uint32_t) (len - 2), zone_strdup(s + 2, len - 2) } };
                else
                        *o = (msgpack_object) { .type = MSGPACK_OBJECT_STR,
                                                .via.str = { (uint32_t) len, zone_strdup(s, len) } };
                break;
        }
        case JSON_INTEGER: {
                json_int_t v = json_integer_value(j);
                if (v >= 0)
                        *o = (msgpack_object) { .type = MSGPACK_OBJECT_POSITIVE_INTEGER, .via.u64 = (uint64_t) v };
                else
                        *o = (msgpack_object) { .type = MSGPACK_OBJECT_NEGATIVE_INTEGER, .via.i64 = v };
                break;
        }
        case JSON_REAL:
                *o = (msgpack_object) { .type = MSGPACK_OBJECT_FLOAT64, .via.f64 = json_real_value(j) };
                break;
        case JSON_TRUE:
        case JSON_FALSE:
                *o = (msgpack_object) { .type = MSGPACK_OBJECT_BOOLEAN, .via.boolean = json_is_true(j) };
                break;
        default:
                *o = (msgpack_object) { .type = MSGPACK_OBJECT_NIL };
        }
}

/* NULL for NULL, so tests can pass "no args" as NULL. */
static msgpack_object *J(const char *text) {
        json_error_t e;
        json_t *j;
        msgpack_object *o;

        if (!text)
                return NULL;
        j = json_loads(text, JSON_DECODE_ANY, &e);
        if (!j) {
                fprintf(stderr, "bad test JSON %s: %s\n", text, e.text);
                abort();
        }
        o = msgpack_zone_malloc(zone, sizeof(msgpack_object));
        from_json(j, o);
        json_decref(j);
        return o;
}

/* ---- helpers ------------------------------------------------------------------------------- */

static Signature *parse_ok(const char *text) {
        _cleanup_free_ char *error = NULL;
        Signature *s = NULL;
        int r;

        r = signature_parse(text, &s, &error);
        if (r < 0) {
                fprintf(stderr, "parse of %s failed: %s\n", text, strna(error));
                abort();
        }
        check(s);
        check(!error);
        return s;
}

static void parse_fails(const char *text, const char *expected_error) {
        _cleanup_free_ char *error = NULL;
        Signature *s = NULL;

        check(signature_parse(text, &s, &error) == -EINVAL);
        check(!s);
        check_streq(error, expected_error);
}

/* Bind and return argv; aborts on failure. */
static msgpack_object *bind_ok(const Signature *s, const char *args, const char *kwargs) {
        _cleanup_free_ char *error = NULL;
        msgpack_object *argv = NULL;
        int r;

        r = signature_bind(s, "f", J(args), J(kwargs), zone, &argv, &error);
        if (r < 0) {
                fprintf(stderr, "bind of %s %s failed: %s\n", strna(args), strna(kwargs), strna(error));
                abort();
        }
        check(argv);
        return argv;
}

static void bind_fails(const Signature *s, const char *fn, const char *args, const char *kwargs,
                       const char *expected_error) {
        _cleanup_free_ char *error = NULL;
        msgpack_object *argv = NULL;

        check(signature_bind(s, fn, J(args), J(kwargs), zone, &argv, &error) == -EINVAL);
        check(!argv);
        check_streq(error, expected_error);
}

static bool is_int(const msgpack_object *o, int64_t v) {
        if (o->type == MSGPACK_OBJECT_POSITIVE_INTEGER)
                return v >= 0 && o->via.u64 == (uint64_t) v;
        return o->type == MSGPACK_OBJECT_NEGATIVE_INTEGER && o->via.i64 == v;
}

static bool is_str(const msgpack_object *o, const char *s, size_t n) {
        return o->type == MSGPACK_OBJECT_STR && o->via.str.size == n && memcmp(o->via.str.ptr, s, n) == 0;
}

static bool is_float(const msgpack_object *o, double d) {
        return o->type == MSGPACK_OBJECT_FLOAT64 && o->via.f64 == d;
}

/* ---- parsing ------------------------------------------------------------------------------- */

static void test_parse_types(void) {
        Signature *s;

        s = parse_ok("()");
        check(signature_n_params(s) == 0);
        check_streq(signature_return_type(s), "None");
        signature_free(s);

        s = parse_ok("() -> int");
        check_streq(signature_return_type(s), "int");
        signature_free(s);

        s = parse_ok("(a: str, b: bytes, c: int, d: float, e: bool, f: map, g: any, h: none, i: list,"
                     " j: list[int], k: list[list[bytes|str]], l: int|str, m: str?, n: int | None,"
                     " o: list[int?]?, p: None) -> list[map]");
        check(signature_n_params(s) == 16);
        const char *expected[][2] = {
                { "a", "str" },
                { "b", "bytes" },
                { "c", "int" },
                { "d", "float" },
                { "e", "bool" },
                { "f", "map" },
                { "g", "any" },
                { "h", "None" },
                { "i", "list" },
                { "j", "list[int]" },
                { "k", "list[list[str | bytes]]" },
                { "l", "str | int" },
                { "m", "str | None" },
                { "n", "int | None" },
                { "o", "list[int | None] | None" },
                { "p", "None" },
        };
        for (size_t i = 0; i < ELEMENTSOF(expected); i++) {
                check_streq(signature_param_name(s, i), expected[i][0]);
                check_streq(signature_param_type(s, i), expected[i][1]);
        }
        check(!signature_param_name(s, 16));
        check(!signature_param_type(s, 16));
        check_streq(signature_return_type(s), "list[map]");
        signature_free(s);

        /* Whitespace anywhere between tokens, newlines included. */
        s = parse_ok("  (\n a :int ,\tb: list [ str ] ,c:str | bytes ?)->   map  ");
        check(signature_n_params(s) == 3);
        check_streq(signature_param_type(s, 1), "list[str]");
        check_streq(signature_param_type(s, 2), "str | bytes | None");
        check_streq(signature_return_type(s), "map");
        signature_free(s);
}

static void test_parse_defaults(void) {
        Signature *s;
        msgpack_object *argv;

        s = parse_ok("(a: any = None, b: bool = True, c: bool = False, d: int = 0, e: int = -5,"
                     " f: int = 9223372036854775807, g: float = 1.5, h: float = -2e3, i: float = 7,"
                     " j: str = \"q\\\"\\\\\\n\\t\\r\\x41\\u00e9\\u20ac'\\'\", k: list = [], l: map = { },"
                     " m: str = \"\", n: bytes? = None, o: str = \"nul\\0in\")");
        check(signature_n_params(s) == 15);
        argv = bind_ok(s, NULL, NULL);
        check(argv[0].type == MSGPACK_OBJECT_NIL);
        check(argv[1].type == MSGPACK_OBJECT_BOOLEAN && argv[1].via.boolean);
        check(argv[2].type == MSGPACK_OBJECT_BOOLEAN && !argv[2].via.boolean);
        check(is_int(&argv[3], 0));
        check(is_int(&argv[4], -5));
        check(is_int(&argv[5], INT64_MAX));
        check(is_float(&argv[6], 1.5));
        check(is_float(&argv[7], -2000.0));
        check(is_float(&argv[8], 7.0)); /* an int default of a float parameter is a float */
        check(is_str(&argv[9], "q\"\\\n\t\rA\xc3\xa9\xe2\x82\xac''", 14));
        check(argv[10].type == MSGPACK_OBJECT_ARRAY && argv[10].via.array.size == 0);
        check(argv[11].type == MSGPACK_OBJECT_MAP && argv[11].via.map.size == 0);
        check(is_str(&argv[12], "", 0));
        check(argv[13].type == MSGPACK_OBJECT_NIL);
        check(is_str(&argv[14], "nul\0in", 6));
        check_streq(signature_param_type(s, 13), "bytes | None");

        /* Defaults live in the zone, not in the signature: argv survives the signature. */
        signature_free(s);
        check(is_str(&argv[9], "q\"\\\n\t\rA\xc3\xa9\xe2\x82\xac''", 14));

        /* A None default makes the parameter optional. */
        s = parse_ok("(path: str = None)");
        check_streq(signature_param_type(s, 0), "str | None");
        argv = bind_ok(s, "[null]", NULL);
        check(argv[0].type == MSGPACK_OBJECT_NIL);
        signature_free(s);
}

static void test_parse_errors(void) {
        static const char *const types = "a type (str, bytes, int, float, bool, map, list, any or none)";
        char buf[512];

        parse_fails(NULL, "column 1: no signature");
        parse_fails("", "column 1: expected '(', found end of signature");
        parse_fails("a: int", "column 1: expected '(', found 'a'");
        parse_fails("(a int)", "column 4: expected ':' after the parameter name, found 'int'");
        parse_fails("(a)", "column 3: expected ':' after the parameter name, found ')'");
        snprintf(buf, sizeof(buf), "column 5: expected %s, found 'itn'", types);
        parse_fails("(a: itn)", buf);
        snprintf(buf, sizeof(buf), "column 5: expected %s, found ')'", types);
        parse_fails("(a: )", buf);
        snprintf(buf, sizeof(buf), "column 13: expected %s, found end of signature", types);
        parse_fails("(a: int) -> ", buf);
        snprintf(buf, sizeof(buf), "column 9: expected %s, found '?'", types);
        parse_fails("(a: int|?)", buf);
        parse_fails("(a: int", "column 8: expected ',' or ')', found end of signature");
        parse_fails("(a: int b: str)", "column 9: expected ',' or ')', found 'b'");
        parse_fails("(a: int,)", "column 9: expected a parameter name, found ')'");
        parse_fails("(1a: int)", "column 2: expected a parameter name, found '1a'");
        parse_fails("(a: int) junk", "column 10: expected '->' or end of signature, found 'junk'");
        parse_fails("(a: int) -> int int", "column 17: expected end of signature, found 'int'");
        parse_fails("(a: int) => int", "column 10: expected '->' or end of signature, found '='");
        parse_fails("(a: int, a: str)", "column 10: duplicate parameter 'a'");
        parse_fails("(a: int = 1, b: int)", "column 14: parameter 'b' without a default follows a parameter with one");
        parse_fails("(a: int|str|int)", "column 13: type 'int' appears twice in one union");
        parse_fails("(a: list|list[int])", "column 10: type 'list' appears twice in one union");
        parse_fails("(a: list[int)", "column 13: expected ']' or '|', found ')'");
        parse_fails("(a: int = \"x\")", "column 11: default of parameter 'a' is str, not int");
        parse_fails("(a: int = 1.5)", "column 11: default of parameter 'a' is float, not int");
        parse_fails("(a: str = None, b: bool = 1)", "column 27: default of parameter 'b' is int, not bool");
        parse_fails("(a: list[int] = {})", "column 17: default of parameter 'a' is map, not list[int]");
        parse_fails("(a: str = \"abc)", "column 11: unterminated string");
        parse_fails("(a: str = \"\\q\")", "column 13: expected an escape (\\\\ \\\" \\' \\n \\t \\r \\0 \\xHH \\uHHHH), found 'q'");
        parse_fails("(a: str = \"\\x4\")", "column 15: expected a hex digit, found '\"'");
        parse_fails("(a: str = \"\\ud800\")", "column 12: \\ud800 is a surrogate, not a character");
        parse_fails("(a: list = [1])", "column 13: expected ']' (only [] is allowed), found '1'");
        parse_fails("(a: map = {\"k\": 1})", "column 12: expected '}' (only {} is allowed), found '\"'");
        parse_fails("(a: int = 99999999999999999999)", "column 11: integer 99999999999999999999 out of range");
        parse_fails("(a: float = 1e999)", "column 13: float 1e999 out of range");
        parse_fails("(a: float = 1.)", "column 15: expected a digit after '.', found ')'");
        parse_fails("(a: float = 1e)", "column 15: expected a digit in the exponent, found ')'");
        parse_fails("(a: int = -)", "column 12: expected a digit, found ')'");
        parse_fails("(a: int = foo)",
                    "column 11: expected a default (None, True, False, a number, a \"string\", [] or {}), found 'foo'");
        parse_fails("(a: int = )",
                    "column 11: expected a default (None, True, False, a number, a \"string\", [] or {}), found ')'");
        parse_fails("(a: int\x01)", "column 8: expected ',' or ')', found byte 0x01");
}

static void test_parse_limits(void) {
        _cleanup_free_ char *text = NULL, *error = NULL;
        char name[SIGNATURE_NAME_MAX + 2];
        Signature *s = NULL;
        size_t n = 0;
        FILE *f;

        /* SIGNATURE_PARAMS_MAX parameters parse and bind; one more does not parse. */
        for (int extra = 0; extra <= 1; extra++) {
                f = open_memstream(&text, &n);
                fputc('(', f);
                for (int i = 0; i < SIGNATURE_PARAMS_MAX + extra; i++)
                        fprintf(f, "%sp%d: int", i ? ", " : "", i);
                fputc(')', f);
                fclose(f);
                if (extra == 0) {
                        s = parse_ok(text);
                        check(signature_n_params(s) == SIGNATURE_PARAMS_MAX);
                        _cleanup_free_ char *args = NULL;
                        size_t m = 0;
                        f = open_memstream(&args, &m);
                        fputc('[', f);
                        for (int i = 0; i < SIGNATURE_PARAMS_MAX; i++)
                                fprintf(f, "%s%d", i ? "," : "", i);
                        fputc(']', f);
                        fclose(f);
                        msgpack_object *argv = bind_ok(s, args, NULL);
                        for (int i = 0; i < SIGNATURE_PARAMS_MAX; i++)
                                check(is_int(&argv[i], i));
                        signature_free(s);
                } else {
                        check(signature_parse(text, &s, &error) == -EINVAL);
                        check(strstr(error, "more than 64 parameters"));
                        error = mfree_str(error);
                }
                text = mfree_str(text);
        }

        /* Names up to SIGNATURE_NAME_MAX characters. */
        memset(name, 'x', sizeof(name));
        name[SIGNATURE_NAME_MAX] = 0;
        check(asprintf(&text, "(%s: int)", name) > 0);
        s = parse_ok(text);
        check_streq(signature_param_name(s, 0), name);
        s = signature_free(s);
        text = mfree_str(text);
        name[SIGNATURE_NAME_MAX] = 'x';
        name[SIGNATURE_NAME_MAX + 1] = 0;
        check(asprintf(&text, "(%s: int)", name) > 0);
        parse_fails(text, "column 2: parameter name longer than 64 characters");
        text = mfree_str(text);

        /* SIGNATURE_DEPTH_MAX nested lists, not one more. */
        f = open_memstream(&text, &n);
        fputs("(a: ", f);
        for (int i = 0; i < SIGNATURE_DEPTH_MAX; i++)
                fputs("list[", f);
        fputs("int", f);
        for (int i = 0; i < SIGNATURE_DEPTH_MAX; i++)
                fputc(']', f);
        fputc(')', f);
        fclose(f);
        s = parse_ok(text);
        s = signature_free(s);
        text = mfree_str(text);
        f = open_memstream(&text, &n);
        fputs("(a: ", f);
        for (int i = 0; i < SIGNATURE_DEPTH_MAX + 1; i++)
                fputs("list[", f);
        fputs("int", f);
        for (int i = 0; i < SIGNATURE_DEPTH_MAX + 1; i++)
                fputc(']', f);
        fputc(')', f);
        fclose(f);
        parse_fails(text, "column 50: lists nested deeper than 8 levels");
        text = mfree_str(text);

        /* Signature text length. */
        text = malloc(SIGNATURE_TEXT_MAX + 2);
        check(text);
        memset(text, ' ', SIGNATURE_TEXT_MAX + 1);
        memcpy(text, "()", 2);
        text[SIGNATURE_TEXT_MAX] = 0; /* exactly the maximum: fine */
        s = parse_ok(text);
        s = signature_free(s);
        text[SIGNATURE_TEXT_MAX] = ' ';
        text[SIGNATURE_TEXT_MAX + 1] = 0;
        parse_fails(text, "column 1: signature longer than 4096 bytes");
}

/* ---- binding ------------------------------------------------------------------------------- */

static void test_bind_positional_and_keywords(void) {
        Signature *s = parse_ok("(path: str, offset: int = 0, limit: int = 2000) -> map");
        msgpack_object *argv;

        argv = bind_ok(s, "[\"/a\"]", NULL);
        check(is_str(&argv[0], "/a", 2) && is_int(&argv[1], 0) && is_int(&argv[2], 2000));

        argv = bind_ok(s, "[\"/a\", 5, 10]", "{}");
        check(is_str(&argv[0], "/a", 2) && is_int(&argv[1], 5) && is_int(&argv[2], 10));

        argv = bind_ok(s, "[]", "{\"limit\": 3, \"path\": \"/b\"}");
        check(is_str(&argv[0], "/b", 2) && is_int(&argv[1], 0) && is_int(&argv[2], 3));

        argv = bind_ok(s, "[\"/c\", 1]", "{\"limit\": -1}");
        check(is_str(&argv[0], "/c", 2) && is_int(&argv[1], 1) && is_int(&argv[2], -1));

        /* nil stands for "no args" / "no kwargs". */
        argv = bind_ok(s, "null", "{\"path\": \"/d\"}");
        check(is_str(&argv[0], "/d", 2));
        argv = bind_ok(s, "[\"/e\"]", "null");
        check(is_str(&argv[0], "/e", 2));

        bind_fails(s, "read", NULL, NULL, "read() missing required argument 'path'");
        bind_fails(s, "read", "[]", "{\"offset\": 1}", "read() missing required argument 'path'");
        bind_fails(s, "read", "[\"/a\", 1, 2, 3]", NULL, "read() takes 3 positional arguments but 4 were given");
        bind_fails(s, "read", "[\"/a\"]", "{\"lenght\": 1}", "read() got an unexpected keyword argument 'lenght'");
        bind_fails(s, "read", "[\"/a\"]", "{\"path\": \"/b\"}", "read() got multiple values for argument 'path'");
        bind_fails(s, "read", "[\"/a\", \"x\"]", NULL, "read() argument 'offset': expected int, got str");
        bind_fails(s, "read", "{}", NULL, "read() positional arguments must be a list, not map");
        bind_fails(s, "read", "[\"/a\"]", "[]", "read() keyword arguments must be a map, not list");
        bind_fails(s, NULL, NULL, NULL, "function() missing required argument 'path'");

        /* Counting words follow Python's grammar. */
        Signature *one = parse_ok("(a: int)"), *none = parse_ok("()");
        bind_fails(one, "g", "[1, 2]", NULL, "g() takes 1 positional argument but 2 were given");
        bind_fails(none, "h", "[1]", NULL, "h() takes 0 positional arguments but 1 was given");
        argv = bind_ok(none, "[]", "{}");
        signature_free(one);
        signature_free(none);

        /* Binding problems are reported before type problems, as in Python. */
        bind_fails(s, "read", "[1]", "{\"nope\": 1}", "read() got an unexpected keyword argument 'nope'");

        /* A NULL ret_error is allowed. */
        check(signature_bind(s, "read", NULL, NULL, zone, &argv, NULL) == -EINVAL);

        signature_free(s);
}

/* Maps that JSON cannot express: duplicate keys, non-str keys. */
static void test_bind_odd_kwargs(void) {
        Signature *s = parse_ok("(a: int, b: int = 2)");
        _cleanup_free_ char *error = NULL;
        msgpack_object *argv = NULL;
        msgpack_object_kv kv[2] = {
                { .key = { .type = MSGPACK_OBJECT_STR, .via.str = { 1, "a" } },
                  .val = { .type = MSGPACK_OBJECT_POSITIVE_INTEGER, .via.u64 = 1 } },
                { .key = { .type = MSGPACK_OBJECT_STR, .via.str = { 1, "a" } },
                  .val = { .type = MSGPACK_OBJECT_POSITIVE_INTEGER, .via.u64 = 2 } },
        };
        msgpack_object kwargs = { .type = MSGPACK_OBJECT_MAP, .via.map = { 2, kv } };

        check(signature_bind(s, "f", NULL, &kwargs, zone, &argv, &error) == -EINVAL);
        check_streq(error, "f() got multiple values for argument 'a'");
        error = mfree_str(error);

        kv[0].key = (msgpack_object) { .type = MSGPACK_OBJECT_POSITIVE_INTEGER, .via.u64 = 1 };
        check(signature_bind(s, "f", NULL, &kwargs, zone, &argv, &error) == -EINVAL);
        check_streq(error, "f() keywords must be strings");
        error = mfree_str(error);

        kv[0].key = (msgpack_object) { .type = MSGPACK_OBJECT_BIN, .via.bin = { 1, "a" } };
        check(signature_bind(s, "f", NULL, &kwargs, zone, &argv, &error) == -EINVAL);
        check_streq(error, "f() keywords must be strings");
        error = mfree_str(error);

        /* Peer-chosen names are escaped and cut short in messages. */
        kv[0].key = (msgpack_object) { .type = MSGPACK_OBJECT_STR, .via.str = { 5, "x\x01'\\\xff" } };
        kwargs.via.map.size = 1;
        check(signature_bind(s, "f", NULL, &kwargs, zone, &argv, &error) == -EINVAL);
        check_streq(error, "f() got an unexpected keyword argument 'x\\x01\\x27\\x5c\\xff'");
        error = mfree_str(error);

        char long_name[1000];
        memset(long_name, 'k', sizeof(long_name));
        kv[0].key = (msgpack_object) { .type = MSGPACK_OBJECT_STR, .via.str = { sizeof(long_name), long_name } };
        check(signature_bind(s, "f", NULL, &kwargs, zone, &argv, &error) == -EINVAL);
        check(strlen(error) == strlen("f() got an unexpected keyword argument ''") + SIGNATURE_NAME_MAX + 3);
        check(strstr(error, "kkk...'"));
        error = mfree_str(error);

        check(!argv);
        signature_free(s);
}

static void test_bind_types(void) {
        Signature *s = parse_ok("(s: str, b: bytes, i: int, f: float, t: bool, m: map, l: list, a: any, n: none,"
                                " u: str | int, o: int?)");
        msgpack_object *argv;

        argv = bind_ok(s, "[\"x\", \"b:yz\", -3, 2.5, true, {\"k\": 1}, [1, \"two\"], [null], null, 4, null]", NULL);
        check(is_str(&argv[0], "x", 1));
        check(argv[1].type == MSGPACK_OBJECT_BIN && argv[1].via.bin.size == 2 && memcmp(argv[1].via.bin.ptr, "yz", 2) == 0);
        check(is_int(&argv[2], -3));
        check(is_float(&argv[3], 2.5));
        check(argv[4].type == MSGPACK_OBJECT_BOOLEAN && argv[4].via.boolean);
        check(argv[5].type == MSGPACK_OBJECT_MAP && argv[5].via.map.size == 1);
        check(argv[6].type == MSGPACK_OBJECT_ARRAY && argv[6].via.array.size == 2);
        check(argv[7].type == MSGPACK_OBJECT_ARRAY);
        check(argv[8].type == MSGPACK_OBJECT_NIL);
        check(is_int(&argv[9], 4));
        check(argv[10].type == MSGPACK_OBJECT_NIL);

        /* The other alternative of the union, and a value for the optional. */
        argv = bind_ok(s, "[\"x\", \"b:\", 0, 0.0, false, {}, [], 1, null, \"s\", 7]", NULL);
        check(is_str(&argv[9], "s", 1));
        check(is_int(&argv[10], 7));

        /* int is accepted for float and arrives as a float. */
        argv = bind_ok(s, "[\"x\", \"b:\", 0, 3, false, {}, [], 1, null, 1, 1]", NULL);
        check(is_float(&argv[3], 3.0));
        argv = bind_ok(s, "[\"x\", \"b:\", 0, -3, false, {}, [], 1, null, 1, 1]", NULL);
        check(is_float(&argv[3], -3.0));

        const char *good = "\"x\", \"b:\", 0, 0.5, false, {}, [], 1, null, 1, 1";
        struct {
                unsigned index;
                const char *value;
                const char *error;
        } bad[] = {
                { 0, "\"b:x\"", "f() argument 's': expected str, got bytes" },
                { 0, "1", "f() argument 's': expected str, got int" },
                { 0, "null", "f() argument 's': expected str, got None" },
                { 1, "\"x\"", "f() argument 'b': expected bytes, got str" },
                { 2, "1.5", "f() argument 'i': expected int, got float" },
                { 2, "true", "f() argument 'i': expected int, got bool" },
                { 3, "\"1.5\"", "f() argument 'f': expected float, got str" },
                { 4, "1", "f() argument 't': expected bool, got int" },
                { 5, "[]", "f() argument 'm': expected map, got list" },
                { 6, "{}", "f() argument 'l': expected list, got map" },
                { 8, "0", "f() argument 'n': expected None, got int" },
                { 9, "1.5", "f() argument 'u': expected str | int, got float" },
                { 10, "\"7\"", "f() argument 'o': expected int | None, got str" },
        };
        for (size_t k = 0; k < ELEMENTSOF(bad); k++) {
                /* The good argument list with element `index` replaced. */
                _cleanup_free_ char *list = NULL, *args = NULL;
                json_t *j;

                check(asprintf(&list, "[%s]", good) > 0);
                j = json_loads(list, 0, NULL);
                check(j);
                check(json_array_set_new(j, bad[k].index, json_loads(bad[k].value, JSON_DECODE_ANY, NULL)) == 0);
                args = json_dumps(j, JSON_COMPACT);
                json_decref(j);
                bind_fails(s, "f", args, NULL, bad[k].error);
        }
        signature_free(s);

        /* ext and float32, which JSON cannot express. */
        s = parse_ok("(f: float, x: any)");
        msgpack_object items[2] = {
                { .type = MSGPACK_OBJECT_FLOAT32, .via.f64 = 0.25 },
                { .type = MSGPACK_OBJECT_EXT, .via.ext = { .type = 1, .size = 0, .ptr = "" } },
        };
        msgpack_object args = { .type = MSGPACK_OBJECT_ARRAY, .via.array = { 2, items } };
        _cleanup_free_ char *error = NULL;
        check(signature_bind(s, "f", &args, NULL, zone, &argv, &error) == 0);
        check(is_float(&argv[0], 0.25)); /* normalised to FLOAT64 */
        check(argv[1].type == MSGPACK_OBJECT_EXT);
        items[0] = items[1];
        check(signature_bind(s, "f", &args, NULL, zone, &argv, &error) == -EINVAL);
        check_streq(error, "f() argument 'f': expected float, got ext");
        signature_free(s);
}

static void test_bind_lists(void) {
        Signature *s = parse_ok("(paths: list[str], m: list[list[int]] = [], f: list[float] = [], o: list[str?]? = None)");
        msgpack_object *args, *argv;

        argv = bind_ok(s, "[[\"a\", \"b\"]]", NULL);
        check(argv[0].via.array.size == 2 && is_str(&argv[0].via.array.ptr[1], "b", 1));
        check(argv[1].type == MSGPACK_OBJECT_ARRAY && argv[1].via.array.size == 0);
        check(argv[3].type == MSGPACK_OBJECT_NIL);

        bind_fails(s, "download", "[[\"a\", \"b\", 3]]", NULL, "download() argument 'paths'[2]: expected str, got int");
        bind_fails(s, "download", "[[\"a\"]]", "{\"m\": [[1], [2, \"x\"]]}",
                   "download() argument 'm'[1][1]: expected int, got str");
        bind_fails(s, "download", "[[\"a\"]]", "{\"m\": [[1], 2]}", "download() argument 'm'[1]: expected list[int], got int");
        bind_fails(s, "download", "[\"a\"]", NULL, "download() argument 'paths': expected list[str], got str");
        bind_fails(s, "download", "[[]]", "{\"o\": [\"a\", null, 1]}",
                   "download() argument 'o'[2]: expected str | None, got int");
        argv = bind_ok(s, "[[]]", "{\"o\": [\"a\", null]}");
        check(argv[3].via.array.size == 2);

        /* Elements converted int → float: the list is copied, the caller's stays as it was. */
        args = J("[[], [], [1, 2.5, -3]]");
        char *error = NULL;
        check(signature_bind(s, "f", args, NULL, zone, &argv, &error) == 0);
        const msgpack_object *in = &args->via.array.ptr[2], *out = &argv[2];
        check(out->via.array.ptr != in->via.array.ptr);
        check(is_float(&out->via.array.ptr[0], 1.0));
        check(is_float(&out->via.array.ptr[1], 2.5));
        check(is_float(&out->via.array.ptr[2], -3.0));
        check(is_int(&in->via.array.ptr[0], 1));
        check(is_int(&in->via.array.ptr[2], -3));

        /* No conversion needed: no copy. */
        args = J("[[\"a\"], [[1]], [0.5]]");
        check(signature_bind(s, "f", args, NULL, zone, &argv, &error) == 0);
        check(argv[0].via.array.ptr == args->via.array.ptr[0].via.array.ptr);
        check(argv[2].via.array.ptr == args->via.array.ptr[2].via.array.ptr);
        signature_free(s);

        /* Converted lists nested in lists. */
        s = parse_ok("(g: list[list[float]])");
        argv = bind_ok(s, "[[[0.5], [1, 2]]]", NULL);
        check(is_float(&argv[0].via.array.ptr[0].via.array.ptr[0], 0.5));
        check(is_float(&argv[0].via.array.ptr[1].via.array.ptr[1], 2.0));
        signature_free(s);

        /* Index paths as deep as types go. */
        s = parse_ok("(d: list[list[list[list[list[list[list[list[int]]]]]]]])");
        argv = bind_ok(s, "[[[[[[[[[1]]]]]]]]]", NULL);
        bind_fails(s, "f", "[[[[[[[[[1]]]]]]], [[[[[[[2, \"x\"]]]]]]]]]", NULL,
                   "f() argument 'd'[1][0][0][0][0][0][0][1]: expected int, got str");
        signature_free(s);
}

int main(void) {
        zone = msgpack_zone_new(MSGPACK_ZONE_CHUNK_SIZE);
        check(zone);

        test_parse_types();
        test_parse_defaults();
        test_parse_errors();
        test_parse_limits();
        test_bind_positional_and_keywords();
        test_bind_odd_kwargs();
        test_bind_types();
        test_bind_lists();

        msgpack_zone_free(zone);
        printf("test-signature: all passed\n");
        return 0;
}

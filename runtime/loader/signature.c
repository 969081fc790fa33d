/* SPDX-License-Identifier: MIT */
/* Function signatures: parsing the text a module declares (grammar in agentix-module.h) and
 * binding each call's arguments to it.
 *
 * Parsing runs once per function, when its module loads, so it favours precise errors over
 * speed. Binding runs on every call: it looks nothing up by hashing, allocates only the argv
 * array (plus copies of str defaults and of lists whose elements had to be converted) in the
 * caller's zone, and reports mismatches the way Python does. */

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"
#include "envelope.h"
#include "signature.h"

/* The kinds of value a type admits; a type is a set of kinds (a union). */
enum {
        KIND_STR = 1u << 0,
        KIND_BYTES = 1u << 1,
        KIND_INT = 1u << 2,
        KIND_FLOAT = 1u << 3,
        KIND_BOOL = 1u << 4,
        KIND_MAP = 1u << 5,
        KIND_LIST = 1u << 6,
        KIND_ANY = 1u << 7,
        KIND_NONE = 1u << 8,
};

/* In the order a type is printed. */
static const struct {
        const char *name;
        unsigned kind;
} kind_names[] = {
        { "str", KIND_STR },     { "bytes", KIND_BYTES }, { "int", KIND_INT },   { "float", KIND_FLOAT },
        { "bool", KIND_BOOL },   { "map", KIND_MAP },     { "list", KIND_LIST }, { "any", KIND_ANY },
        { "none", KIND_NONE },
};

typedef struct Type {
        unsigned kinds;
        struct Type *element; /* list[T]: T; NULL for a plain list, whose elements are not checked */
        char *text;           /* canonical form, for error messages */
} Type;

typedef struct Param {
        char *name;
        size_t name_len;
        Type *type;
        bool has_default;
        msgpack_object default_value; /* a str default points into default_str */
        char *default_str;
} Param;

struct Signature {
        Param *params;
        size_t n_params;
        Type *return_type; /* NULL: no "->", i.e. None */
};

/* ---- types --------------------------------------------------------------------------------- */

static Type *type_free(Type *t) {
        if (!t)
                return NULL;
        type_free(t->element);
        free(t->text);
        free(t);
        return NULL;
}

static void type_freep(Type **t) {
        type_free(*t);
}

/* (Re)compute t->text: alternatives in kind_names order joined by " | ", None last. */
static int type_format(Type *t) {
        char *text = NULL;
        size_t size = 0;
        FILE *f;
        bool first = true;

        f = open_memstream(&text, &size);
        if (!f)
                return -ENOMEM;
        for (size_t i = 0; i < ELEMENTSOF(kind_names); i++) {
                unsigned k = kind_names[i].kind;

                if (!(t->kinds & k))
                        continue;
                fputs(first ? "" : " | ", f);
                first = false;
                if (k == KIND_NONE)
                        fputs("None", f);
                else if (k == KIND_LIST && t->element)
                        fprintf(f, "list[%s]", t->element->text);
                else
                        fputs(kind_names[i].name, f);
        }
        if (fclose(f) != 0 || !text) {
                free(text);
                return -ENOMEM;
        }
        free(t->text);
        t->text = text;
        return 0;
}

/* Where a value failed its type: the index path below the argument, what was expected there
 * and what came. */
typedef struct Mismatch {
        uint32_t index[SIGNATURE_DEPTH_MAX];
        unsigned depth;
        const Type *expected;
        msgpack_object_type got;
} Mismatch;

static int check_value(const Type *t, const msgpack_object *v, msgpack_object *ret, msgpack_zone *zone,
                       Mismatch *m, unsigned depth);

/* Check every element of an array. Elements normally stay where they are; only when one has
 * to be converted (int → float) is the array copied into the zone. */
static int check_list(const Type *element, const msgpack_object *v, msgpack_object *ret, msgpack_zone *zone,
                      Mismatch *m, unsigned depth) {
        msgpack_object *copy = NULL;
        uint32_t n = v->via.array.size;

        for (uint32_t i = 0; i < n; i++) {
                const msgpack_object *e = &v->via.array.ptr[i];
                msgpack_object out;
                int r;

                if (depth < ELEMENTSOF(m->index))
                        m->index[depth] = i;
                r = check_value(element, e, &out, zone, m, depth + 1);
                if (r < 0)
                        return r;
                if (r > 0 && !copy) {
                        copy = zone ? msgpack_zone_malloc(zone, (size_t) n * sizeof(msgpack_object)) : NULL;
                        if (!copy)
                                return -ENOMEM;
                        memcpy(copy, v->via.array.ptr, (size_t) i * sizeof(msgpack_object));
                }
                if (copy)
                        copy[i] = out;
        }
        if (!copy)
                return 0;
        ret->via.array.ptr = copy;
        return 1;
}

/* Returns 0 when v is accepted unchanged, 1 when *ret is a converted copy, -EINVAL on a
 * mismatch (described in *m), -ENOMEM. */
static int check_value(const Type *t, const msgpack_object *v, msgpack_object *ret, msgpack_zone *zone,
                       Mismatch *m, unsigned depth) {
        unsigned k = t->kinds;

        *ret = *v;
        if (k & KIND_ANY)
                return 0;

        switch (v->type) {
        case MSGPACK_OBJECT_NIL:
                if (k & KIND_NONE)
                        return 0;
                break;
        case MSGPACK_OBJECT_BOOLEAN:
                if (k & KIND_BOOL)
                        return 0;
                break;
        case MSGPACK_OBJECT_POSITIVE_INTEGER:
        case MSGPACK_OBJECT_NEGATIVE_INTEGER:
                if (k & KIND_INT)
                        return 0;
                if (k & KIND_FLOAT) {
                        /* So a float parameter always arrives as a FLOAT64. */
                        ret->type = MSGPACK_OBJECT_FLOAT64;
                        ret->via.f64 = v->type == MSGPACK_OBJECT_POSITIVE_INTEGER ? (double) v->via.u64
                                                                                   : (double) v->via.i64;
                        return 1;
                }
                break;
        case MSGPACK_OBJECT_FLOAT32:
        case MSGPACK_OBJECT_FLOAT64:
                if (k & KIND_FLOAT) {
                        /* msgpack-c keeps FLOAT32 values in via.f64 too. */
                        ret->type = MSGPACK_OBJECT_FLOAT64;
                        return v->type == MSGPACK_OBJECT_FLOAT32;
                }
                break;
        case MSGPACK_OBJECT_STR:
                if (k & KIND_STR)
                        return 0;
                break;
        case MSGPACK_OBJECT_BIN:
                if (k & KIND_BYTES)
                        return 0;
                break;
        case MSGPACK_OBJECT_MAP:
                if (k & KIND_MAP)
                        return 0;
                break;
        case MSGPACK_OBJECT_ARRAY:
                if (k & KIND_LIST)
                        return t->element ? check_list(t->element, v, ret, zone, m, depth) : 0;
                break;
        default:
                break;
        }

        m->expected = t;
        m->got = v->type;
        m->depth = MIN(depth, (unsigned) SIGNATURE_DEPTH_MAX);
        return -EINVAL;
}

/* ---- parsing ------------------------------------------------------------------------------- */

typedef struct Parser {
        const char *text;
        const char *p;
        char *error;
} Parser;

_printf_(3, 0) static int parser_failv(Parser *P, const char *at, const char *fmt, va_list ap) {
        _cleanup_free_ char *msg = NULL;

        if (P->error)
                return -EINVAL;
        if (vasprintf(&msg, fmt, ap) < 0)
                return -ENOMEM;
        if (asprintf(&P->error, "column %zu: %s", (size_t) (at - P->text) + 1, msg) < 0) {
                P->error = NULL;
                return -ENOMEM;
        }
        return -EINVAL;
}

_printf_(3, 4) static int parser_fail(Parser *P, const char *at, const char *fmt, ...) {
        va_list ap;
        int r;

        va_start(ap, fmt);
        r = parser_failv(P, at, fmt, ap);
        va_end(ap);
        return r;
}

static bool is_ident_start(char c) {
        return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_';
}

static bool is_ident_char(char c) {
        return is_ident_start(c) || (c >= '0' && c <= '9');
}

/* "expected X, found Y", where Y describes what sits at the failing position. */
static int parser_fail_expected(Parser *P, const char *at, const char *expected) {
        const char *e = at;

        if (!*at)
                return parser_fail(P, at, "expected %s, found end of signature", expected);
        if (is_ident_char(*at)) {
                while (is_ident_char(*e) && e - at < 32)
                        e++;
                return parser_fail(P, at, "expected %s, found '%.*s'", expected, (int) (e - at), at);
        }
        if (isprint((unsigned char) *at))
                return parser_fail(P, at, "expected %s, found '%c'", expected, *at);
        return parser_fail(P, at, "expected %s, found byte 0x%02x", expected, (unsigned char) *at);
}

static void skip_space(Parser *P) {
        while (*P->p == ' ' || *P->p == '\t' || *P->p == '\n' || *P->p == '\r')
                P->p++;
}

static size_t scan_identifier(const char *p) {
        size_t n = 0;

        if (!is_ident_start(p[0]))
                return 0;
        while (is_ident_char(p[n]))
                n++;
        return n;
}

static bool token_is(const char *p, size_t n, const char *word) {
        return strlen(word) == n && memcmp(p, word, n) == 0;
}

static int parse_type(Parser *P, unsigned depth, Type **ret) {
        _cleanup_(type_freep) Type *t = NULL;
        int r;

        if (depth > SIGNATURE_DEPTH_MAX)
                return parser_fail(P, P->p, "lists nested deeper than %d levels", SIGNATURE_DEPTH_MAX);

        t = calloc(1, sizeof(Type));
        if (!t)
                return -ENOMEM;

        for (;;) {
                const char *start;
                unsigned kind = 0;
                size_t n;

                skip_space(P);
                start = P->p;
                n = scan_identifier(start);
                for (size_t i = 0; i < ELEMENTSOF(kind_names) && n > 0; i++)
                        if (token_is(start, n, kind_names[i].name))
                                kind = kind_names[i].kind;
                if (token_is(start, n, "None")) /* as Python spells it */
                        kind = KIND_NONE;
                if (kind == 0)
                        return parser_fail_expected(
                                P, start, "a type (str, bytes, int, float, bool, map, list, any or none)");
                if (t->kinds & kind)
                        return parser_fail(P, start, "type '%.*s' appears twice in one union", (int) n, start);
                t->kinds |= kind;
                P->p += n;

                if (kind == KIND_LIST) {
                        skip_space(P);
                        if (*P->p == '[') {
                                P->p++;
                                r = parse_type(P, depth + 1, &t->element);
                                if (r < 0)
                                        return r;
                                skip_space(P);
                                if (*P->p != ']')
                                        return parser_fail_expected(P, P->p, "']' or '|'");
                                P->p++;
                        }
                }

                skip_space(P);
                if (*P->p != '|')
                        break;
                P->p++;
        }

        if (*P->p == '?') {
                P->p++;
                t->kinds |= KIND_NONE;
        }

        r = type_format(t);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(t);
        return 0;
}

static int hex_value(char c) {
        if (c >= '0' && c <= '9')
                return c - '0';
        if (c >= 'a' && c <= 'f')
                return c - 'a' + 10;
        if (c >= 'A' && c <= 'F')
                return c - 'A' + 10;
        return -1;
}

static int parse_hex(Parser *P, const char *p, unsigned digits, unsigned *ret) {
        unsigned v = 0;

        for (unsigned i = 0; i < digits; i++) {
                int h = hex_value(p[i]);
                if (h < 0)
                        return parser_fail_expected(P, p + i, "a hex digit");
                v = v * 16 + (unsigned) h;
        }
        *ret = v;
        return 0;
}

/* A double-quoted string with the escapes \\ \" \' \n \t \r \0 \xHH \uHHHH (UTF-8 encoded). */
static int parse_string(Parser *P, msgpack_object *ret, char **ret_storage) {
        _cleanup_free_ char *s = NULL;
        const char *open = P->p;
        size_t n = 0;
        int r;

        P->p++; /* the opening quote */
        s = malloc(strlen(P->p) + 1); /* decoding never grows the text */
        if (!s)
                return -ENOMEM;

        for (;;) {
                const char *c = P->p;
                unsigned v = 0; /* set by parse_hex() on success; GCC cannot see that it fails negative */

                if (*c == '\0')
                        return parser_fail(P, open, "unterminated string");
                if (*c == '"') {
                        P->p++;
                        break;
                }
                if (*c != '\\') {
                        s[n++] = *c;
                        P->p++;
                        continue;
                }

                switch (c[1]) {
                case '\\':
                case '"':
                case '\'':
                        s[n++] = c[1];
                        P->p += 2;
                        break;
                case 'n':
                        s[n++] = '\n';
                        P->p += 2;
                        break;
                case 't':
                        s[n++] = '\t';
                        P->p += 2;
                        break;
                case 'r':
                        s[n++] = '\r';
                        P->p += 2;
                        break;
                case '0':
                        s[n++] = '\0';
                        P->p += 2;
                        break;
                case 'x':
                        r = parse_hex(P, c + 2, 2, &v);
                        if (r < 0)
                                return r;
                        s[n++] = (char) v;
                        P->p += 4;
                        break;
                case 'u':
                        r = parse_hex(P, c + 2, 4, &v);
                        if (r < 0)
                                return r;
                        if (v >= 0xd800 && v <= 0xdfff)
                                return parser_fail(P, c, "\\u%04x is a surrogate, not a character", v);
                        if (v < 0x80)
                                s[n++] = (char) v;
                        else if (v < 0x800) {
                                s[n++] = (char) (0xc0 | (v >> 6));
                                s[n++] = (char) (0x80 | (v & 0x3f));
                        } else {
                                s[n++] = (char) (0xe0 | (v >> 12));
                                s[n++] = (char) (0x80 | ((v >> 6) & 0x3f));
                                s[n++] = (char) (0x80 | (v & 0x3f));
                        }
                        P->p += 6;
                        break;
                default:
                        return parser_fail_expected(P, c + 1, "an escape (\\\\ \\\" \\' \\n \\t \\r \\0 \\xHH \\uHHHH)");
                }
        }

        s[n] = 0;
        *ret = (msgpack_object) {
                .type = MSGPACK_OBJECT_STR,
                .via.str = { .size = (uint32_t) n, .ptr = s },
        };
        *ret_storage = TAKE_PTR(s);
        return 0;
}

/* An integer, or a float when it has a fraction or an exponent: -?[0-9]+(.[0-9]+)?([eE][+-]?[0-9]+)? */
static int parse_number(Parser *P, msgpack_object *ret) {
        const char *start = P->p, *p = P->p;
        bool is_float = false;
        char buf[64], *end;

        if (*p == '-' || *p == '+')
                p++;
        if (!isdigit((unsigned char) *p))
                return parser_fail_expected(P, p, "a digit");
        while (isdigit((unsigned char) *p))
                p++;
        if (*p == '.') {
                is_float = true;
                p++;
                if (!isdigit((unsigned char) *p))
                        return parser_fail_expected(P, p, "a digit after '.'");
                while (isdigit((unsigned char) *p))
                        p++;
        }
        if (*p == 'e' || *p == 'E') {
                is_float = true;
                p++;
                if (*p == '-' || *p == '+')
                        p++;
                if (!isdigit((unsigned char) *p))
                        return parser_fail_expected(P, p, "a digit in the exponent");
                while (isdigit((unsigned char) *p))
                        p++;
        }

        if ((size_t) (p - start) >= sizeof(buf))
                return parser_fail(P, start, "number longer than %zu characters", sizeof(buf) - 1);
        memcpy(buf, start, (size_t) (p - start));
        buf[p - start] = 0;

        errno = 0;
        if (is_float) {
                double d = strtod(buf, &end);
                if (errno == ERANGE || !isfinite(d))
                        return parser_fail(P, start, "float %s out of range", buf);
                *ret = (msgpack_object) { .type = MSGPACK_OBJECT_FLOAT64, .via.f64 = d };
        } else {
                long long i = strtoll(buf, &end, 10);
                if (errno == ERANGE)
                        return parser_fail(P, start, "integer %s out of range", buf);
                if (i >= 0)
                        *ret = (msgpack_object) { .type = MSGPACK_OBJECT_POSITIVE_INTEGER, .via.u64 = (uint64_t) i };
                else
                        *ret = (msgpack_object) { .type = MSGPACK_OBJECT_NEGATIVE_INTEGER, .via.i64 = i };
        }
        P->p = p;
        return 0;
}

static int parse_default(Parser *P, Param *param) {
        const char *start;
        size_t n;
        int r;

        skip_space(P);
        start = P->p;
        n = scan_identifier(start);

        if (token_is(start, n, "None"))
                param->default_value = (msgpack_object) { .type = MSGPACK_OBJECT_NIL };
        else if (token_is(start, n, "True") || token_is(start, n, "False"))
                param->default_value = (msgpack_object) {
                        .type = MSGPACK_OBJECT_BOOLEAN,
                        .via.boolean = start[0] == 'T',
                };
        else if (*start == '"') {
                r = parse_string(P, &param->default_value, &param->default_str);
                if (r < 0)
                        return r;
        } else if (*start == '[' || *start == '{') {
                char close = *start == '[' ? ']' : '}';

                P->p++;
                skip_space(P);
                if (*P->p != close)
                        return parser_fail_expected(P, P->p, close == ']' ? "']' (only [] is allowed)"
                                                                          : "'}' (only {} is allowed)");
                P->p++;
                param->default_value = (msgpack_object) {
                        .type = close == ']' ? MSGPACK_OBJECT_ARRAY : MSGPACK_OBJECT_MAP,
                };
        } else if (*start == '-' || *start == '+' || isdigit((unsigned char) *start)) {
                r = parse_number(P, &param->default_value);
                if (r < 0)
                        return r;
        } else
                return parser_fail_expected(P, start, "a default (None, True, False, a number, a \"string\", [] or {})");

        P->p += n; /* the keyword, if it was one */

        /* A None default makes the parameter optional, as in Python's `x: str = None`. */
        if (param->default_value.type == MSGPACK_OBJECT_NIL && !(param->type->kinds & KIND_NONE)) {
                param->type->kinds |= KIND_NONE;
                r = type_format(param->type);
                if (r < 0)
                        return r;
        }

        /* The default must be a value of the type (an int default of a float parameter becomes a
         * float). Defaults are never lists with elements, so nothing needs a zone here. */
        Mismatch m = {};
        msgpack_object converted;
        r = check_value(param->type, &param->default_value, &converted, NULL, &m, 0);
        if (r == -EINVAL)
                return parser_fail(P, start, "default of parameter '%s' is %s, not %s", param->name,
                                   mp_type_name(param->default_value.type), param->type->text);
        if (r < 0)
                return r;
        param->default_value = converted;
        param->has_default = true;
        return 0;
}

static int parse_param(Parser *P, Signature *s) {
        const char *start;
        Param *param;
        size_t n;
        int r;

        skip_space(P);
        start = P->p;
        n = scan_identifier(start);
        if (n == 0)
                return parser_fail_expected(P, start, "a parameter name");
        if (n > SIGNATURE_NAME_MAX)
                return parser_fail(P, start, "parameter name longer than %d characters", SIGNATURE_NAME_MAX);
        for (size_t i = 0; i < s->n_params; i++)
                if (s->params[i].name_len == n && memcmp(s->params[i].name, start, n) == 0)
                        return parser_fail(P, start, "duplicate parameter '%.*s'", (int) n, start);
        if (s->n_params >= SIGNATURE_PARAMS_MAX)
                return parser_fail(P, start, "more than %d parameters", SIGNATURE_PARAMS_MAX);

        /* params was sized for SIGNATURE_PARAMS_MAX entries up front. */
        param = &s->params[s->n_params];
        *param = (Param) {};
        param->name = strndup(start, n);
        if (!param->name)
                return -ENOMEM;
        param->name_len = n;
        s->n_params++; /* owned by s from here on, so signature_free() cleans up on errors */
        P->p += n;

        skip_space(P);
        if (*P->p != ':')
                return parser_fail_expected(P, P->p, "':' after the parameter name");
        P->p++;

        r = parse_type(P, 0, &param->type);
        if (r < 0)
                return r;

        skip_space(P);
        if (*P->p == '=') {
                P->p++;
                r = parse_default(P, param);
                if (r < 0)
                        return r;
        } else if (s->n_params > 1 && s->params[s->n_params - 2].has_default)
                /* Positional binding could never reach it without passing the defaulted one. */
                return parser_fail(P, start, "parameter '%s' without a default follows a parameter with one",
                                   param->name);
        return 0;
}

int signature_parse(const char *text, Signature **ret, char **ret_error) {
        Parser P = { .text = text ?: "", .p = text ?: "" };
        Signature *s = NULL;
        int r;

        if (!ret)
                return -EINVAL;

        if (!text) {
                r = parser_fail(&P, P.p, "no signature");
                goto finish;
        }
        if (strnlen(text, SIGNATURE_TEXT_MAX + 1) > SIGNATURE_TEXT_MAX) {
                r = parser_fail(&P, P.p, "signature longer than %d bytes", SIGNATURE_TEXT_MAX);
                goto finish;
        }

        s = calloc(1, sizeof(Signature));
        if (!s)
                return -ENOMEM;
        s->params = calloc(SIGNATURE_PARAMS_MAX, sizeof(Param));
        if (!s->params) {
                r = -ENOMEM;
                goto finish;
        }

        skip_space(&P);
        if (*P.p != '(') {
                r = parser_fail_expected(&P, P.p, "'('");
                goto finish;
        }
        P.p++;
        skip_space(&P);
        if (*P.p == ')')
                P.p++;
        else
                for (;;) {
                        r = parse_param(&P, s);
                        if (r < 0)
                                goto finish;
                        skip_space(&P);
                        if (*P.p == ')') {
                                P.p++;
                                break;
                        }
                        if (*P.p != ',') {
                                r = parser_fail_expected(&P, P.p, "',' or ')'");
                                goto finish;
                        }
                        P.p++;
                }

        skip_space(&P);
        if (P.p[0] == '-' && P.p[1] == '>') {
                P.p += 2;
                r = parse_type(&P, 0, &s->return_type);
                if (r < 0)
                        goto finish;
                skip_space(&P);
                if (*P.p) {
                        r = parser_fail_expected(&P, P.p, "end of signature");
                        goto finish;
                }
        } else if (*P.p) {
                r = parser_fail_expected(&P, P.p, "'->' or end of signature");
                goto finish;
        }

        *ret = TAKE_PTR(s);
        r = 0;

finish:
        signature_free(s);
        if (r < 0 && ret_error)
                *ret_error = TAKE_PTR(P.error);
        free(P.error);
        return r;
}

Signature *signature_free(Signature *s) {
        if (!s)
                return NULL;
        for (size_t i = 0; i < s->n_params; i++) {
                free(s->params[i].name);
                type_free(s->params[i].type);
                free(s->params[i].default_str);
        }
        free(s->params);
        type_free(s->return_type);
        free(s);
        return NULL;
}

size_t signature_n_params(const Signature *s) {
        return s ? s->n_params : 0;
}

const char *signature_param_name(const Signature *s, size_t i) {
        return s && i < s->n_params ? s->params[i].name : NULL;
}

const char *signature_param_type(const Signature *s, size_t i) {
        return s && i < s->n_params ? s->params[i].type->text : NULL;
}

const char *signature_return_type(const Signature *s) {
        if (!s)
                return NULL;
        return s->return_type ? s->return_type->text : "None";
}

/* ---- binding ------------------------------------------------------------------------------- */

/* Room for a peer-supplied name printed with escapes: SIGNATURE_NAME_MAX bytes as \xHH, "...". */
#define ESCAPED_NAME_MAX (SIGNATURE_NAME_MAX * 4 + 4)

/* Peer-supplied keys end up in error messages: keep them printable and short. */
static const char *escape_name(const char *p, size_t n, char buf[static ESCAPED_NAME_MAX]) {
        size_t o = 0;

        for (size_t i = 0; i < n; i++) {
                unsigned char c = (unsigned char) p[i];

                if (i == SIGNATURE_NAME_MAX) {
                        memcpy(buf + o, "...", 3);
                        o += 3;
                        break;
                }
                if (c >= 0x20 && c < 0x7f && c != '\'' && c != '\\')
                        buf[o++] = (char) c;
                else
                        o += (size_t) snprintf(buf + o, 5, "\\x%02x", c);
        }
        buf[o] = 0;
        return buf;
}

_printf_(2, 3) static int bind_fail(char **ret_error, const char *fmt, ...) {
        va_list ap;
        int k;

        if (!ret_error)
                return -EINVAL;
        va_start(ap, fmt);
        k = vasprintf(ret_error, fmt, ap);
        va_end(ap);
        if (k < 0) {
                *ret_error = NULL;
                return -ENOMEM;
        }
        return -EINVAL;
}

static ssize_t find_param(const Signature *s, const char *name, size_t n) {
        for (size_t i = 0; i < s->n_params; i++)
                if (s->params[i].name_len == n && memcmp(s->params[i].name, name, n) == 0)
                        return (ssize_t) i;
        return -1;
}

static int copy_default(const Param *p, msgpack_zone *zone, msgpack_object *ret) {
        *ret = p->default_value;
        if (ret->type == MSGPACK_OBJECT_STR && ret->via.str.size > 0) {
                char *copy = msgpack_zone_malloc(zone, ret->via.str.size);
                if (!copy)
                        return -ENOMEM;
                memcpy(copy, ret->via.str.ptr, ret->via.str.size);
                ret->via.str.ptr = copy;
        }
        return 0;
}

int signature_bind(const Signature *s, const char *function_name, const msgpack_object *args,
                   const msgpack_object *kwargs, msgpack_zone *zone, msgpack_object **ret_argv,
                   char **ret_error) {
        const msgpack_object *bound[SIGNATURE_PARAMS_MAX] = {};
        const char *fn = function_name ?: "function";
        char escaped[ESCAPED_NAME_MAX];
        msgpack_object *argv;
        uint32_t n_args = 0;
        int r;

        if (!s || !zone || !ret_argv)
                return -EINVAL;

        if (args && args->type == MSGPACK_OBJECT_ARRAY)
                n_args = args->via.array.size;
        else if (args && args->type != MSGPACK_OBJECT_NIL)
                return bind_fail(ret_error, "%s() positional arguments must be a list, not %s", fn,
                                 mp_type_name(args->type));
        if (kwargs && kwargs->type != MSGPACK_OBJECT_MAP && kwargs->type != MSGPACK_OBJECT_NIL)
                return bind_fail(ret_error, "%s() keyword arguments must be a map, not %s", fn,
                                 mp_type_name(kwargs->type));

        /* First who gets which value, as Python does it: positionals in order, then keywords. */
        if (n_args > s->n_params)
                return bind_fail(ret_error, "%s() takes %zu positional argument%s but %" PRIu32 " %s given", fn,
                                 s->n_params, s->n_params == 1 ? "" : "s", n_args, n_args == 1 ? "was" : "were");
        for (uint32_t i = 0; i < n_args; i++)
                bound[i] = &args->via.array.ptr[i];

        if (kwargs && kwargs->type == MSGPACK_OBJECT_MAP)
                for (uint32_t i = 0; i < kwargs->via.map.size; i++) {
                        const msgpack_object_kv *kv = &kwargs->via.map.ptr[i];
                        ssize_t p;

                        if (kv->key.type != MSGPACK_OBJECT_STR)
                                return bind_fail(ret_error, "%s() keywords must be strings", fn);
                        p = find_param(s, kv->key.via.str.ptr, kv->key.via.str.size);
                        if (p < 0)
                                return bind_fail(ret_error, "%s() got an unexpected keyword argument '%s'", fn,
                                                 escape_name(kv->key.via.str.ptr, kv->key.via.str.size, escaped));
                        if (bound[p])
                                return bind_fail(ret_error, "%s() got multiple values for argument '%s'", fn,
                                                 s->params[p].name);
                        bound[p] = &kv->val;
                }

        for (size_t i = 0; i < s->n_params; i++)
                if (!bound[i] && !s->params[i].has_default)
                        return bind_fail(ret_error, "%s() missing required argument '%s'", fn, s->params[i].name);

        /* Then the types, in declaration order. */
        argv = msgpack_zone_malloc(zone, MAX(s->n_params, (size_t) 1) * sizeof(msgpack_object));
        if (!argv)
                return -ENOMEM;

        for (size_t i = 0; i < s->n_params; i++) {
                Mismatch m = {};

                if (!bound[i]) {
                        r = copy_default(&s->params[i], zone, &argv[i]);
                        if (r < 0)
                                return r;
                        continue;
                }

                r = check_value(s->params[i].type, bound[i], &argv[i], zone, &m, 0);
                if (r == -EINVAL) {
                        char path[SIGNATURE_DEPTH_MAX * 12 + 1] = "";
                        size_t o = 0;

                        for (unsigned d = 0; d < m.depth; d++)
                                o += (size_t) snprintf(path + o, sizeof(path) - o, "[%" PRIu32 "]", m.index[d]);
                        return bind_fail(ret_error, "%s() argument '%s'%s: expected %s, got %s", fn,
                                         s->params[i].name, path, m.expected->text, mp_type_name(m.got));
                }
                if (r < 0)
                        return r;
        }

        *ret_argv = argv;
        return 0;
}

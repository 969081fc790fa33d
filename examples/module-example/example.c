/* SPDX-License-Identifier: MIT */
/* example.so — the smallest useful agentix module, one function per call shape.
 *
 *   example::add(a: int, b: int = 1) -> int   unary:  one result
 *   example::greet(name: str) -> str          unary:  strings in and out
 *   example::count(n: int, start: int = 0)    stream: yields start, start+1, … (n items)
 *   example::upper()                          bidi:   echoes each str the caller sends, upper-cased
 *
 * A module is a shared object that exports one table, `agentix_module_v1` (the AGENTIX_MODULE()
 * macro at the bottom defines it). The worker dlopen()s the file the first time someone calls
 * "example::…", checks the table, and parses every signature string once. Before each call it
 * binds the caller's positional and keyword arguments to the signature: a function receives
 * exactly one msgpack_object per parameter, in declaration order, already type-checked, with
 * defaults filled in. So the functions below never check argument counts or types.
 *
 * Build and install: see README.md; reference: agentix-module(3). */

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agentix-module.h"

/* An int parameter arrives as MSGPACK_OBJECT_POSITIVE_INTEGER (value in via.u64) or
 * MSGPACK_OBJECT_NEGATIVE_INTEGER (via.i64). A positive one may exceed INT64_MAX. */
static int get_int64(const msgpack_object *o, int64_t *ret) {
        if (o->type == MSGPACK_OBJECT_NEGATIVE_INTEGER) {
                *ret = o->via.i64;
                return 0;
        }
        if (o->via.u64 > INT64_MAX)
                return -ERANGE;
        *ret = (int64_t) o->via.u64;
        return 0;
}

/* ---- unary: pack one value into agentix_call_result() and return 0 ----------------------- */

static int example_add(agentix_call *call, const msgpack_object *argv, size_t argc) {
        int64_t a, b, sum;

        /* argv[0] is `a`, argv[1] is `b` (1 when the caller left it out). */
        if (get_int64(&argv[0], &a) < 0 || get_int64(&argv[1], &b) < 0 || __builtin_add_overflow(a, b, &sum))
                /* A typed error: the caller sees {type: "OverflowError", message: "…"}. */
                return agentix_call_raise(call, "OverflowError", "add() result does not fit in 64 bits");

        return msgpack_pack_int64(agentix_call_result(call), sum) < 0 ? -ENOMEM : 0;
}

static int example_greet(agentix_call *call, const msgpack_object *argv, size_t argc) {
        char *name, *greeting;
        int r;

        /* Strings arrive as (pointer, length), not NUL-terminated; this helper makes a C string
         * and refuses one with a NUL byte inside. */
        name = agentix_arg_strdup(&argv[0]);
        if (!name)
                return errno == ENOMEM ? -ENOMEM
                                       : agentix_call_raise(call, "ValueError", "name must not contain NUL bytes");

        greeting = malloc(strlen(name) + sizeof("Hello, !"));
        if (!greeting) {
                free(name);
                return -ENOMEM; /* a plain negative errno is reported as an OSError */
        }
        sprintf(greeting, "Hello, %s!", name);
        free(name);

        r = agentix_pack_cstr(agentix_call_result(call), greeting);
        free(greeting);
        return r;
}

/* ---- stream: item_begin(), pack one value, item_end(); return 0 to end the stream ------------ */

static int example_count(agentix_call *call, const msgpack_object *argv, size_t argc) {
        int64_t n, start;

        if (get_int64(&argv[0], &n) < 0 || get_int64(&argv[1], &start) < 0)
                return agentix_call_raise(call, "OverflowError", "count() arguments must fit in 64 bits");
        if (n < 0)
                return agentix_call_raise(call, "ValueError", "count() n must be >= 0, got %" PRId64, n);
        if (start > INT64_MAX - n)
                return agentix_call_raise(call, "OverflowError", "count() would pass INT64_MAX");

        for (int64_t i = 0; i < n; i++) {
                int r;

                if (msgpack_pack_int64(agentix_call_item_begin(call), start + i) < 0)
                        return -ENOMEM;
                /* Sends the item. It blocks while the caller is slow (backpressure) and returns
                 * -ECANCELED once the caller cancelled: then stop and return it. */
                r = agentix_call_item_end(call);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* ---- bidi: like stream, plus an inbox of items from the caller ------------------------------- */

static int example_upper(agentix_call *call, const msgpack_object *argv, size_t argc) {
        for (;;) {
                msgpack_object item;
                msgpack_packer *pk;
                int r;

                /* Wait for the next inbox item: 1 = got one, 0 = the caller closed the inbox,
                 * <0 = cancelled (with timeout -1 there is no -ETIMEDOUT). */
                r = agentix_call_inbox_next(call, &item, -1);
                if (r < 0)
                        return r;
                if (r == 0)
                        return 0; /* inbox closed: ending the function ends our stream too */

                if (item.type != MSGPACK_OBJECT_STR)
                        return agentix_call_raise(call, "TypeError", "upper() takes str items");

                /* Pack a str header for the full length, then the body in pieces: the packer
                 * only appends bytes, so no copy of the whole item is needed. ASCII letters
                 * only; other UTF-8 bytes pass through unchanged. */
                pk = agentix_call_item_begin(call);
                if (msgpack_pack_str(pk, item.via.str.size) < 0)
                        return -ENOMEM;
                for (uint32_t done = 0; done < item.via.str.size;) {
                        char chunk[256];
                        uint32_t n = item.via.str.size - done < sizeof(chunk) ? item.via.str.size - done
                                                                               : (uint32_t) sizeof(chunk);

                        for (uint32_t i = 0; i < n; i++)
                                chunk[i] = (char) toupper((unsigned char) item.via.str.ptr[done + i]);
                        if (msgpack_pack_str_body(pk, chunk, n) < 0)
                                return -ENOMEM;
                        done += n;
                }
                r = agentix_call_item_end(call);
                if (r < 0)
                        return r;
        }
}

/* ---- the descriptor table --------------------------------------------------------------------- */

/* One entry per (name, shape); a name may appear once per shape. The signature grammar is in
 * agentix-module.h. The table ends with an empty entry. */
static const agentix_function example_functions[] = {
        {
                .name = "add",
                .shape = AGENTIX_SHAPE_UNARY,
                .signature = "(a: int, b: int = 1) -> int",
                .impl = example_add,
                .doc = "Add two integers.",
        },
        {
                .name = "greet",
                .shape = AGENTIX_SHAPE_UNARY,
                .signature = "(name: str) -> str",
                .impl = example_greet,
                .doc = "Say hello.",
        },
        {
                .name = "count",
                .shape = AGENTIX_SHAPE_STREAM,
                .signature = "(n: int, start: int = 0) -> int",
                .impl = example_count,
                .doc = "Yield n integers from start.",
        },
        {
                .name = "upper",
                .shape = AGENTIX_SHAPE_BIDI,
                .signature = "() -> str",
                .impl = example_upper,
                .doc = "Echo each str inbox item upper-cased.",
        },
        {},
};

/* The name must equal the file name without ".so". */
AGENTIX_MODULE(.name = "example", .doc = "A minimal example module.", .functions = example_functions);

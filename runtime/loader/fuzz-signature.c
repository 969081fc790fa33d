/* SPDX-License-Identifier: MIT */
/* libFuzzer target for signatures. The input's first byte picks the mode:
 *   even: the rest is signature text for signature_parse() (module authors are trusted, but a
 *         typo must give an error, never a crash);
 *   odd:  the rest is msgpack from a peer: one object bound as args, the next as kwargs, to
 *         each of a few signatures covering every type, default and nesting form.
 * Invariants: a failed parse or bind always says why; a successful bind yields one value per
 * parameter, each of its parameter's type (checked again by rebinding argv positionally). */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "signature.h"

#define CHECK(cond)                                                                     \
        do {                                                                            \
                if (!(cond)) {                                                          \
                        fprintf(stderr, "%s:%d: invariant broken: %s\n", __FILE__, __LINE__, #cond); \
                        abort();                                                        \
                }                                                                       \
        } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const signatures[] = {
        "(path: str, offset: int = 0, limit: int = 2000) -> map",
        "(s: str, b: bytes, i: int, f: float, t: bool, m: map, l: list, a: any, n: none)",
        "(paths: list[str], m: list[list[int | str]] = [], f: list[float] = [], o: list[str?]? = None)",
        "(x: float = 1, y: str = \"d\\u00e9f\", z: map = {}, w: bool | None = True)",
        "()",
};

static void fuzz_parse(const uint8_t *data, size_t size) {
        char *text, *error = NULL;
        Signature *s = NULL;
        int r;

        text = strndup((const char *) data, size);
        if (!text)
                return;
        r = signature_parse(text, &s, &error);
        CHECK(r == 0 || r == -EINVAL || r == -ENOMEM);
        if (r == 0) {
                CHECK(s && !error);
                CHECK(signature_n_params(s) <= SIGNATURE_PARAMS_MAX);
                for (size_t i = 0; i < signature_n_params(s); i++)
                        CHECK(signature_param_name(s, i) && signature_param_type(s, i));
                CHECK(signature_return_type(s));
        } else
                CHECK(!s && (r == -ENOMEM || (error && strncmp(error, "column ", 7) == 0)));
        signature_free(s);
        free(error);
        free(text);
}

static void fuzz_bind(const uint8_t *data, size_t size) {
        msgpack_zone *zone = msgpack_zone_new(4096);
        msgpack_object objs[2] = { { .type = MSGPACK_OBJECT_NIL }, { .type = MSGPACK_OBJECT_NIL } };
        size_t off = 0;

        if (!zone)
                return;
        for (size_t i = 0; i < 2 && off < size; i++)
                if (msgpack_unpack((const char *) data, size, &off, zone, &objs[i]) != MSGPACK_UNPACK_SUCCESS)
                        break;

        for (size_t k = 0; k < sizeof(signatures) / sizeof(signatures[0]); k++) {
                msgpack_object *argv = NULL;
                char *error = NULL;
                Signature *s = NULL;
                int r;

                CHECK(signature_parse(signatures[k], &s, NULL) == 0);
                r = signature_bind(s, "f", &objs[0], &objs[1], zone, &argv, &error);
                CHECK(r == 0 || r == -EINVAL || r == -ENOMEM);
                if (r == 0) {
                        /* Bound values fit: binding them again, positionally, succeeds. */
                        msgpack_object again = {
                                .type = MSGPACK_OBJECT_ARRAY,
                                .via.array = { (uint32_t) signature_n_params(s), argv },
                        };
                        msgpack_object *argv2 = NULL;

                        CHECK(argv && !error);
                        CHECK(signature_bind(s, "f", &again, NULL, zone, &argv2, NULL) == 0);
                } else
                        CHECK(!argv && (r == -ENOMEM || (error && strncmp(error, "f() ", 4) == 0)));
                free(error);
                signature_free(s);
        }
        msgpack_zone_free(zone);
}

/* msgpack-c reserves count × sizeof(msgpack_object) for a container as soon as it reads its
 * header (see tests/fuzz/fuzz-envelope.c); refuse huge single allocations like a bounded
 * allocator would, so msgpack-c fails with NOMEM and fuzzing goes on into the binder. */
const char *__asan_default_options(void);
const char *__asan_default_options(void) {
        return "allocator_may_return_null=1:max_allocation_size_mb=256";
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        if (size == 0)
                return 0;
        if (data[0] % 2 == 0)
                fuzz_parse(data + 1, size - 1);
        else
                fuzz_bind(data + 1, size - 1);
        return 0;
}

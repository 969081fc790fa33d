/* SPDX-License-Identifier: MIT */
/* The small argument and packing helpers of agentix-module.h. They are exported from the
 * program (AGENTIX_EXPORT) so that dlopen()ed modules resolve them against the worker; the
 * agentix_call_* functions live with the worker (runtime/worker/call.c). */

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "agentix-module.h"
#include "envelope.h"

char *agentix_arg_strdup(const msgpack_object *o) {
        const char *p;
        uint32_t n;
        char *s;

        if (!o) {
                errno = EINVAL;
                return NULL;
        }
        switch (o->type) {
        case MSGPACK_OBJECT_NIL:
                errno = 0; /* lets callers tell nil from a failure */
                return NULL;
        case MSGPACK_OBJECT_STR:
                p = o->via.str.ptr;
                n = o->via.str.size;
                break;
        case MSGPACK_OBJECT_BIN:
                p = o->via.bin.ptr;
                n = o->via.bin.size;
                break;
        default:
                errno = EINVAL;
                return NULL;
        }

        /* A C string cannot carry a NUL: refuse rather than silently truncate (a path "a\0b"
         * must not become "a"). */
        if (n > 0 && memchr(p, 0, n)) {
                errno = EINVAL;
                return NULL;
        }
        s = malloc((size_t) n + 1);
        if (!s) {
                errno = ENOMEM;
                return NULL;
        }
        if (n > 0)
                memcpy(s, p, n);
        s[n] = 0;
        return s;
}

const msgpack_object *agentix_map_get(const msgpack_object *o, const char *key) {
        if (!key)
                return NULL;
        return mp_map_get(o, key);
}

int agentix_pack_cstr(msgpack_packer *pk, const char *s) {
        return mp_pack_cstr(pk, s);
}

int agentix_pack_kv_str(msgpack_packer *pk, const char *key, const char *value) {
        int r;

        r = mp_pack_cstr(pk, key);
        if (r < 0)
                return r;
        return mp_pack_cstr(pk, value);
}

int agentix_pack_kv_int(msgpack_packer *pk, const char *key, int64_t value) {
        int r;

        r = mp_pack_cstr(pk, key);
        if (r < 0)
                return r;
        return msgpack_pack_int64(pk, value) < 0 ? -ENOMEM : 0;
}

int agentix_pack_kv_bool(msgpack_packer *pk, const char *key, bool value) {
        int r;

        r = mp_pack_cstr(pk, key);
        if (r < 0)
                return r;
        return (value ? msgpack_pack_true(pk) : msgpack_pack_false(pk)) < 0 ? -ENOMEM : 0;
}

/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdbool.h>

#include "mp-check.h"

static int read_be(const uint8_t *p, size_t n, size_t *off, unsigned width, size_t *ret) {
        size_t v = 0;

        if (width > n - *off)
                return -EBADMSG;
        for (unsigned i = 0; i < width; i++)
                v = v << 8 | p[*off + i];
        *off += width;
        *ret = v;
        return 0;
}

int mp_check(const uint8_t *p, size_t n) {
        size_t pending[MP_CHECK_MAX_DEPTH + 1];
        unsigned depth = 0;
        size_t off = 0;

        pending[0] = 1;
        for (;;) {
                size_t skip = 0, children = 0, v;
                unsigned width = 0;
                bool container = false;
                uint8_t b;

                while (pending[depth] == 0) {
                        if (depth == 0)
                                return off == n ? 0 : -EBADMSG;
                        depth--;
                }
                pending[depth]--;

                if (off >= n)
                        return -EBADMSG;
                b = p[off++];

                if (b <= 0x7f || b >= 0xe0 || b == 0xc0 || b == 0xc2 || b == 0xc3)
                        continue; /* fixints, nil, booleans: the byte is the value */
                if ((b & 0xf0) == 0x80) {
                        children = (size_t) (b & 0x0f) * 2;
                        container = true;
                } else if ((b & 0xf0) == 0x90) {
                        children = b & 0x0f;
                        container = true;
                }
                else if ((b & 0xe0) == 0xa0)
                        skip = b & 0x1f;
                else
                        switch (b) {
                        case 0xc4: case 0xd9: width = 1; break;                   /* bin8, str8 */
                        case 0xc5: case 0xda: width = 2; break;                   /* bin16, str16 */
                        case 0xc6: case 0xdb: width = 4; break;                   /* bin32, str32 */
                        case 0xc7: width = 1; skip = 1; break;                    /* ext8 (+ type byte) */
                        case 0xc8: width = 2; skip = 1; break;                    /* ext16 */
                        case 0xc9: width = 4; skip = 1; break;                    /* ext32 */
                        case 0xca: skip = 4; break;                               /* float32 */
                        case 0xcb: skip = 8; break;                               /* float64 */
                        case 0xcc: case 0xd0: skip = 1; break;
                        case 0xcd: case 0xd1: skip = 2; break;
                        case 0xce: case 0xd2: skip = 4; break;
                        case 0xcf: case 0xd3: skip = 8; break;
                        case 0xd4: skip = 2; break;                               /* fixext1..16 */
                        case 0xd5: skip = 3; break;
                        case 0xd6: skip = 5; break;
                        case 0xd7: skip = 9; break;
                        case 0xd8: skip = 17; break;
                        case 0xdc: case 0xdd:                                     /* array16/32 */
                                if (read_be(p, n, &off, b == 0xdc ? 2 : 4, &children) < 0)
                                        return -EBADMSG;
                                container = true;
                                break;
                        case 0xde: case 0xdf:                                     /* map16/32 */
                                if (read_be(p, n, &off, b == 0xde ? 2 : 4, &children) < 0)
                                        return -EBADMSG;
                                children *= 2;
                                container = true;
                                break;
                        default:                                                  /* 0xc1: never used */
                                return -EBADMSG;
                        }

                if (width > 0) {
                        if (read_be(p, n, &off, width, &v) < 0)
                                return -EBADMSG;
                        skip += v;
                }
                if (skip > n - off)
                        return -EBADMSG;
                off += skip;

                /* msgpack-c spends a stack level on every container, empty ones included. */
                if (container && depth >= MP_CHECK_MAX_DEPTH)
                        return -ELOOP;
                if (children > 0) {
                        if (children > n - off)
                                return -EBADMSG;
                        pending[++depth] = children;
                }
        }
}

int mp_get_int(const msgpack_object *o, int64_t min, int64_t max, int64_t *ret) {
        int64_t v;

        if (o->type == MSGPACK_OBJECT_POSITIVE_INTEGER) {
                if (o->via.u64 > (uint64_t) INT64_MAX)
                        return -ERANGE;
                v = (int64_t) o->via.u64;
        } else if (o->type == MSGPACK_OBJECT_NEGATIVE_INTEGER)
                v = o->via.i64;
        else
                return -EINVAL;
        if (v < min || v > max)
                return -ERANGE;
        *ret = v;
        return 0;
}

/* SPDX-License-Identifier: MIT */
#include <sys/random.h>

#include "call-envelope.h"
#include "envelope.h"

static int random_bytes(void *p, size_t n) {
        ssize_t k;

        /* GRND_NONBLOCK: never stall an event loop; the pool is long initialized when a
         * client runs (a fresh boot's early-boot window is the only case, and it fails loudly).
         * Up to 256 bytes come whole. */
        k = getrandom(p, n, GRND_NONBLOCK);
        if (k < 0)
                return negative_errno();
        return (size_t) k == n ? 0 : -EIO;
}

int call_id_new(CallIdPool *pool, char buf[static 33]) {
        static const char hex[] = "0123456789abcdef";
        uint8_t own[16];
        const uint8_t *raw = own;
        int r;

        if (pool) {
                if (pool->left < 16) {
                        r = random_bytes(pool->bytes, sizeof(pool->bytes));
                        if (r < 0)
                                return r;
                        pool->left = sizeof(pool->bytes);
                }
                raw = pool->bytes + sizeof(pool->bytes) - pool->left;
                pool->left -= 16;
        } else {
                r = random_bytes(own, sizeof(own));
                if (r < 0)
                        return r;
        }
        for (size_t i = 0; i < 16; i++) {
                buf[2 * i] = hex[raw[i] >> 4];
                buf[2 * i + 1] = hex[raw[i] & 15];
        }
        buf[32] = 0;
        return 0;
}

const char *call_shape_name(agentix_call_shape shape) {
        switch (shape) {
        case AGENTIX_CALL_UNARY:
                return "unary";
        case AGENTIX_CALL_STREAM:
                return "stream";
        case AGENTIX_CALL_BIDI:
                return "bidi";
        default:
                return NULL;
        }
}

int call_envelope_pack(Buffer *out, const char *id, const char *callable, agentix_call_shape shape,
                       const agentix_args *a, uint64_t deadline_ms) {
        msgpack_packer pk;
        int r = 0;

        mp_packer_init_buffer(&pk, out);
        r |= msgpack_pack_map(&pk, 5 + (deadline_ms > 0) + (shape == AGENTIX_CALL_BIDI));
        r |= mp_pack_cstr(&pk, "call_id");
        r |= mp_pack_cstr(&pk, id);
        r |= mp_pack_cstr(&pk, "callable");
        r |= mp_pack_cstr(&pk, callable);
        r |= mp_pack_cstr(&pk, "shape");
        r |= mp_pack_cstr(&pk, call_shape_name(shape));
        r |= mp_pack_cstr(&pk, "args");
        if (a && a->args_size > 0)
                r |= buffer_append(out, a->args, a->args_size);
        else
                r |= msgpack_pack_array(&pk, 0);
        r |= mp_pack_cstr(&pk, "kwargs");
        if (a && a->kwargs_size > 0)
                r |= buffer_append(out, a->kwargs, a->kwargs_size);
        else
                r |= msgpack_pack_map(&pk, 0);
        if (deadline_ms > 0) {
                r |= mp_pack_cstr(&pk, "deadline_ms");
                r |= msgpack_pack_uint64(&pk, deadline_ms);
        }
        if (shape == AGENTIX_CALL_BIDI) {
                r |= mp_pack_cstr(&pk, "in_ack");
                r |= msgpack_pack_true(&pk);
        }
        return r ? -ENOMEM : 0;
}

int call_envelope_pack_item(Buffer *out, const char *id, const void *item, size_t item_size, bool urgent) {
        msgpack_packer pk;
        int r = 0;

        mp_packer_init_buffer(&pk, out);
        r |= msgpack_pack_map(&pk, 3 + urgent);
        r |= mp_pack_cstr(&pk, "call_id");
        r |= mp_pack_cstr(&pk, id);
        r |= mp_pack_cstr(&pk, "item");
        r |= buffer_append(out, item, item_size);
        if (urgent) {
                r |= mp_pack_cstr(&pk, "urgent");
                r |= msgpack_pack_true(&pk);
        }
        r |= mp_pack_cstr(&pk, "seq");
        r |= buffer_append(out, (const uint8_t[9]) { 0xcf }, 9); /* uint64 0 */
        return r ? -ENOMEM : 0;
}

void call_envelope_set_seq(uint8_t *envelope, size_t size, uint64_t seq) {
        assert(size >= 9 && envelope[size - 9] == 0xcf);
        for (size_t i = 0; i < 8; i++)
                envelope[size - 1 - i] = (uint8_t) (seq >> (8 * i));
}

int call_envelope_pack_resume(Buffer *out, const char *const *ids, size_t n_ids) {
        msgpack_packer pk;
        int r = 0;

        if (n_ids > UINT32_MAX)
                return -E2BIG;
        mp_packer_init_buffer(&pk, out);
        r |= msgpack_pack_map(&pk, 1);
        r |= mp_pack_cstr(&pk, "call_ids");
        r |= msgpack_pack_array(&pk, (uint32_t) n_ids);
        for (size_t i = 0; i < n_ids; i++)
                r |= mp_pack_cstr(&pk, ids[i]);
        return r ? -ENOMEM : 0;
}

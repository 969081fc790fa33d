/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <string.h>
#include <sys/random.h>

#include "ws-frame.h"

int ws_mask_key(WsMaskKeys *k, uint8_t key[static 4]) {
        if (k->left < 4) {
                /* Up to 256 bytes getrandom() returns whole. GRND_NONBLOCK: never stall the
                 * loop; only a fresh boot's early window fails. */
                ssize_t n = getrandom(k->pool, sizeof(k->pool), GRND_NONBLOCK);
                if (n < 0)
                        return -errno;
                if ((size_t) n != sizeof(k->pool))
                        return -EIO;
                k->left = sizeof(k->pool);
        }
        memcpy(key, k->pool + sizeof(k->pool) - k->left, 4);
        k->left -= 4;
        return 0;
}

size_t ws_frame_header(uint8_t h[static WS_FRAME_HEADER_MAX], unsigned opcode, bool fin, uint64_t len,
                       const uint8_t key[static 4]) {
        size_t n = 2;

        h[0] = (uint8_t) ((fin ? 0x80 : 0) | (opcode & 0x0f));
        if (len < 126)
                h[1] = (uint8_t) (0x80 | len);
        else if (len < 65536) {
                h[1] = 0x80 | 126;
                h[2] = (uint8_t) (len >> 8);
                h[3] = (uint8_t) len;
                n = 4;
        } else {
                h[1] = 0x80 | 127;
                for (unsigned i = 0; i < 8; i++)
                        h[2 + i] = (uint8_t) (len >> (56 - 8 * i));
                n = 10;
        }
        memcpy(h + n, key, 4);
        return n + 4;
}

void ws_mask(uint8_t *dst, const uint8_t *src, size_t n, const uint8_t key[static 4]) {
        uint64_t k8;
        size_t i = 0;

        /* Eight key bytes in memory order, whatever the byte order: the key twice. */
        memcpy(&k8, key, 4);
        memcpy((uint8_t *) &k8 + 4, key, 4);
        for (; i + 8 <= n; i += 8) {
                uint64_t w;

                memcpy(&w, src + i, 8);
                w ^= k8;
                memcpy(dst + i, &w, 8);
        }
        /* i is a multiple of 8, so the key lines up again at key[0]. */
        for (; i < n; i++)
                dst[i] = src[i] ^ key[i & 3];
}

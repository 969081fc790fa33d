/* SPDX-License-Identifier: MIT */
#pragma once

/* Client-to-server WebSocket frames (RFC 6455 section 5): the header of a masked frame, the
 * mask itself (a word at a time), and the masking keys (getrandom() bytes from a pool, not a
 * syscall per frame). */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define WS_FRAME_HEADER_MAX 14u

enum {
        WS_OP_CONTINUATION = 0x0,
        WS_OP_TEXT = 0x1,
        WS_OP_BINARY = 0x2,
};

/* Masking keys "derived from a strong source of entropy" (RFC 6455 5.3): getrandom() bytes,
 * fetched 256 at a time so that a key costs a syscall only every 64 frames. */
typedef struct WsMaskKeys {
        uint8_t pool[256];
        size_t left;
} WsMaskKeys;

/* A fresh key in key[0..3]; a negative errno when getrandom() fails. */
int ws_mask_key(WsMaskKeys *k, uint8_t key[static 4]);

/* Size of the header of a masked frame with `len` payload bytes. */
static inline size_t ws_frame_header_size(uint64_t len) {
        return 2 + (len < 126 ? 0 : len < 65536 ? 2 : 8) + 4;
}

/* Write the header of a masked frame (opcode, FIN, length, key) to h; returns its size. */
size_t ws_frame_header(uint8_t h[static WS_FRAME_HEADER_MAX], unsigned opcode, bool fin, uint64_t len,
                       const uint8_t key[static 4]);

/* dst[i] = src[i] ^ key[i % 4] for i < n, a word at a time; dst may be src. */
void ws_mask(uint8_t *dst, const uint8_t *src, size_t n, const uint8_t key[static 4]);

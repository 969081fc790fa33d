/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <string.h>

#include "macro.h"
#include "ws-receive.h"

/* Above this a reassembly buffer is not kept across messages. */
#define WS_KEEP_BUFFER_MAX (4u * 1024u * 1024u)

void ws_receiver_init(WsReceiver *r, size_t max_message, size_t head_max, const WsReceiverHandlers *handlers,
                      void *userdata) {
        *r = (WsReceiver) {
                .handlers = handlers,
                .userdata = userdata,
                .max_message = max_message,
                .head_max = head_max,
        };
}

void ws_receiver_done(WsReceiver *r) {
        buffer_done(&r->message);
}

void ws_receiver_trim(WsReceiver *r) {
        if (!r->in_message && r->message.cap > WS_KEEP_BUFFER_MAX)
                buffer_done(&r->message);
}

/* The size of a header whose first two bytes are h[0..1]. */
static size_t header_size(const uint8_t h[static 2]) {
        unsigned len7 = h[1] & 0x7f;

        return 2 + (len7 == 126 ? 2 : len7 == 127 ? 8 : 0) + (h[1] & 0x80 ? 4 : 0);
}

static int start_frame(WsReceiver *r, const uint8_t *h) {
        unsigned opcode = h[0] & 0x0f, len7 = h[1] & 0x7f;
        uint64_t len = len7;

        if (h[0] & 0x70)
                return -EPROTO; /* RSV bits: no extension was negotiated */
        if (h[1] & 0x80)
                return -EPROTO; /* a server must not mask */
        if (len7 == 126)
                len = (uint64_t) h[2] << 8 | h[3];
        else if (len7 == 127) {
                len = 0;
                for (unsigned i = 0; i < 8; i++)
                        len = len << 8 | h[2 + i];
                if (len >> 63)
                        return -EPROTO;
        }

        r->fin = h[0] & 0x80;
        r->opcode = opcode;
        r->left = len;
        r->in_frame = true;

        if (opcode & 0x8) {
                if (opcode != WS_OP_CLOSE && opcode != WS_OP_PING && opcode != WS_OP_PONG)
                        return -EPROTO;
                if (!r->fin || len > WS_CONTROL_MAX)
                        return -EPROTO;
                r->control_len = 0;
                return 0;
        }

        if (opcode == 0x0) {
                if (!r->in_message)
                        return -EPROTO; /* a continuation of nothing */
        } else if (opcode == 0x1 || opcode == 0x2) {
                if (r->in_message)
                        return -EPROTO; /* a new message inside a fragmented one */
                r->in_message = true;
                r->binary = opcode == 0x2;
                r->oversized = false;
                r->total = 0;
                buffer_clear(&r->message);
        } else
                return -EPROTO;

        if (!r->oversized && (len > r->max_message || r->total + len > r->max_message)) {
                /* Keep only the head: enough for the layer above to name the call. */
                r->oversized = true;
                if (r->message.len > r->head_max)
                        r->message.len = r->head_max;
        }
        return 0;
}

static int end_message(WsReceiver *r, const uint8_t *data, size_t size) {
        int k;

        r->in_message = false;
        if (r->oversized)
                k = r->handlers->too_large(r->userdata, r->binary, data, MIN(size, r->head_max), r->total);
        else
                k = r->handlers->message(r->userdata, r->binary, data, size);
        buffer_clear(&r->message);
        return k;
}

static int end_frame(WsReceiver *r) {
        r->in_frame = false;
        r->header_len = 0;

        switch (r->opcode) {
        case WS_OP_PING:
                return r->handlers->ping(r->userdata, r->control, r->control_len);
        case WS_OP_PONG:
                return 0;
        case WS_OP_CLOSE:
                if (r->control_len == 1)
                        return -EPROTO;
                return r->handlers->close(r->userdata, r->control_len >= 2 ? (unsigned) r->control[0] << 8 | r->control[1] : 0,
                                          r->control + MIN(r->control_len, (size_t) 2),
                                          r->control_len - MIN(r->control_len, (size_t) 2));
        default:
                if (!r->fin)
                        return 0;
                return end_message(r, buffer_data(&r->message), r->message.len);
        }
}

/* Payload bytes of the current frame. */
static int take_payload(WsReceiver *r, const uint8_t *data, size_t n) {
        if (r->opcode & 0x8) {
                memcpy(r->control + r->control_len, data, n);
                r->control_len += n;
        } else {
                r->total += n;
                if (!r->oversized)
                        return buffer_append(&r->message, data, n);
                if (r->message.len < r->head_max)
                        return buffer_append(&r->message, data, MIN(n, r->head_max - r->message.len));
        }
        return 0;
}

int ws_receiver_feed(WsReceiver *r, const uint8_t *data, size_t n) {
        int k;

        while (n > 0) {
                if (!r->in_frame) {
                        const uint8_t *h;
                        size_t need;

                        if (r->header_len == 0 && n >= 2 && n >= header_size(data)) {
                                /* The whole header is here: parse it in place. */
                                h = data;
                                need = header_size(data);
                                data += need;
                                n -= need;
                        } else {
                                size_t take;

                                if (r->header_len < 2) {
                                        take = MIN(n, 2 - r->header_len);
                                        memcpy(r->header + r->header_len, data, take);
                                        r->header_len += take;
                                        data += take;
                                        n -= take;
                                        if (r->header_len < 2)
                                                return 0;
                                }
                                need = header_size(r->header);
                                take = MIN(n, need - r->header_len);
                                memcpy(r->header + r->header_len, data, take);
                                r->header_len += take;
                                data += take;
                                n -= take;
                                if (r->header_len < need)
                                        return 0;
                                h = r->header;
                        }
                        k = start_frame(r, h);
                        if (k >= 0 && r->left == 0)
                                k = end_frame(r);
                        if (k < 0)
                                return k;
                        continue;
                }

                /* A whole unfragmented message in what was read: no copy. */
                if (!(r->opcode & 0x8) && r->fin && r->total == 0 && !r->oversized && n >= r->left) {
                        size_t size = (size_t) r->left;

                        r->in_frame = false;
                        r->header_len = 0;
                        r->left = 0;
                        r->total = size;
                        k = end_message(r, data, size);
                        if (k < 0)
                                return k;
                        data += size;
                        n -= size;
                        continue;
                }

                size_t take = (size_t) MIN((uint64_t) n, r->left);
                k = take_payload(r, data, take);
                if (k < 0)
                        return k;
                data += take;
                n -= take;
                r->left -= take;
                if (r->left == 0) {
                        k = end_frame(r);
                        if (k < 0)
                                return k;
                }
        }
        return 0;
}

int ws_receiver_direct(WsReceiver *r, size_t min_size, uint8_t **ret_space, size_t *ret_size) {
        int k;

        if (!r->in_frame || (r->opcode & 0x8) || r->oversized || r->left < MAX(min_size, (size_t) 1))
                return 0;
        /* Not oversized: the frame fits in max_message, so left fits in a size_t. */
        k = buffer_reserve(&r->message, (size_t) r->left);
        if (k < 0)
                return k;
        *ret_space = buffer_data(&r->message) + r->message.len;
        *ret_size = (size_t) r->left;
        return 1;
}

int ws_receiver_direct_done(WsReceiver *r, size_t n) {
        if (!r->in_frame || n > r->left)
                return -EINVAL;
        r->message.len += n;
        r->total += n;
        r->left -= n;
        return r->left == 0 ? end_frame(r) : 0;
}

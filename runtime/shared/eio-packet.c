/* SPDX-License-Identifier: MIT */
#include <limits.h>

#include <libwebsockets.h>

#include "eio-packet.h"

/* Base64 is done by libwebsockets. Its decoder is lenient (it skips newlines, takes the URL
 * alphabet, tolerates missing padding) and logs through lwsl_err() on bad input, which a peer
 * could use to flood the log. So the input is checked here first, and only the canonical form
 * an encoder produces is accepted: that keeps decoding strict and makes decode → encode
 * reproduce the payload byte for byte. */

static bool b64_char_is_valid(uint8_t c) {
        return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '+' || c == '/';
}

static size_t b64_encoded_size(size_t n) {
        return (n + 2) / 3 * 4;
}

/* Append the base64 of data[0..n) to `out`. */
static int b64_append(Buffer *out, const uint8_t *data, size_t n) {
        size_t enc;
        int k, r;

        if (n == 0)
                return 0;
        if (n > (size_t) INT_MAX / 4 * 3 - 3)
                return -EMSGSIZE;
        enc = b64_encoded_size(n);

        /* lws wants room for the NUL and one spare byte beyond the last quad. */
        r = buffer_reserve(out, enc + 2);
        if (r < 0)
                return r;
        k = lws_b64_encode_string((const char *) data, (int) n, (char *) buffer_data(out) + out->len, (int) enc + 2);
        if (k < 0 || (size_t) k != enc)
                return -EIO;
        out->len += enc;
        return 0;
}

/* Decode canonical base64 text[0..n) into `scratch` (cleared first). */
static int b64_decode(const uint8_t *text, size_t n, Buffer *scratch) {
        size_t pad = 0, decoded, cap;
        Buffer check = BUFFER_NULL;
        int k, r;

        buffer_clear(scratch);
        if (n == 0)
                return 0;
        if (n % 4 != 0 || n > (size_t) INT_MAX / 2)
                return -EBADMSG;

        if (text[n - 1] == '=')
                pad = text[n - 2] == '=' ? 2 : 1;
        for (size_t i = 0; i < n - pad; i++)
                if (!b64_char_is_valid(text[i]))
                        return -EBADMSG;
        decoded = n / 4 * 3 - pad;

        /* lws stops once fewer than 3 bytes of room remain and NUL-terminates: leave slack. */
        cap = n / 4 * 3 + 4;
        r = buffer_reserve(scratch, cap);
        if (r < 0)
                return r;
        k = lws_b64_decode_string_len((const char *) text, (int) n, (char *) buffer_data(scratch), (int) cap);
        if (k < 0 || (size_t) k != decoded)
                return -EBADMSG;
        scratch->len = decoded;

        /* Groups of 4 characters decode independently, so re-encoding the last group is
         * enough to reject non-zero padding bits ("QR==" for "QQ=="). */
        size_t tail = decoded % 3 ?: 3;
        r = b64_append(&check, buffer_data(scratch) + decoded - tail, tail);
        if (r >= 0 && (check.len != 4 || memcmp(buffer_data(&check), text + n - 4, 4) != 0))
                r = -EBADMSG;
        buffer_done(&check);
        return r;
}

static bool type_digit(uint8_t c, EioType *ret) {
        if (c < '0' || c >= '0' + _EIO_TYPE_MAX)
                return false;
        *ret = (EioType) (c - '0');
        return true;
}

int eio_ws_decode(const uint8_t *frame, size_t n, bool binary_frame, EioPacket *ret) {
        EioType type;

        if (binary_frame) {
                *ret = (EioPacket) {
                        .type = EIO_MESSAGE,
                        .binary = true,
                        .data = frame,
                        .size = n,
                };
                return 0;
        }

        if (n == 0 || !type_digit(frame[0], &type))
                return -EBADMSG;
        *ret = (EioPacket) {
                .type = type,
                .data = frame + 1,
                .size = n - 1,
        };
        return 0;
}

/* One packet of a polling payload: "<digit><data>" or "b<base64>". */
static int decode_one(const uint8_t *p, size_t n, Buffer *scratch, EioPacket *ret) {
        EioType type;
        int r;

        if (n == 0)
                return -EBADMSG;

        if (p[0] == 'b') {
                r = b64_decode(p + 1, n - 1, scratch);
                if (r < 0)
                        return r;
                *ret = (EioPacket) {
                        .type = EIO_MESSAGE,
                        .binary = true,
                        .data = buffer_data(scratch),
                        .size = scratch->len,
                };
                return 0;
        }

        if (!type_digit(p[0], &type))
                return -EBADMSG;
        *ret = (EioPacket) {
                .type = type,
                .data = p + 1,
                .size = n - 1,
        };
        return 0;
}

int eio_payload_decode(const uint8_t *body, size_t n, eio_packet_cb cb, void *userdata) {
        _cleanup_buffer_ Buffer scratch = BUFFER_NULL;
        const uint8_t *p = body, *end = body + n;

        if (!body || n == 0)
                return -EBADMSG;

        for (;;) {
                const uint8_t *sep = memchr(p, EIO_RECORD_SEPARATOR, (size_t) (end - p));
                const uint8_t *stop = sep ?: end;
                EioPacket packet;
                int r;

                r = decode_one(p, (size_t) (stop - p), &scratch, &packet);
                if (r < 0)
                        return r;
                r = cb(&packet, userdata);
                if (r < 0)
                        return r;

                if (!sep)
                        return 0;
                p = sep + 1; /* a trailing separator leaves an empty packet: rejected above */
        }
}

int eio_payload_append(Buffer *out, EioType type, bool binary, const void *data, size_t n) {
        size_t saved = out->len;
        int r;

        if ((unsigned) type >= _EIO_TYPE_MAX || (binary && type != EIO_MESSAGE) || (n > 0 && !data))
                return -EINVAL;
        /* A text packet holding the separator could not be split apart again. */
        if (!binary && n > 0 && memchr(data, EIO_RECORD_SEPARATOR, n))
                return -EINVAL;

        if (out->len > 0) {
                r = buffer_append_byte(out, EIO_RECORD_SEPARATOR);
                if (r < 0)
                        goto fail;
        }
        r = buffer_append_byte(out, binary ? 'b' : '0' + type);
        if (r < 0)
                goto fail;
        r = binary ? b64_append(out, data, n) : buffer_append(out, data, n);
        if (r < 0)
                goto fail;
        return 0;

fail:
        out->len = saved;
        return r;
}

int eio_text_encode(Buffer *out, EioType type, const void *data, size_t n) {
        int r;

        if ((unsigned) type >= _EIO_TYPE_MAX || (n > 0 && !data))
                return -EINVAL;
        r = buffer_reserve(out, n + 1);
        if (r < 0)
                return r;
        (void) buffer_append_byte(out, '0' + type);
        (void) buffer_append(out, data, n);
        return 0;
}

/* The sid goes into JSON unescaped: allow only characters that need no escaping. */
static bool sid_is_valid(const char *sid) {
        if (strempty(sid))
                return false;
        for (const char *c = sid; *c; c++)
                if (*c < 0x20 || *c > 0x7e || *c == '"' || *c == '\\')
                        return false;
        return true;
}

int eio_open_json(Buffer *out, const char *sid, bool can_upgrade, unsigned ping_interval_ms,
                  unsigned ping_timeout_ms, size_t max_payload) {
        if (!sid_is_valid(sid))
                return -EINVAL;

        return buffer_printf(out,
                             "{\"sid\":\"%s\",\"upgrades\":[%s],\"pingInterval\":%u,\"pingTimeout\":%u,\"maxPayload\":%zu}",
                             sid, can_upgrade ? "\"websocket\"" : "", ping_interval_ms, ping_timeout_ms, max_payload);
}

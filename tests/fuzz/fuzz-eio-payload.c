/* SPDX-License-Identifier: MIT */
/* eio_payload_decode() on a polling POST body. Each delivered packet is appended again with
 * eio_payload_append(): since only canonical input is accepted (strict base64 included), the
 * re-encoding must reproduce the input byte for byte, up to where decoding stopped. */
#include "eio-packet.h"
#include "fuzz-util.h"

typedef struct State {
        Buffer out;
        size_t packets;
} State;

static int on_packet(const EioPacket *p, void *userdata) {
        State *s = userdata;

        CHECK((unsigned) p->type < _EIO_TYPE_MAX);
        CHECK(!p->binary || p->type == EIO_MESSAGE);
        CHECK(p->size == 0 || p->data);
        CHECK(eio_payload_append(&s->out, p->type, p->binary, p->data, p->size) == 0);
        s->packets++;
        return 0;
}

static int count_packet(const EioPacket *p, void *userdata) {
        (*(size_t *) userdata)++;
        return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        State s = {};
        size_t n = 0;
        int r;

        r = eio_payload_decode(data, size, on_packet, &s);
        CHECK(r == 0 || r == -EBADMSG);

        /* Everything delivered before an error was valid: it re-encodes to the input's prefix. */
        CHECK(s.out.len <= size);
        CHECK(s.out.len == 0 || memcmp(buffer_data(&s.out), data, s.out.len) == 0);

        if (r == 0) {
                CHECK(s.packets > 0);
                CHECK(s.out.len == size);
                CHECK(eio_payload_decode(buffer_data(&s.out), s.out.len, count_packet, &n) == 0);
                CHECK(n == s.packets);
        }

        buffer_done(&s.out);
        return 0;
}

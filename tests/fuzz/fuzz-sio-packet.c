/* SPDX-License-Identifier: MIT */
/* sio_packet_decode() on a Socket.IO text packet. What decodes must encode, decode again to
 * the same packet and encode to the same text (the encoder's output is a fixed point). */
#include "eio-packet.h"
#include "fuzz-util.h"
#include "sio-packet.h"

static void check_same(const SioPacket *a, const SioPacket *b) {
        CHECK(a->type == b->type);
        CHECK(strcmp(a->nsp, b->nsp) == 0);
        CHECK(a->ack_id == b->ack_id);
        CHECK(a->attachments == b->attachments);
        CHECK((!a->data && !b->data) || (a->data && b->data && json_equal(a->data, b->data)));
}

/* When the packet is what the RPC fast path makes, both encoders must agree. */
static void check_fast_path(const SioPacket *p, const Buffer *text) {
        _cleanup_buffer_ Buffer fast = BUFFER_NULL;
        const char *event;
        char *ph;
        bool same;

        if (p->type != SIO_BINARY_EVENT || p->attachments != 1 || p->ack_id >= 0 ||
            json_array_size(p->data) != 2)
                return;
        event = json_string_value(json_array_get(p->data, 0));
        ph = json_dumps(json_array_get(p->data, 1), JSON_COMPACT | JSON_PRESERVE_ORDER);
        CHECK(ph);
        same = strcmp(ph, "{\"_placeholder\":true,\"num\":0}") == 0;
        free(ph);
        if (!same || strlen(event) != json_string_length(json_array_get(p->data, 0)))
                return;

        if (sio_encode_binary_event1(&fast, p->nsp, event) < 0)
                return; /* needs escaping: not for the fast path */
        CHECK(fast.len == text->len + 1);
        CHECK(buffer_data(&fast)[0] == '0' + EIO_MESSAGE);
        CHECK(memcmp(buffer_data(&fast) + 1, buffer_data(text), text->len) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        _cleanup_buffer_ Buffer text = BUFFER_NULL, text2 = BUFFER_NULL;
        SioPacket p = SIO_PACKET_NULL, q = SIO_PACKET_NULL;
        int r;

        r = sio_packet_decode((const char *) data, size, &p);
        if (r < 0) {
                CHECK(r == -EBADMSG);
                CHECK(!p.nsp && !p.data && p.ack_id == -1);
                return 0;
        }

        CHECK((unsigned) p.type < _SIO_TYPE_MAX);
        CHECK(p.nsp && p.nsp[0] == '/' && strlen(p.nsp) <= SIO_NSP_MAX);
        CHECK(p.ack_id >= -1);
        CHECK(p.attachments <= SIO_ATTACHMENTS_MAX);
        CHECK((p.attachments > 0) == (p.type == SIO_BINARY_EVENT || p.type == SIO_BINARY_ACK));

        CHECK(sio_packet_encode(&p, &text) == 0);
        r = sio_packet_decode((const char *) buffer_data(&text), text.len, &q);
        if (r < 0) {
                fprintf(stderr, "re-encoded packet does not decode: %.*s\n", (int) text.len, buffer_data(&text));
                abort();
        }
        check_same(&p, &q);

        CHECK(sio_packet_encode(&q, &text2) == 0);
        CHECK(text.len == text2.len && memcmp(buffer_data(&text), buffer_data(&text2), text.len) == 0);

        check_fast_path(&p, &text);

        sio_packet_done(&p);
        sio_packet_done(&q);
        return 0;
}

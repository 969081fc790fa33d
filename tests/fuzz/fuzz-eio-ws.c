/* SPDX-License-Identifier: MIT */
/* eio_ws_decode() on one WebSocket frame. The first input byte picks text or binary. */
#include "eio-packet.h"
#include "fuzz-util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        _cleanup_buffer_ Buffer again = BUFFER_NULL;
        EioPacket p = {};
        bool binary;
        int r;

        if (size == 0)
                return 0;
        binary = data[0] & 1;
        data++;
        size--;

        r = eio_ws_decode(data, size, binary, &p);
        if (r < 0) {
                CHECK(r == -EBADMSG);
                CHECK(!binary);
                CHECK(size == 0 || data[0] < '0' || data[0] > '6');
                return 0;
        }

        if (binary) {
                CHECK(p.binary && p.type == EIO_MESSAGE);
                CHECK(p.data == data && p.size == size);
                return 0;
        }

        CHECK(!p.binary);
        CHECK((unsigned) p.type < _EIO_TYPE_MAX);
        CHECK(p.data == data + 1 && p.size == size - 1);

        /* Text packets re-encode to the very same frame. */
        CHECK(eio_text_encode(&again, p.type, p.data, p.size) == 0);
        CHECK(again.len == size && memcmp(buffer_data(&again), data, size) == 0);
        return 0;
}

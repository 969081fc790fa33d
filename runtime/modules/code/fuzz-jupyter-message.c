/* SPDX-License-Identifier: MIT */
/* libFuzzer target for what a kernel sends: the input is split into frames at each 0xff byte
 * and parsed under an empty key (so that signatures do not stop the fuzzer at the door) and
 * under a real one. Invariants: parsing never crashes; a parse that succeeds yields four JSON
 * objects and a msg_type. */
#include <errno.h>
#include <string.h>

#include "fuzz-util.h"
#include "jupyter-message.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        struct iovec frames[16];
        size_t n = 0, start = 0;
        JupyterSession unsigned_session = {}, keyed = {};

        strcpy(keyed.key, "fuzz-key");
        for (size_t i = 0; i <= size && n < 16; i++)
                if (i == size || data[i] == 0xff) {
                        frames[n++] = (struct iovec) { (void *) (data + start), i - start };
                        start = i + 1;
                }
        for (int pass = 0; pass < 2; pass++) {
                JupyterMessage m;
                int r = jupyter_message_parse(pass ? &keyed : &unsigned_session, frames, n, &m);

                CHECK(r == 0 || r == -EBADMSG || r == -EINVAL || r == -ENOMEM);
                if (r == 0) {
                        CHECK(json_is_object(m.header) && json_is_object(m.parent_header));
                        CHECK(json_is_object(m.metadata) && json_is_object(m.content));
                        CHECK(m.msg_type != NULL);
                        jupyter_message_done(&m);
                }
        }
        return 0;
}

/* SPDX-License-Identifier: MIT */
/* libFuzzer target for what a kernel sends: the input is split into frames at each 0xff byte
 * and parsed under an empty key (so that signatures do not stop the fuzzer at the door) and
 * under a real one; a message that parses is made into a code::run item (code-output.h) under
 * a cap taken from the first byte. Invariants: parsing never crashes; a parse that succeeds
 * yields four JSON objects and a msg_type; an item is one well-formed msgpack object; text
 * and results stay within the cap; an error item stays within its fields' bounds. */
#include <errno.h>
#include <string.h>

#include "code-output.h"
#include "fuzz-util.h"
#include "jupyter-message.h"
#include "macro.h"
#include "mp-check.h"

static void pack_item(const JupyterMessage *m, size_t max_output) {
        CodeOutput o = { .max_output = max_output };
        msgpack_sbuffer sb;
        msgpack_packer pk;
        int r;

        msgpack_sbuffer_init(&sb);
        msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
        r = code_output_pack(&o, m, &pk);
        CHECK(r == 0 || r == 1 || r == -ENOMEM);
        if (r == 1) {
                CHECK(mp_check((const uint8_t *) sb.data, sb.size) == 0);
                if (streq(m->msg_type, "error"))
                        CHECK(sb.size <= CODE_ERROR_NAME_MAX + CODE_ERROR_VALUE_MAX + CODE_TRACEBACK_MAX + 128);
                else if (!streq(m->msg_type, "execute_input"))
                        CHECK(o.used <= o.max_output);
        }
        if (r == 0)
                CHECK(sb.size == 0);
        msgpack_sbuffer_destroy(&sb);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        struct iovec frames[16];
        size_t n = 0, start = 0, max_output = size > 0 ? (size_t) data[0] * 16 : 0;
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
                        pack_item(&m, max_output);
                        jupyter_message_done(&m);
                }
        }
        return 0;
}

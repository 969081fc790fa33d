/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "jupyter-message.h"
#include "macro.h"

static JupyterSession session_with_key(const char *key) {
        JupyterSession s;

        assert_int_equal(jupyter_session_init(&s), 0);
        snprintf(s.key, sizeof(s.key), "%s", key);
        return s;
}

static void test_build_then_parse(void **state) {
        JupyterSession s = session_with_key("secret");
        JupyterOutgoing out;
        JupyterMessage m;
        json_t *content = json_pack("{s:s}", "code", "1+1");
        struct iovec frames[7];

        assert_int_equal(jupyter_message_build(&s, "execute_request", content, &out), 0);
        json_decref(content);
        assert_string_equal(out.frames[0].iov_base, JUPYTER_DELIMITER);
        assert_int_equal(out.frames[1].iov_len, 64); /* hex HMAC-SHA256 */
        /* A routing frame or topic before the delimiter is skipped. */
        frames[0] = (struct iovec) { (void *) "kernel.x.status", 15 };
        memcpy(&frames[1], out.frames, sizeof(out.frames));
        assert_int_equal(jupyter_message_parse(&s, frames, 7, &m), 0);
        assert_string_equal(m.msg_type, "execute_request");
        assert_null(m.parent_msg_id);
        assert_string_equal(json_string_value(json_object_get(m.content, "code")), "1+1");
        assert_string_equal(json_string_value(json_object_get(m.header, "msg_id")), out.msg_id);
        jupyter_message_done(&m);

        /* Two messages get two ids. */
        char first[sizeof(out.msg_id)];
        strcpy(first, out.msg_id);
        jupyter_outgoing_done(&out);
        assert_int_equal(jupyter_message_build(&s, "kernel_info_request", NULL, &out), 0);
        assert_string_not_equal(first, out.msg_id);
        assert_string_equal(out.frames[5].iov_base, "{}");
        jupyter_outgoing_done(&out);
}

static void test_bad_signature_refused(void **state) {
        JupyterSession s = session_with_key("secret"), other = session_with_key("other");
        JupyterOutgoing out;
        JupyterMessage m;
        char tampered[] = "{\"code\":\"2+2\"}";

        assert_int_equal(jupyter_message_build(&s, "execute_request", NULL, &out), 0);
        /* Another key. */
        assert_int_equal(jupyter_message_parse(&other, out.frames, 6, &m), -EBADMSG);
        /* Content changed after signing. */
        out.frames[5] = (struct iovec) { tampered, strlen(tampered) };
        assert_int_equal(jupyter_message_parse(&s, out.frames, 6, &m), -EBADMSG);
        /* Too few frames, no delimiter. */
        assert_int_equal(jupyter_message_parse(&s, out.frames, 5, &m), -EBADMSG);
        assert_int_equal(jupyter_message_parse(&s, &out.frames[1], 5, &m), -EBADMSG);
        jupyter_outgoing_done(&out);
}

static void test_unsigned_session(void **state) {
        JupyterSession s = session_with_key("");
        JupyterOutgoing out;
        JupyterMessage m;

        assert_int_equal(jupyter_message_build(&s, "status", NULL, &out), 0);
        assert_int_equal(out.frames[1].iov_len, 0);
        assert_int_equal(jupyter_message_parse(&s, out.frames, 6, &m), 0);
        jupyter_message_done(&m);
        jupyter_outgoing_done(&out);
}

static void test_not_objects_refused(void **state) {
        JupyterSession s = session_with_key("");
        struct iovec frames[6] = {
                { (void *) JUPYTER_DELIMITER, strlen(JUPYTER_DELIMITER) },
                { (void *) "", 0 },
                { (void *) "{\"msg_type\":\"stream\"}", 21 },
                { (void *) "{}", 2 },
                { (void *) "{}", 2 },
                { (void *) "[1]", 3 },
        };
        JupyterMessage m;

        assert_int_equal(jupyter_message_parse(&s, frames, 6, &m), -EINVAL);
        frames[5] = (struct iovec) { (void *) "{}", 2 };
        frames[2] = (struct iovec) { (void *) "{}", 2 }; /* no msg_type */
        assert_int_equal(jupyter_message_parse(&s, frames, 6, &m), -EINVAL);
        frames[2] = (struct iovec) { (void *) "{\"msg_type\":\"stream\"}", 21 };
        frames[3] = (struct iovec) { (void *) "{\"msg_id\":\"abc\"}", 16 };
        assert_int_equal(jupyter_message_parse(&s, frames, 6, &m), 0);
        assert_string_equal(m.parent_msg_id, "abc");
        jupyter_message_done(&m);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_build_then_parse),
                cmocka_unit_test(test_bad_signature_refused),
                cmocka_unit_test(test_unsigned_session),
                cmocka_unit_test(test_not_objects_refused),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}

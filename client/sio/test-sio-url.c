/* SPDX-License-Identifier: MIT */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "eio-transport.h"
#include "macro.h"
#include "sio-url.h"

static void check(const char *url, const char *host, unsigned port, const char *host_header, const char *path,
                  const char *polling_url) {
        SioUrl u;
        char ws_path[256];

        assert_int_equal(sio_url_parse(url, &u), 0);
        assert_string_equal(u.host, host);
        assert_int_equal(u.port, port);
        assert_string_equal(u.host_header, host_header);
        assert_string_equal(u.path, path);
        snprintf(ws_path, sizeof(ws_path), "%s?EIO=4&transport=websocket", path);
        assert_string_equal(u.ws_path, ws_path);
        assert_string_equal(u.polling_url, polling_url);
        sio_url_done(&u);
}

static void test_urls(void **state) {
        check("http://127.0.0.1:8000", "127.0.0.1", 8000, "127.0.0.1:8000", "/socket.io/",
              "http://127.0.0.1:8000/socket.io/");
        check("ws://127.0.0.1:8000/", "127.0.0.1", 8000, "127.0.0.1:8000", "/socket.io/",
              "http://127.0.0.1:8000/socket.io/");
        check("WS://localhost", "localhost", 80, "localhost:80", "/socket.io/", "http://localhost:80/socket.io/");
        check("http://[::1]:3000/engine", "::1", 3000, "[::1]:3000", "/engine/", "http://[::1]:3000/engine/");
        check("http://sandbox.example:1/a/b/", "sandbox.example", 1, "sandbox.example:1", "/a/b/",
              "http://sandbox.example:1/a/b/");
}

static void test_bad_urls(void **state) {
        SioUrl u;

        assert_int_equal(sio_url_parse(NULL, &u), -EINVAL);
        assert_int_equal(sio_url_parse("", &u), -EINVAL);
        assert_int_equal(sio_url_parse("127.0.0.1:8000", &u), -EINVAL);  /* no scheme */
        assert_int_equal(sio_url_parse("ftp://host/", &u), -EINVAL);
        assert_int_equal(sio_url_parse("http://host:0/", &u), -EINVAL);
        assert_int_equal(sio_url_parse("http://host:65536/", &u), -EINVAL);
        assert_int_equal(sio_url_parse("http://:80/", &u), -EINVAL);
}

static void test_tls_urls(void **state) {
        SioUrl u;

        assert_int_equal(sio_url_parse("https://10.0.0.5:8000", &u), 0);
        assert_true(u.tls);
        assert_int_equal(u.port, 8000);
        assert_string_equal(u.polling_url, "https://10.0.0.5:8000/socket.io/");
        sio_url_done(&u);
        assert_int_equal(sio_url_parse("wss://host/", &u), 0);
        assert_true(u.tls);
        assert_int_equal(u.port, 443);
        assert_string_equal(u.polling_url, "https://host:443/socket.io/");
        sio_url_done(&u);
        assert_int_equal(sio_url_parse("http://host/", &u), 0);
        assert_false(u.tls);
        sio_url_done(&u);
}

static void push_text(OutQueue *q, const char *s) {
        Buffer b = BUFFER_NULL;

        assert_int_equal(buffer_append(&b, s, strlen(s)), 0);
        assert_int_equal(out_queue_push(q, false, &b), 0);
        assert_null(b.mem); /* taken over */
}

static void test_out_queue(void **state) {
        OutQueue q = {};
        OutMessage *m;

        assert_true(out_queue_is_empty(&q));
        push_text(&q, "40");
        push_text(&q, "451-/rpc,[\"call\"]");
        push_text(&q, "3");
        assert_int_equal(q.bytes, 2 + 17 + 1);

        m = out_queue_pop(&q);
        assert_memory_equal(buffer_data(&m->data), "40", 2);
        out_message_free(m);
        assert_int_equal(q.bytes, 18);
        m = out_queue_pop(&q);
        assert_int_equal(m->data.len, 17);
        out_message_free(m);
        q.inflight = 5;
        out_queue_clear(&q);
        assert_true(out_queue_is_empty(&q));
        assert_null(q.tail);
        assert_int_equal(q.bytes, 0);
        assert_int_equal(q.inflight, 0);
        assert_null(out_queue_pop(&q));
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_urls),
                cmocka_unit_test(test_bad_urls),
                cmocka_unit_test(test_tls_urls),
                cmocka_unit_test(test_out_queue),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}

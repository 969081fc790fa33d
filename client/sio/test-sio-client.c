/* SPDX-License-Identifier: MIT */
/* SioClient against a real agentix-server (started from the test), over WebSocket and over
 * long-polling: auth, /rpc calls with msgpack attachments, many calls in flight, a 20 MiB
 * round trip, heartbeats, drops and reconnects, giving up, AUTO's choice and its fallback when
 * a proxy refuses the upgrade, and the message size bounds. */
#include <fcntl.h>
#include <inttypes.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <sys/wait.h>

#include <cmocka.h>
#include <curl/curl.h>
#include <msgpack.h>

#include "buffer.h"
#include "envelope.h"
#include "log.h"
#include "macro.h"
#include "sio-client.h"
#include "test-server.h"

#define MAX_CALLS 4096

typedef struct Harness {
        sd_event *event;
        SioClient *client;
        SioClientTransport transport;

        unsigned n_connected, n_reconnected, n_lost;
        int lost_error;
        bool final;
        int final_error;
        char final_message[256];
        bool free_on_final;

        /* results by call number ("c<N>") */
        uint8_t got[MAX_CALLS];
        unsigned n_results, n_errors, n_other, n_stray;
        Buffer expect;      /* what every echo must return (str or bin bytes) */
        bool expect_bin;
        bool value_ok;      /* every value so far matched */

        unsigned n_too_large;
        size_t too_large_size;
        char too_large_call_id[64];
        char too_large_event[64];
} Harness;

/* ---- callbacks ------------------------------------------------------------------------------- */

static void on_connected(SioClient *c, bool reconnected, void *userdata) {
        Harness *h = userdata;

        assert_true(sio_client_is_connected(c));
        h->n_connected++;
        if (reconnected)
                h->n_reconnected++;
}

static void on_disconnected(SioClient *c, bool final, int error, const char *message, void *userdata) {
        Harness *h = userdata;

        assert_non_null(message);
        if (!final) {
                h->n_lost++;
                h->lost_error = error;
                return;
        }
        assert_false(h->final); /* once */
        h->final = true;
        h->final_error = error;
        snprintf(h->final_message, sizeof(h->final_message), "%s", message);
        if (h->free_on_final)
                h->client = sio_client_free(c); /* allowed from a callback */
}

static int call_number(const msgpack_object *map) {
        char id[32];
        unsigned long n;
        char *end;

        if (mp_map_copy_str(map, "call_id", id, sizeof(id)) < 0 || id[0] != 'c')
                return -1;
        n = strtoul(id + 1, &end, 10);
        return *end || n >= MAX_CALLS ? -1 : (int) n;
}

static void on_event(SioClient *c, const char *event, const uint8_t *data, size_t size, void *userdata) {
        Harness *h = userdata;
        msgpack_unpacked u;
        const msgpack_object *v;
        int n;

        msgpack_unpacked_init(&u);
        assert_int_equal(msgpack_unpack_next(&u, (const char *) data, size, NULL), MSGPACK_UNPACK_SUCCESS);
        n = call_number(&u.data);
        if (n < 0) {
                /* Not one of our calls (the answer to an event the server does not know). */
                h->n_stray++;
                msgpack_unpacked_destroy(&u);
                return;
        }

        if (streq(event, "call:result")) {
                assert_int_equal(h->got[n], 0); /* exactly one terminal event per call */
                h->got[n] = 1;
                h->n_results++;
                v = mp_map_get(&u.data, "value");
                if (h->expect_bin) {
                        if (!v || v->type != MSGPACK_OBJECT_BIN || v->via.bin.size != h->expect.len ||
                            memcmp(v->via.bin.ptr, buffer_data(&h->expect), h->expect.len) != 0)
                                h->value_ok = false;
                } else if (!v || !(v->type == MSGPACK_OBJECT_STR || v->type == MSGPACK_OBJECT_MAP))
                        h->value_ok = false;
                else if (v->type == MSGPACK_OBJECT_STR &&
                         (v->via.str.size != h->expect.len || memcmp(v->via.str.ptr, buffer_data(&h->expect), h->expect.len) != 0))
                        h->value_ok = false;
        } else if (streq(event, "call:error")) {
                const msgpack_object *e = mp_map_get(&u.data, "error");
                const msgpack_object *m = mp_map_get(e, "message");
                fprintf(stderr, "call:error: %.*s\n", m && m->type == MSGPACK_OBJECT_STR ? (int) m->via.str.size : 0,
                        m && m->type == MSGPACK_OBJECT_STR ? m->via.str.ptr : "");
                h->n_errors++;
        } else
                h->n_other++;
        msgpack_unpacked_destroy(&u);
}

static void on_too_large(SioClient *c, const char *event, const uint8_t *head, size_t head_size, size_t size,
                         void *userdata) {
        Harness *h = userdata;
        msgpack_unpacked u;

        h->n_too_large++;
        h->too_large_size = size;
        snprintf(h->too_large_event, sizeof(h->too_large_event), "%s", event);
        /* The head is a truncated map: its first key/value pair (call_id) is readable. */
        assert_true(head_size > 0 && head_size <= 4096);
        assert_true(head[0] == 0x82 || head[0] == 0x83 || head[0] == 0x84); /* fixmap */
        {
                size_t off = 1;
                msgpack_unpacked_init(&u);
                assert_int_equal(msgpack_unpack_next(&u, (const char *) head, head_size, &off), MSGPACK_UNPACK_SUCCESS);
                assert_int_equal(u.data.type, MSGPACK_OBJECT_STR);
                assert_true(mp_str_eq(&u.data, "call_id"));
                assert_int_equal(msgpack_unpack_next(&u, (const char *) head, head_size, &off), MSGPACK_UNPACK_SUCCESS);
                assert_int_equal(u.data.type, MSGPACK_OBJECT_STR);
                snprintf(h->too_large_call_id, sizeof(h->too_large_call_id), "%.*s", (int) u.data.via.str.size,
                         u.data.via.str.ptr);
                msgpack_unpacked_destroy(&u);
        }
}

static const SioClientCallbacks callbacks = {
        .connected = on_connected,
        .disconnected = on_disconnected,
        .event = on_event,
        .message_too_large = on_too_large,
};

/* ---- helpers --------------------------------------------------------------------------------- */

#define RUN_UNTIL(h, cond, timeout_ms)                                                          \
        ({                                                                                      \
                unsigned long long _deadline = now_usec() + (unsigned long long) (timeout_ms) * 1000ULL; \
                while (!(cond) && now_usec() < _deadline)                                       \
                        assert_true(sd_event_run((h)->event, 20 * 1000) >= 0);                  \
                (cond);                                                                         \
        })

static void harness_init(Harness *h, SioClientTransport transport) {
        *h = (Harness) { .transport = transport, .value_ok = true };
        assert_int_equal(sd_event_new(&h->event), 0);
}

static void harness_connect(Harness *h, const char *url, const char *token, const SioClientConfig *extra) {
        char auth[64];
        SioClientConfig config = extra ? *extra : (SioClientConfig) {};

        snprintf(auth, sizeof(auth), "{\"token\":\"%s\"}", token);
        config.url = url;
        config.nsp = config.nsp ?: "/rpc";
        config.auth_json = auth;
        config.transport = h->transport;
        if (!extra) {
                config.reconnect = true;
                config.connect_timeout_usec = 2 * 1000 * 1000;
        }
        assert_int_equal(sio_client_new(h->event, &config, &callbacks, h, &h->client), 0);
        assert_int_equal(sio_client_start(h->client), 0);
        assert_int_equal(sio_client_start(h->client), -EALREADY);
}

static void harness_done(Harness *h) {
        h->client = sio_client_free(h->client);
        buffer_done(&h->expect);
        /* Let nothing linger on the loop. */
        h->event = sd_event_unref(h->event);
}

static const char *transport_name(SioClientTransport t) {
        return t == SIO_CLIENT_TRANSPORT_POLLING ? "polling" : "websocket";
}

/* Pack {call_id, callable, shape: "unary", args: [value], kwargs: {}} with msgpack-c. */
static void pack_call(msgpack_sbuffer *sb, unsigned n, const char *callable, const void *value, size_t size, bool bin) {
        msgpack_packer pk;
        char id[32];

        snprintf(id, sizeof(id), "c%u", n);
        msgpack_sbuffer_init(sb);
        msgpack_packer_init(&pk, sb, msgpack_sbuffer_write);
        msgpack_pack_map(&pk, 5);
        msgpack_pack_str_with_body(&pk, "call_id", 7);
        msgpack_pack_str_with_body(&pk, id, strlen(id));
        msgpack_pack_str_with_body(&pk, "callable", 8);
        msgpack_pack_str_with_body(&pk, callable, strlen(callable));
        msgpack_pack_str_with_body(&pk, "shape", 5);
        msgpack_pack_str_with_body(&pk, "unary", 5);
        msgpack_pack_str_with_body(&pk, "args", 4);
        msgpack_pack_array(&pk, 1);
        if (bin)
                msgpack_pack_bin_with_body(&pk, value, size);
        else
                msgpack_pack_str_with_body(&pk, value, size);
        msgpack_pack_str_with_body(&pk, "kwargs", 6);
        msgpack_pack_map(&pk, 0);
}

static int emit_echo(Harness *h, unsigned n, const void *value, size_t size, bool bin) {
        msgpack_sbuffer sb;
        int r;

        pack_call(&sb, n, "sandbox::echo", value, size, bin);
        r = sio_client_emit_binary1(h->client, "call", sb.data, sb.size);
        msgpack_sbuffer_destroy(&sb);
        return r;
}

static void expect_str(Harness *h, const char *s) {
        buffer_clear(&h->expect);
        assert_int_equal(buffer_append(&h->expect, s, strlen(s)), 0);
        h->expect_bin = false;
}

/* One echo call, start to finish. */
static void echo_once(Harness *h, unsigned n) {
        unsigned before = h->n_results;

        expect_str(h, "hi");
        assert_int_equal(emit_echo(h, n, "hi", 2, false), 0);
        assert_true(RUN_UNTIL(h, h->n_results == before + 1, 10000));
        assert_int_equal(h->got[n], 1);
        assert_true(h->value_ok);
        assert_int_equal(h->n_errors, 0);
}

static void wait_connected(Harness *h, unsigned n) {
        if (!RUN_UNTIL(h, h->n_connected >= n || h->final, 10000) || h->final)
                fail_msg("not connected (final %d: %s)", h->final_error, h->final_message);
        assert_true(sio_client_is_connected(h->client));
        assert_string_equal(sio_client_transport_name(h->client),
                            h->transport == SIO_CLIENT_TRANSPORT_AUTO ? "websocket" : transport_name(h->transport));
}

static SioClientTransport param(void **state) {
        return (SioClientTransport) (intptr_t) *state;
}

/* ---- tests ----------------------------------------------------------------------------------- */

static void test_connect_and_close(void **state) {
        int fds[200];
        Harness h;
        TestServer s;

        /* A library lives in processes with many fds: its sockets get high numbers (lws must
         * not index a small table by fd). */
        for (size_t i = 0; i < ELEMENTSOF(fds); i++)
                assert_true((fds[i] = open("/dev/null", O_RDONLY | O_CLOEXEC)) >= 0);

        test_server_start(&s, 0, NULL);
        harness_init(&h, param(state));
        harness_connect(&h, s.url, "t", NULL);
        wait_connected(&h, 1);
        assert_int_equal(h.n_reconnected, 0);
        echo_once(&h, 1);

        sio_client_close(h.client);
        assert_false(sio_client_is_connected(h.client));
        assert_null(sio_client_transport_name(h.client));
        assert_int_equal(sio_client_emit_binary1(h.client, "call", "x", 1), -ENOTCONN);
        assert_true(RUN_UNTIL(&h, h.final, 2000));
        assert_int_equal(h.final_error, 0);
        assert_int_equal(h.n_lost, 0);
        /* Closing twice is harmless, and nothing else is reported. */
        sio_client_close(h.client);
        (void) RUN_UNTIL(&h, false, 200);
        harness_done(&h);
        test_server_stop(&s);
        for (size_t i = 0; i < ELEMENTSOF(fds); i++)
                safe_close(fds[i]);
}

static void test_hostname(void **state) {
        /* "localhost" is looked up without blocking (libuv's thread pool for WebSocket, curl's
         * resolver for polling); it may name ::1 first, where nobody listens: the next address
         * is tried. */
        char url[64];
        Harness h;
        TestServer s;

        test_server_start(&s, 0, NULL);
        snprintf(url, sizeof(url), "ws://localhost:%u/socket.io/", s.port);
        harness_init(&h, param(state));
        harness_connect(&h, url, "t", NULL);
        wait_connected(&h, 1);
        echo_once(&h, 1);
        harness_done(&h);
        test_server_stop(&s);

        /* A name that does not resolve fails the attempt, as a refused connection would. */
        SioClientConfig config = { .reconnect = false, .connect_timeout_usec = 5000000 };
        harness_init(&h, param(state));
        harness_connect(&h, "http://nonexistent.invalid:80", "t", &config);
        assert_true(RUN_UNTIL(&h, h.final, 10000));
        assert_int_equal(h.final_error, -EHOSTUNREACH);
        harness_done(&h);
}

static void test_wrong_token(void **state) {
        Harness h;
        TestServer s;

        test_server_start(&s, 0, NULL);
        harness_init(&h, param(state));
        harness_connect(&h, s.url, "wrong", NULL);
        assert_true(RUN_UNTIL(&h, h.final, 10000));
        assert_int_equal(h.final_error, -EACCES);
        assert_string_equal(h.final_message, "unauthorized");
        assert_int_equal(h.n_connected, 0);
        assert_false(sio_client_is_connected(h.client));
        harness_done(&h);
        test_server_stop(&s);
}

static void test_unknown_namespace(void **state) {
        SioClientConfig config = { .nsp = "/nope", .connect_timeout_usec = 2000000 };
        Harness h;
        TestServer s;

        test_server_start(&s, 0, NULL);
        harness_init(&h, param(state));
        harness_connect(&h, s.url, "t", &config);
        assert_true(RUN_UNTIL(&h, h.final, 10000));
        assert_int_equal(h.final_error, -EPROTO);
        assert_string_equal(h.final_message, "Invalid namespace");
        harness_done(&h);
        test_server_stop(&s);
}

static void test_many_in_flight(void **state) {
        const unsigned n = 1000;
        Harness h;
        TestServer s;

        test_server_start(&s, 0, NULL);
        harness_init(&h, param(state));
        harness_connect(&h, s.url, "t", NULL);
        wait_connected(&h, 1);

        expect_str(&h, "hi");
        for (unsigned i = 0; i < n; i++)
                assert_int_equal(emit_echo(&h, i, "hi", 2, false), 0);
        assert_true(RUN_UNTIL(&h, h.n_results == n || h.n_errors > 0, 60000));
        assert_int_equal(h.n_errors, 0);
        assert_int_equal(h.n_results, n);
        for (unsigned i = 0; i < n; i++)
                assert_int_equal(h.got[i], 1);
        assert_true(h.value_ok);
        assert_int_equal(h.n_lost, 0);
        harness_done(&h);
        test_server_stop(&s);
}

static void test_big_payload(void **state) {
        const size_t size = 20u * 1024u * 1024u;
        msgpack_sbuffer sb;
        Harness h;
        TestServer s;

        test_server_start(&s, 0, NULL);
        harness_init(&h, param(state));
        harness_connect(&h, s.url, "t", NULL);
        wait_connected(&h, 1);

        assert_int_equal(buffer_reserve(&h.expect, size), 0);
        for (size_t i = 0; i < size; i++)
                buffer_data(&h.expect)[i] = (uint8_t) (i * 7 + (i >> 13));
        h.expect.len = size;
        h.expect_bin = true;

        pack_call(&sb, 7, "sandbox::echo", buffer_data(&h.expect), size, true);
        assert_int_equal(sio_client_emit_binary1(h.client, "call", sb.data, sb.size), 0);
        msgpack_sbuffer_destroy(&sb);
        assert_true(RUN_UNTIL(&h, h.n_results == 1 || h.n_errors > 0, 60000));
        assert_int_equal(h.n_errors, 0);
        assert_int_equal(h.got[7], 1);
        assert_true(h.value_ok);
        assert_int_equal(h.n_lost, 0);
        harness_done(&h);
        test_server_stop(&s);
}

static void test_heartbeat(void **state) {
        static const char *const fast[] = { "--ping-interval=200", "--ping-timeout=300", NULL };
        Harness h;
        TestServer s;

        test_server_start(&s, 0, fast);
        harness_init(&h, param(state));
        harness_connect(&h, s.url, "t", NULL);
        wait_connected(&h, 1);

        /* 2 s idle = ten pings answered, no drop. */
        (void) RUN_UNTIL(&h, h.n_lost > 0 || h.final, 2000);
        assert_int_equal(h.n_lost, 0);
        assert_false(h.final);
        assert_int_equal(h.n_connected, 1);
        echo_once(&h, 1);

        /* A stopped server sends no pings: the client notices within pingInterval +
         * pingTimeout (500 ms), keeps trying while it is stopped, and is back once it runs. */
        assert_int_equal(kill(s.pid, SIGSTOP), 0);
        unsigned long long t0 = now_usec();
        assert_true(RUN_UNTIL(&h, h.n_lost == 1, 5000));
        assert_int_equal(h.lost_error, -ETIMEDOUT);
        /* The last ping came at most 200 ms before the stop: 300 to 500 ms later, with room
         * for a loaded machine. */
        assert_true(now_usec() - t0 >= 250 * 1000);
        assert_true(now_usec() - t0 < 3000 * 1000);
        (void) RUN_UNTIL(&h, false, 1000);
        assert_int_equal(h.n_connected, 1);
        assert_int_equal(kill(s.pid, SIGCONT), 0);
        wait_connected(&h, 2);
        assert_int_equal(h.n_reconnected, 1);
        echo_once(&h, 2);

        harness_done(&h);
        test_server_stop(&s);
}

static void test_drop(void **state) {
        Harness h;
        TestServer s;

        test_server_start(&s, 0, NULL);
        harness_init(&h, param(state));
        harness_connect(&h, s.url, "t", NULL);
        wait_connected(&h, 1);
        echo_once(&h, 1);

        for (unsigned i = 0; i < 3; i++) {
                sio_client_drop(h.client);
                assert_false(sio_client_is_connected(h.client));
                assert_int_equal(emit_echo(&h, 100, "hi", 2, false), -ENOTCONN);
                wait_connected(&h, 2 + i);
                assert_int_equal(h.n_lost, 1 + i);
                assert_int_equal(h.lost_error, -ECONNRESET);
                assert_int_equal(h.n_reconnected, 1 + i);
                echo_once(&h, 2 + i);
        }
        assert_false(h.final);
        harness_done(&h);
        test_server_stop(&s);
}

static void test_server_restart(void **state) {
        Harness h;
        TestServer s;
        unsigned port;

        test_server_start(&s, 0, NULL);
        port = s.port;
        harness_init(&h, param(state));
        harness_connect(&h, s.url, "t", NULL);
        wait_connected(&h, 1);
        echo_once(&h, 1);

        test_server_stop(&s);
        assert_true(RUN_UNTIL(&h, h.n_lost == 1, 5000));
        (void) RUN_UNTIL(&h, false, 700); /* a few refused attempts */
        assert_false(h.final);
        test_server_start(&s, port, NULL);
        wait_connected(&h, 2);
        assert_int_equal(h.n_reconnected, 1);
        echo_once(&h, 2);
        harness_done(&h);
        test_server_stop(&s);
}

static void test_give_up(void **state) {
        SioClientConfig config = {
                .reconnect = true,
                .reconnect_timeout_usec = 1000 * 1000,
                .connect_timeout_usec = 500 * 1000,
        };
        unsigned long long t0;
        Harness h;
        TestServer s;

        test_server_start(&s, 0, NULL);
        harness_init(&h, param(state));
        h.free_on_final = true;
        harness_connect(&h, s.url, "t", &config);
        wait_connected(&h, 1);

        test_server_stop(&s);
        assert_true(RUN_UNTIL(&h, h.n_lost == 1, 5000));
        t0 = now_usec();
        assert_true(RUN_UNTIL(&h, h.final, 5000));
        assert_true(now_usec() - t0 < 4000 * 1000); /* 1 s, with room for a loaded machine */
        assert_int_equal(h.final_error, -ECONNREFUSED);
        assert_non_null(strstr(h.final_message, "giving up"));
        assert_null(h.client); /* freed from the callback */
        harness_done(&h);
}

static void test_no_reconnect(void **state) {
        SioClientConfig config = { .reconnect = false, .connect_timeout_usec = 2000000 };
        Harness h;
        TestServer s;

        test_server_start(&s, 0, NULL);
        harness_init(&h, param(state));
        harness_connect(&h, s.url, "t", &config);
        wait_connected(&h, 1);
        sio_client_drop(h.client);
        assert_true(RUN_UNTIL(&h, h.final, 2000));
        assert_int_equal(h.final_error, -ECONNRESET);
        assert_int_equal(h.n_lost, 0);
        harness_done(&h);
        test_server_stop(&s);

        /* Nobody listening: the first attempt is the last. */
        harness_init(&h, param(state));
        harness_connect(&h, "http://127.0.0.1:1", "t", &config);
        assert_true(RUN_UNTIL(&h, h.final, 5000));
        assert_int_equal(h.final_error, -ECONNREFUSED);
        harness_done(&h);
}

static void test_message_too_large(void **state) {
        SioClientConfig config = { .reconnect = true, .max_message = 1024 * 1024, .connect_timeout_usec = 2000000 };
        msgpack_sbuffer sb;
        msgpack_packer pk;
        static const char command[] = "head -c 3000000 /dev/zero | tr '\\0' a";
        Harness h;
        TestServer s;

        test_server_start(&s, 0, NULL);
        harness_init(&h, param(state));
        harness_connect(&h, s.url, "t", &config);
        wait_connected(&h, 1);

        /* Outgoing: bigger than max_message is refused at once. */
        _cleanup_free_ uint8_t *big = calloc(1, 1024 * 1024 + 1);
        assert_non_null(big);
        assert_int_equal(sio_client_emit_binary1(h.client, "call", big, 1024 * 1024 + 1), -EMSGSIZE);
        assert_int_equal(sio_client_emit_binary1(h.client, "bad\"name", "x", 1), -EINVAL);

        /* Incoming: a 3 MB exec result is skipped, its call named, the connection kept. */
        msgpack_sbuffer_init(&sb);
        msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
        msgpack_pack_map(&pk, 5);
        msgpack_pack_str_with_body(&pk, "call_id", 7);
        msgpack_pack_str_with_body(&pk, "c9", 2);
        msgpack_pack_str_with_body(&pk, "callable", 8);
        msgpack_pack_str_with_body(&pk, "sandbox::exec", 13);
        msgpack_pack_str_with_body(&pk, "shape", 5);
        msgpack_pack_str_with_body(&pk, "unary", 5);
        msgpack_pack_str_with_body(&pk, "args", 4);
        msgpack_pack_array(&pk, 1);
        msgpack_pack_str_with_body(&pk, command, strlen(command));
        msgpack_pack_str_with_body(&pk, "kwargs", 6);
        msgpack_pack_map(&pk, 0);
        assert_int_equal(sio_client_emit_binary1(h.client, "call", sb.data, sb.size), 0);
        msgpack_sbuffer_destroy(&sb);

        assert_true(RUN_UNTIL(&h, h.n_too_large == 1 || h.n_results > 0 || h.n_errors > 0, 20000));
        assert_int_equal(h.n_too_large, 1);
        assert_string_equal(h.too_large_event, "call:result");
        assert_string_equal(h.too_large_call_id, "c9");
        assert_true(h.too_large_size > 3000000);
        assert_int_equal(h.n_results, 0);
        assert_int_equal(h.n_lost, 0);
        echo_once(&h, 10);
        harness_done(&h);
        test_server_stop(&s);
}

static void test_queue_bound(void **state) {
        SioClientConfig config = { .reconnect = true, .max_message = 1024 * 1024, .connect_timeout_usec = 2000000 };
        _cleanup_free_ uint8_t *chunk = calloc(1, 700 * 1024);
        bool ws = param(state) == SIO_CLIENT_TRANSPORT_WEBSOCKET;
        Harness h;
        TestServer s;
        int r = 0;
        unsigned n = 0;

        assert_non_null(chunk);
        test_server_start(&s, 0, NULL);
        harness_init(&h, param(state));
        harness_connect(&h, s.url, "t", &config);
        wait_connected(&h, 1);

        /* Over polling nothing leaves without the loop running: the queue fills up to
         * 2 × max_message. Over WebSocket an emit is written at once, as far as the socket
         * takes it: with the server stopped the socket fills, then the queue. */
        if (ws)
                assert_int_equal(kill(s.pid, SIGSTOP), 0);
        while (n < 200 && (r = sio_client_emit_binary1(h.client, "ping", chunk, 700 * 1024)) == 0)
                n++;
        if (ws)
                assert_int_equal(kill(s.pid, SIGCONT), 0);
        assert_int_equal(r, -ENOBUFS);
        if (ws)
                assert_in_range(n, 2, 199);
        else
                assert_int_equal(n, 2);
        /* Once sent, there is room again. */
        echo_once(&h, 1);
        assert_int_equal(sio_client_emit_binary1(h.client, "ping", chunk, 700 * 1024), 0);
        assert_true(RUN_UNTIL(&h, h.n_stray == n + 1, 20000)); /* the server read them all */
        assert_int_equal(h.n_lost, 0);
        harness_done(&h);
        test_server_stop(&s);
}

static void test_auto_websocket(void **state) {
        Harness h;
        TestServer s;

        test_server_start(&s, 0, NULL);
        harness_init(&h, SIO_CLIENT_TRANSPORT_AUTO);
        harness_connect(&h, s.url, "t", NULL);
        wait_connected(&h, 1);
        assert_string_equal(sio_client_transport_name(h.client), "websocket");
        echo_once(&h, 1);
        harness_done(&h);
        test_server_stop(&s);
}

static void test_auto_fallback(void **state) {
        char url[64];
        TestRelay *relay;
        Harness h;
        TestServer s;

        test_server_start(&s, 0, NULL);
        harness_init(&h, SIO_CLIENT_TRANSPORT_AUTO);
        relay = test_relay_new(h.event, s.port);
        snprintf(url, sizeof(url), "ws://127.0.0.1:%u", test_relay_port(relay));
        harness_connect(&h, url, "t", NULL);
        if (!RUN_UNTIL(&h, h.n_connected == 1 || h.final, 10000) || h.final)
                fail_msg("not connected (final %d: %s)", h.final_error, h.final_message);
        assert_string_equal(sio_client_transport_name(h.client), "polling");
        assert_int_equal(test_relay_refused(relay), 1);
        echo_once(&h, 1);

        /* After a drop AUTO stays with what worked: no second refused upgrade. */
        sio_client_drop(h.client);
        assert_true(RUN_UNTIL(&h, h.n_connected == 2 || h.final, 10000));
        assert_string_equal(sio_client_transport_name(h.client), "polling");
        assert_int_equal(test_relay_refused(relay), 1);
        echo_once(&h, 2);

        /* Forcing WebSocket through the relay fails for good reasons, and is retried. */
        harness_done(&h);
        test_relay_free(relay);
        test_server_stop(&s);
}

/* An emit made outside the loop's callbacks (as the blocking API does) leaves at once over
 * WebSocket: the server runs the call while this process does not run the loop at all. */
static void test_emit_outside_loop(void **state) {
        char dir[] = "/tmp/test-sio-emit-XXXXXX", path[64], cmd[128];
        msgpack_sbuffer sb;
        Harness h;
        TestServer s;
        bool seen = false;

        assert_non_null(mkdtemp(dir));
        snprintf(path, sizeof(path), "%s/ran", dir);
        snprintf(cmd, sizeof(cmd), "touch %s", path);

        test_server_start(&s, 0, NULL);
        harness_init(&h, param(state));
        harness_connect(&h, s.url, "t", NULL);
        wait_connected(&h, 1);

        pack_call(&sb, 1, "sandbox::exec", cmd, strlen(cmd), false);
        assert_int_equal(sio_client_emit_binary1(h.client, "call", sb.data, sb.size), 0);
        msgpack_sbuffer_destroy(&sb);
        for (unsigned i = 0; i < 500 && !seen; i++) {
                seen = access(path, F_OK) == 0;
                if (!seen)
                        usleep(10 * 1000);
        }
        assert_true(seen);
        assert_true(RUN_UNTIL(&h, h.n_results == 1, 10000));
        assert_int_equal(h.n_errors, 0);

        (void) unlink(path);
        (void) rmdir(dir);
        harness_done(&h);
        test_server_stop(&s);
}

static void test_conformance_root(void **state) {
        /* agentix-server --conformance: namespace "/" echoes "message" as "message-back" with
         * its attachments; its "auth" event (JSON, no attachment) is dropped by the client. */
        static const char *const conf[] = { "--conformance", NULL };
        SioClientConfig config = { .nsp = "/", .reconnect = true, .connect_timeout_usec = 2000000 };
        Harness h;
        TestServer s;

        test_server_start(&s, 0, conf);
        harness_init(&h, param(state));
        harness_connect(&h, s.url, "t", &config);
        wait_connected(&h, 1);
        expect_str(&h, "hello");

        msgpack_sbuffer sb;
        pack_call(&sb, 3, "x", "hello", 5, false);
        assert_int_equal(sio_client_emit_binary1(h.client, "message", sb.data, sb.size), 0);
        msgpack_sbuffer_destroy(&sb);
        assert_true(RUN_UNTIL(&h, h.n_other == 1, 5000));
        assert_int_equal(h.n_results, 0);
        harness_done(&h);
        test_server_stop(&s);
}

static unsigned long long sorted_at(unsigned long long *t, unsigned n, unsigned k) {
        for (unsigned i = 1; i < n; i++) /* insertion sort, small n */
                for (unsigned j = i; j > 0 && t[j - 1] > t[j]; j--) {
                        unsigned long long x = t[j];
                        t[j] = t[j - 1];
                        t[j - 1] = x;
                }
        return t[k];
}

/* Numbers, not checks: the round trip of a small echo one call at a time, and of a 20 MiB one. */
static void measure(void **state) {
        const unsigned n = 2000, n_big = 5;
        const size_t big = 20u * 1024u * 1024u;
        _cleanup_free_ unsigned long long *t = calloc(n, sizeof(*t));
        unsigned long long tb[5];
        Harness h;
        TestServer s;

        assert_non_null(t);
        test_server_start(&s, 0, NULL);
        harness_init(&h, param(state));
        harness_connect(&h, s.url, "t", NULL);
        wait_connected(&h, 1);
        expect_str(&h, "hi");
        for (unsigned i = 0; i < 100; i++) /* warm up */
                echo_once(&h, i);
        /* call_ids are never reused: the server answers a known one from its result cache. */
        for (unsigned i = 0; i < n; i++) {
                unsigned long long t0 = now_usec();
                unsigned before = h.n_results;
                assert_int_equal(emit_echo(&h, 100 + i, "hi", 2, false), 0);
                assert_true(RUN_UNTIL(&h, h.n_results == before + 1, 10000));
                t[i] = now_usec() - t0;
        }
        unsigned long long p50 = sorted_at(t, n, n / 2);
        printf("sandbox::echo(\"hi\") round trip over %s, %u calls one at a time: p50 %llu us, p90 %llu us, p99 %llu us\n",
               transport_name(h.transport), n, p50, t[n * 9 / 10], t[n * 99 / 100]);

        buffer_clear(&h.expect);
        assert_int_equal(buffer_reserve(&h.expect, big), 0);
        memset(buffer_data(&h.expect), 'x', big);
        h.expect.len = big;
        h.expect_bin = true;
        for (unsigned i = 0; i < n_big; i++) {
                unsigned long long t0 = now_usec();
                unsigned before = h.n_results;
                assert_int_equal(emit_echo(&h, 100 + n + i, buffer_data(&h.expect), big, true), 0);
                assert_true(RUN_UNTIL(&h, h.n_results == before + 1, 60000));
                tb[i] = now_usec() - t0;
        }
        assert_true(h.value_ok);
        unsigned long long median = sorted_at(tb, n_big, n_big / 2);
        printf("sandbox::echo(20 MiB) round trip over %s: median %llu ms (%.0f MB/s each way)\n",
               transport_name(h.transport), median / 1000, (double) big / (double) median);
        harness_done(&h);
        test_server_stop(&s);
}

#define ONE(f, t, name) { name, f, NULL, test_server_kill_all, (void *) (intptr_t) (t) }
#define BOTH(f) ONE(f, SIO_CLIENT_TRANSPORT_WEBSOCKET, #f "/websocket"), ONE(f, SIO_CLIENT_TRANSPORT_POLLING, #f "/polling")

int main(int argc, char **argv) {
        const struct CMUnitTest tests[] = {
                BOTH(test_connect_and_close),
                BOTH(test_hostname),
                BOTH(test_wrong_token),
                BOTH(test_unknown_namespace),
                BOTH(test_many_in_flight),
                BOTH(test_big_payload),
                BOTH(test_heartbeat),
                BOTH(test_drop),
                BOTH(test_server_restart),
                BOTH(test_give_up),
                BOTH(test_no_reconnect),
                BOTH(test_message_too_large),
                BOTH(test_queue_bound),
                ONE(test_auto_websocket, SIO_CLIENT_TRANSPORT_AUTO, "test_auto_websocket"),
                ONE(test_auto_fallback, SIO_CLIENT_TRANSPORT_AUTO, "test_auto_fallback"),
                ONE(test_emit_outside_loop, SIO_CLIENT_TRANSPORT_WEBSOCKET, "test_emit_outside_loop/websocket"),
                BOTH(test_conformance_root),
                BOTH(measure),
        };
        int r;

        log_parse_env();
        /* SIO_TEST_FILTER=test_drop* runs only the matching tests. */
        if (getenv("SIO_TEST_FILTER"))
                cmocka_set_test_filter(getenv("SIO_TEST_FILTER"));
        if (argc > 1)
                setenv("AGENTIX_SERVER", argv[1], 1);
        signal(SIGPIPE, SIG_IGN);
        curl_global_init(CURL_GLOBAL_DEFAULT);
        r = cmocka_run_group_tests(tests, NULL, NULL);
        (void) test_server_kill_all(NULL);
        curl_global_cleanup();
        return r;
}

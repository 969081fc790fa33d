/* SPDX-License-Identifier: MIT */
/* SioClient's protocol handling against a scripted Engine.IO long-polling server running on
 * the same sd-event loop: what the client sends (CONNECT with the auth, batched POSTs in order,
 * DISCONNECT and CLOSE on close) and how it takes what a server may send (events of every
 * shape, other namespaces, oversized messages, stray attachments, DISCONNECT, CLOSE, bad
 * handshakes, a session the server forgot). */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <sys/socket.h>

#include <cmocka.h>
#include <curl/curl.h>
#include <libwebsockets.h>

#include "buffer.h"
#include "eio-packet.h"
#include "macro.h"
#include "sio-client.h"

/* ---- the scripted server --------------------------------------------------------------------- */

typedef struct Fake Fake;

typedef struct FakeConn {
        Fake *fake;
        int fd;
        sd_event_source *io;
        Buffer in, out;
        size_t sent;
        struct FakeConn *next;
} FakeConn;

#define MAX_POSTS 64

struct Fake {
        sd_event *event;
        int fd;
        unsigned port;
        char url[64];
        sd_event_source *accept_source;
        FakeConn *conns;

        const char *handshake;      /* the OPEN packet's payload, NULL: a good one */
        unsigned handshake_status;  /* 0: 200 */
        bool refuse_polls;          /* answer polls with 400 */
        bool auto_join;             /* answer CONNECT /rpc with a CONNECT */
        Buffer to_client;           /* payload for the next poll */
        FakeConn *parked;
        unsigned n_gets;

        Buffer posts[MAX_POSTS];
        unsigned n_posts;
        unsigned max_packets_per_post;
};

static void conn_close(FakeConn *c) {
        Fake *f = c->fake;

        if (f->parked == c)
                f->parked = NULL;
        for (FakeConn **p = &f->conns; *p; p = &(*p)->next)
                if (*p == c) {
                        *p = c->next;
                        break;
                }
        sd_event_source_disable_unref(c->io);
        safe_close(c->fd);
        buffer_done(&c->in);
        buffer_done(&c->out);
        free(c);
}

static void conn_flush(FakeConn *c) {
        while (c->sent < c->out.len) {
                ssize_t k = write(c->fd, buffer_data(&c->out) + c->sent, c->out.len - c->sent);
                if (k < 0) {
                        if (errno == EAGAIN) {
                                (void) sd_event_source_set_io_events(c->io, EPOLLOUT);
                                (void) sd_event_source_set_enabled(c->io, SD_EVENT_ON);
                                return;
                        }
                        break;
                }
                c->sent += (size_t) k;
        }
        conn_close(c);
}

static void respond(FakeConn *c, unsigned status, const void *body, size_t n) {
        assert_int_equal(buffer_printf(&c->out, "HTTP/1.1 %u X\r\nContent-Type: text/plain\r\nContent-Length: %zu\r\n"
                                                "Connection: close\r\n\r\n", status, n), 0);
        assert_int_equal(buffer_append(&c->out, body, n), 0);
        conn_flush(c);
}

static void fake_flush(Fake *f) {
        FakeConn *c = f->parked;

        if (!c || f->to_client.len == 0)
                return;
        f->parked = NULL;
        respond(c, 200, buffer_data(&f->to_client), f->to_client.len);
        buffer_clear(&f->to_client);
}

/* Queue one packet (polling form: "<digit>…" or "b<base64>") for the client. */
static void fake_send(Fake *f, const char *packet) {
        if (f->to_client.len > 0)
                assert_int_equal(buffer_append_byte(&f->to_client, EIO_RECORD_SEPARATOR), 0);
        assert_int_equal(buffer_append(&f->to_client, packet, strlen(packet)), 0);
        fake_flush(f);
}

static void fake_send_binary(Fake *f, const void *data, size_t n) {
        assert_int_equal(eio_payload_append(&f->to_client, EIO_MESSAGE, true, data, n), 0);
        fake_flush(f);
}

static int count_packet(const EioPacket *p, void *userdata) {
        (*(unsigned *) userdata)++;
        return 0;
}

static void on_request(FakeConn *c, const char *head, const uint8_t *body, size_t body_len) {
        Fake *f = c->fake;
        bool has_sid = strstr(head, "&sid=") != NULL;

        if (strneq(head, "POST ", 5)) {
                unsigned n = 0;
                assert_true(has_sid);
                assert_true(f->n_posts < MAX_POSTS);
                assert_int_equal(buffer_append(&f->posts[f->n_posts], body, body_len), 0);
                f->n_posts++;
                assert_int_equal(eio_payload_decode(body, body_len, count_packet, &n), 0);
                f->max_packets_per_post = MAX(f->max_packets_per_post, n);
                if (f->auto_join && memmem(body, body_len, "40/rpc,", 7))
                        fake_send(f, "40/rpc,{\"sid\":\"s1\"}");
                respond(c, 200, "ok", 2);
                return;
        }

        assert_true(strneq(head, "GET /socket.io/?EIO=4&transport=polling", 39));
        f->n_gets++;
        if (!has_sid) {
                const char *open = f->handshake ?: "0{\"sid\":\"abc\",\"upgrades\":[],\"pingInterval\":25000,"
                                                   "\"pingTimeout\":20000,\"maxPayload\":1000000}";
                respond(c, f->handshake_status ?: 200, open, strlen(open));
                return;
        }
        if (f->refuse_polls) {
                respond(c, 400, "{\"code\":1,\"message\":\"Session ID unknown\"}", 41);
                return;
        }
        assert_null(f->parked); /* never two polls at once */
        f->parked = c;
        fake_flush(f);
}

static int on_conn_io(sd_event_source *source, int fd, uint32_t revents, void *userdata) {
        FakeConn *c = userdata;
        uint8_t buf[65536];
        const char *text, *end, *cl;
        size_t body_len = 0;
        ssize_t k;

        if (c->out.len > 0) {
                conn_flush(c);
                return 0;
        }
        k = read(fd, buf, sizeof(buf));
        if (k <= 0) {
                if (k < 0 && errno == EAGAIN)
                        return 0;
                conn_close(c);
                return 0;
        }
        assert_int_equal(buffer_append(&c->in, buf, (size_t) k), 0);
        assert_int_equal(buffer_append_byte(&c->in, 0), 0);
        c->in.len--;
        text = (const char *) buffer_data(&c->in);
        end = strstr(text, "\r\n\r\n");
        if (!end)
                return 0;
        cl = strcasestr(text, "\r\ncontent-length:");
        if (cl && cl < end)
                body_len = strtoul(cl + 17, NULL, 10);
        if (c->in.len < (size_t) (end + 4 - text) + body_len)
                return 0;
        (void) sd_event_source_set_enabled(c->io, SD_EVENT_OFF);
        on_request(c, text, (const uint8_t *) end + 4, body_len);
        return 0;
}

static int on_accept(sd_event_source *source, int fd, uint32_t revents, void *userdata) {
        Fake *f = userdata;
        FakeConn *c;
        int cfd;

        cfd = accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (cfd < 0)
                return 0;
        c = calloc(1, sizeof(*c));
        assert_non_null(c);
        c->fake = f;
        c->fd = cfd;
        assert_int_equal(sd_event_add_io(f->event, &c->io, cfd, EPOLLIN, on_conn_io, c), 0);
        c->next = f->conns;
        f->conns = c;
        return 0;
}

static void fake_start(Fake *f, sd_event *event) {
        struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        socklen_t sl = sizeof(sa);

        *f = (Fake) { .event = event, .auto_join = true };
        f->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        assert_true(f->fd >= 0);
        assert_int_equal(bind(f->fd, (struct sockaddr *) &sa, sizeof(sa)), 0);
        assert_int_equal(listen(f->fd, 64), 0);
        assert_int_equal(getsockname(f->fd, (struct sockaddr *) &sa, &sl), 0);
        f->port = ntohs(sa.sin_port);
        snprintf(f->url, sizeof(f->url), "http://127.0.0.1:%u", f->port);
        assert_int_equal(sd_event_add_io(event, &f->accept_source, f->fd, EPOLLIN, on_accept, f), 0);
}

static void fake_stop(Fake *f) {
        while (f->conns)
                conn_close(f->conns);
        sd_event_source_disable_unref(f->accept_source);
        safe_close(f->fd);
        buffer_done(&f->to_client);
        for (unsigned i = 0; i < f->n_posts; i++)
                buffer_done(&f->posts[i]);
}

/* ---- the client ------------------------------------------------------------------------------ */

typedef struct Seen {
        char name[64];
        Buffer data;
} Seen;

typedef struct T {
        sd_event *event;
        Fake fake;
        SioClient *client;
        unsigned n_connected;
        bool final;
        int final_error;
        char final_message[256];
        Seen events[16];
        unsigned n_events;
        unsigned n_too_large;
        size_t too_large_size, too_large_head;
        char too_large_event[64];
} T;

static void on_connected(SioClient *c, bool reconnected, void *userdata) {
        ((T *) userdata)->n_connected++;
}

static void on_disconnected(SioClient *c, bool final, int error, const char *message, void *userdata) {
        T *t = userdata;

        if (!final)
                return;
        t->final = true;
        t->final_error = error;
        snprintf(t->final_message, sizeof(t->final_message), "%s", message);
}

static void on_event(SioClient *c, const char *event, const uint8_t *data, size_t size, void *userdata) {
        T *t = userdata;
        Seen *s;

        assert_true(t->n_events < ELEMENTSOF(t->events));
        s = &t->events[t->n_events++];
        snprintf(s->name, sizeof(s->name), "%s", event);
        assert_int_equal(buffer_append(&s->data, data, size), 0);
}

static void on_too_large(SioClient *c, const char *event, const uint8_t *head, size_t head_size, size_t size,
                         void *userdata) {
        T *t = userdata;

        t->n_too_large++;
        t->too_large_size = size;
        t->too_large_head = head_size;
        snprintf(t->too_large_event, sizeof(t->too_large_event), "%s", event);
}

static const SioClientCallbacks callbacks = {
        .connected = on_connected,
        .disconnected = on_disconnected,
        .event = on_event,
        .message_too_large = on_too_large,
};

#define RUN_UNTIL(t, cond, timeout_ms)                                                          \
        ({                                                                                      \
                unsigned long long _deadline = now_usec() + (unsigned long long) (timeout_ms) * 1000ULL; \
                while (!(cond) && now_usec() < _deadline)                                       \
                        assert_true(sd_event_run((t)->event, 10 * 1000) >= 0);                  \
                (cond);                                                                         \
        })

static void start(T *t, size_t max_message, bool join) {
        SioClientConfig config = {
                .nsp = "/rpc",
                .auth_json = "{\"token\":\"t\"}",
                .transport = SIO_CLIENT_TRANSPORT_POLLING,
                .reconnect = false,
                .connect_timeout_usec = 3 * 1000 * 1000,
                .max_message = max_message,
        };

        *t = (T) {};
        assert_int_equal(sd_event_new(&t->event), 0);
        fake_start(&t->fake, t->event);
        config.url = t->fake.url;
        assert_int_equal(sio_client_new(t->event, &config, &callbacks, t, &t->client), 0);
        assert_int_equal(sio_client_start(t->client), 0);
        if (join) {
                assert_true(RUN_UNTIL(t, t->n_connected == 1 || t->final, 5000));
                assert_false(t->final);
                /* The CONNECT carried the auth, unchanged. */
                assert_true(t->fake.n_posts >= 1);
                assert_non_null(memmem(buffer_data(&t->fake.posts[0]), t->fake.posts[0].len,
                                       "40/rpc,{\"token\":\"t\"}", 20));
                assert_string_equal(sio_client_transport_name(t->client), "polling");
        }
}

static void stop(T *t) {
        t->client = sio_client_free(t->client);
        fake_stop(&t->fake);
        for (unsigned i = 0; i < t->n_events; i++)
                buffer_done(&t->events[i].data);
        t->event = sd_event_unref(t->event);
}

/* ---- tests ----------------------------------------------------------------------------------- */

static void test_event_shapes(void **state) {
        T t;

        start(&t, 0, true);
        /* Delivered: the fast path's form, and the same event with its placeholder's keys in
         * another order (the full parser). Dropped: an event without attachment, one with two
         * attachments (both skipped), one on another namespace, a binary ACK. */
        fake_send(&t.fake, "42/rpc,[\"plain\",1]");
        fake_send(&t.fake, "452-/rpc,[\"two\",{\"_placeholder\":true,\"num\":0},{\"_placeholder\":true,\"num\":1}]");
        fake_send_binary(&t.fake, "AA", 2);
        fake_send_binary(&t.fake, "BB", 2);
        fake_send(&t.fake, "451-/rpc,[\"fast\",{\"_placeholder\":true,\"num\":0}]");
        fake_send_binary(&t.fake, "hello", 5);
        fake_send(&t.fake, "451-/other,[\"x\",{\"_placeholder\":true,\"num\":0}]");
        fake_send_binary(&t.fake, "CC", 2);
        fake_send(&t.fake, "461-/rpc,3[{\"_placeholder\":true,\"num\":0}]");
        fake_send_binary(&t.fake, "DD", 2);
        fake_send(&t.fake, "451-/rpc,[\"slow\",{\"num\":0,\"_placeholder\":true}]");
        fake_send_binary(&t.fake, "", 0);
        fake_send(&t.fake, "451-/rpc,[\"esc\\\"aped\",{\"_placeholder\":true,\"num\":0}]");
        fake_send_binary(&t.fake, "x", 1);

        assert_true(RUN_UNTIL(&t, t.n_events == 3 || t.final, 5000));
        (void) RUN_UNTIL(&t, false, 100);
        assert_false(t.final);
        assert_int_equal(t.n_events, 3);
        assert_string_equal(t.events[0].name, "fast");
        assert_int_equal(t.events[0].data.len, 5);
        assert_memory_equal(buffer_data(&t.events[0].data), "hello", 5);
        assert_string_equal(t.events[1].name, "slow");
        assert_int_equal(t.events[1].data.len, 0);
        assert_string_equal(t.events[2].name, "esc\"aped");
        assert_true(sio_client_is_connected(t.client));
        stop(&t);
}

static void test_post_batching(void **state) {
        const unsigned n = 40;
        unsigned next = 0, n_packets = 0;
        T t;

        start(&t, 0, true);
        /* Queued while the loop does not run: several POSTs of at most 16 packets, one at a
         * time, everything in order (text then its attachment). */
        for (unsigned i = 0; i < n; i++) {
                char event[16];
                uint8_t data[4] = { 'd', (uint8_t) i, 0, 0xff };
                snprintf(event, sizeof(event), "e%u", i);
                assert_int_equal(sio_client_emit_binary1(t.client, event, data, sizeof(data)), 0);
        }
        unsigned first_post = t.fake.n_posts;
        assert_true(RUN_UNTIL(&t, t.fake.n_posts >= first_post + (2 * n + 15) / 16, 5000));
        (void) RUN_UNTIL(&t, false, 100);
        assert_int_equal(t.fake.max_packets_per_post, 16);

        for (unsigned p = first_post; p < t.fake.n_posts; p++) {
                Buffer *b = &t.fake.posts[p];
                const uint8_t *s = buffer_data(b), *end = s + b->len;

                while (s < end) {
                        const uint8_t *sep = memchr(s, EIO_RECORD_SEPARATOR, (size_t) (end - s));
                        size_t len = (size_t) ((sep ?: end) - s);
                        char want[96];

                        if (n_packets % 2 == 0) {
                                snprintf(want, sizeof(want), "451-/rpc,[\"e%u\",{\"_placeholder\":true,\"num\":0}]", next);
                                assert_int_equal(len, strlen(want));
                                assert_memory_equal(s, want, len);
                        } else {
                                uint8_t data[4] = { 'd', (uint8_t) next, 0, 0xff };
                                char b64[16];
                                assert_int_equal(lws_b64_encode_string((const char *) data, 4, b64, sizeof(b64)), 8);
                                assert_int_equal(len, 9);
                                assert_int_equal(s[0], 'b');
                                assert_memory_equal(s + 1, b64, 8);
                                next++;
                        }
                        n_packets++;
                        s = sep ? sep + 1 : end;
                }
        }
        assert_int_equal(n_packets, 2 * n);
        assert_int_equal(next, n);
        stop(&t);
}

static void test_server_disconnect(void **state) {
        T t;

        start(&t, 0, true);
        fake_send(&t.fake, "41/rpc,");
        assert_true(RUN_UNTIL(&t, t.final, 5000));
        assert_int_equal(t.final_error, -ECONNRESET);
        assert_false(sio_client_is_connected(t.client));
        stop(&t);
}

static void test_close_packet(void **state) {
        T t;

        start(&t, 0, true);
        fake_send(&t.fake, "1");
        assert_true(RUN_UNTIL(&t, t.final, 5000));
        assert_int_equal(t.final_error, -ECONNRESET);
        assert_string_equal(t.final_message, "the server closed the Engine.IO session");
        stop(&t);
}

static void test_ping(void **state) {
        unsigned before;
        T t;

        start(&t, 0, true);
        before = t.fake.n_posts;
        fake_send(&t.fake, "2");
        assert_true(RUN_UNTIL(&t, t.fake.n_posts > before, 5000));
        assert_int_equal(t.fake.posts[before].len, 1);
        assert_memory_equal(buffer_data(&t.fake.posts[before]), "3", 1);
        stop(&t);
}

static void test_oversized_text(void **state) {
        char big[2100];
        T t;

        start(&t, 1024, true);
        memset(big, 'x', sizeof(big));
        memcpy(big, "42/rpc,[\"big\",\"", 15);
        memcpy(big + sizeof(big) - 3, "\"]", 3);
        fake_send(&t.fake, big);
        assert_true(RUN_UNTIL(&t, t.final, 5000));
        assert_int_equal(t.final_error, -EMSGSIZE);
        stop(&t);
}

static void test_oversized_attachment(void **state) {
        uint8_t big[3000];
        T t;

        start(&t, 1024, true);
        memset(big, 0xab, sizeof(big));
        fake_send(&t.fake, "451-/rpc,[\"call:result\",{\"_placeholder\":true,\"num\":0}]");
        fake_send_binary(&t.fake, big, sizeof(big));
        fake_send(&t.fake, "451-/rpc,[\"after\",{\"_placeholder\":true,\"num\":0}]");
        fake_send_binary(&t.fake, "ok", 2);
        assert_true(RUN_UNTIL(&t, t.n_events == 1 || t.final, 5000));
        assert_false(t.final);
        assert_int_equal(t.n_too_large, 1);
        assert_string_equal(t.too_large_event, "call:result");
        assert_int_equal(t.too_large_size, sizeof(big));
        assert_true(t.too_large_head > 0 && t.too_large_head <= 4096);
        assert_string_equal(t.events[0].name, "after");
        stop(&t);
}

static void test_stray_attachment(void **state) {
        T t;

        start(&t, 0, true);
        fake_send_binary(&t.fake, "??", 2);
        assert_true(RUN_UNTIL(&t, t.final, 5000));
        assert_int_equal(t.final_error, -EPROTO);
        stop(&t);
}

static void test_malformed_packet(void **state) {
        T t;

        start(&t, 0, true);
        fake_send(&t.fake, "42/rpc,[not json");
        assert_true(RUN_UNTIL(&t, t.final, 5000));
        assert_int_equal(t.final_error, -EPROTO);
        stop(&t);
}

static void test_bad_handshakes(void **state) {
        static const char *const opens[] = {
                "0{\"nope\":1}",
                "0not json",
                "40",
                "0{\"sid\":\"a\",\"pingInterval\":\"soon\",\"pingTimeout\":1}",
        };
        T t;

        for (size_t i = 0; i < ELEMENTSOF(opens); i++) {
                start(&t, 0, false);
                t.fake.handshake = opens[i];
                assert_true(RUN_UNTIL(&t, t.final, 5000));
                assert_int_equal(t.final_error, -EPROTO);
                assert_int_equal(t.n_connected, 0);
                stop(&t);
        }

        start(&t, 0, false);
        t.fake.handshake_status = 404;
        assert_true(RUN_UNTIL(&t, t.final, 5000));
        assert_int_equal(t.final_error, -EPROTO);
        assert_non_null(strstr(t.final_message, "404"));
        stop(&t);
}

static void test_forgotten_session(void **state) {
        T t;

        start(&t, 0, false);
        t.fake.refuse_polls = true;
        assert_true(RUN_UNTIL(&t, t.final, 5000));
        assert_int_equal(t.final_error, -ECONNRESET);
        assert_non_null(strstr(t.final_message, "400"));
        stop(&t);
}

/* Did the client send the DISCONNECT and the Engine.IO CLOSE (in POSTs from `first` on)? */
static bool said_goodbye(const Fake *f, unsigned first, bool *ret_disconnect) {
        bool disconnect = false, close = false;

        for (unsigned p = first; p < f->n_posts; p++) {
                const Buffer *b = &f->posts[p];
                const uint8_t *d = buffer_data(b);

                if (memmem(d, b->len, "41/rpc,", 7))
                        disconnect = true;
                if (b->len >= 1 && d[b->len - 1] == '1' && (b->len == 1 || d[b->len - 2] == EIO_RECORD_SEPARATOR))
                        close = true;
        }
        *ret_disconnect = disconnect;
        return close;
}

static void test_close_says_goodbye(void **state) {
        bool disconnect = false;
        unsigned before;
        T t;

        start(&t, 0, true);
        before = t.fake.n_posts;
        sio_client_close(t.client);
        assert_true(RUN_UNTIL(&t, t.final, 5000));
        assert_int_equal(t.final_error, 0);
        assert_string_equal(t.final_message, "closed");
        /* The DISCONNECT and the Engine.IO CLOSE still leave after the final callback. */
        assert_true(RUN_UNTIL(&t, said_goodbye(&t.fake, before, &disconnect), 5000));
        assert_true(disconnect);
        stop(&t);
}

static void test_bad_config(void **state) {
        _cleanup_(sd_event_unrefp) sd_event *event = NULL;
        SioClientConfig config = { .url = "http://127.0.0.1:1", .nsp = "/rpc" };
        SioClient *c = NULL;

        assert_int_equal(sd_event_new(&event), 0);
        config.auth_json = "[1]";
        assert_int_equal(sio_client_new(event, &config, NULL, NULL, &c), -EINVAL);
        config.auth_json = "{";
        assert_int_equal(sio_client_new(event, &config, NULL, NULL, &c), -EINVAL);
        config.auth_json = NULL;
        config.nsp = "rpc";
        assert_int_equal(sio_client_new(event, &config, NULL, NULL, &c), -EINVAL);
        config.nsp = "/rpc";
        /* TLS without a CA to verify the server with: refused, never unverified. */
        config.url = "https://127.0.0.1:1";
        assert_int_equal(sio_client_new(event, &config, NULL, NULL, &c), -ENOKEY);
        assert_null(c);
        config.tls_ca_pem = "not a certificate";
        assert_int_equal(sio_client_new(event, &config, NULL, NULL, &c), -EINVAL);
        assert_null(c);
        config.tls_ca_pem = NULL;
        /* Not started: nothing to emit on; closing reports the end. */
        config.url = "http://127.0.0.1:1";
        assert_int_equal(sio_client_new(event, &config, NULL, NULL, &c), 0);
        assert_int_equal(sio_client_emit_binary1(c, "call", "x", 1), -ENOTCONN);
        sio_client_close(c);
        assert_int_equal(sio_client_start(c), -EALREADY);
        c = sio_client_free(c);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_event_shapes),
                cmocka_unit_test(test_post_batching),
                cmocka_unit_test(test_server_disconnect),
                cmocka_unit_test(test_close_packet),
                cmocka_unit_test(test_ping),
                cmocka_unit_test(test_oversized_text),
                cmocka_unit_test(test_oversized_attachment),
                cmocka_unit_test(test_stray_attachment),
                cmocka_unit_test(test_malformed_packet),
                cmocka_unit_test(test_bad_handshakes),
                cmocka_unit_test(test_forgotten_session),
                cmocka_unit_test(test_close_says_goodbye),
                cmocka_unit_test(test_bad_config),
        };
        int r;

        if (getenv("SIO_TEST_FILTER"))
                cmocka_set_test_filter(getenv("SIO_TEST_FILTER"));
        r = cmocka_run_group_tests(tests, NULL, NULL);
        curl_global_cleanup();
        return r;
}

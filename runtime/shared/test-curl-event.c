/* SPDX-License-Identifier: MIT */
/* curl-event against a tiny HTTP server running on the same sd-event loop: concurrent
 * transfers all finish with the right bodies, curl's timeouts fire through the sd-event timer,
 * a removed transfer never reports, a refused connection reports, and freeing with transfers
 * running (or from a done callback) leaks nothing (run under ASan). */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <sys/socket.h>

#include <cmocka.h>

#include "buffer.h"
#include "curl-event.h"
#include "macro.h"

/* ---- the server ------------------------------------------------------------------------------ */

typedef struct TestServer TestServer;

typedef struct TestConn {
        TestServer *server;
        int fd;
        sd_event_source *io, *delay;
        Buffer in, out;
        size_t sent;
        struct TestConn *next;
} TestConn;

struct TestServer {
        sd_event *event;
        int fd;
        unsigned port;
        sd_event_source *accept_source;
        TestConn *conns;
        unsigned n_requests;
};

static void conn_close(TestConn *c) {
        TestServer *s = c->server;

        for (TestConn **p = &s->conns; *p; p = &(*p)->next)
                if (*p == c) {
                        *p = c->next;
                        break;
                }
        sd_event_source_disable_unref(c->io);
        sd_event_source_disable_unref(c->delay);
        safe_close(c->fd);
        buffer_done(&c->in);
        buffer_done(&c->out);
        free(c);
}

static void conn_flush(TestConn *c) {
        while (c->sent < c->out.len) {
                ssize_t k = write(c->fd, buffer_data(&c->out) + c->sent, c->out.len - c->sent);
                if (k < 0) {
                        if (errno == EAGAIN) {
                                (void) sd_event_source_set_io_events(c->io, EPOLLOUT);
                                (void) sd_event_source_set_enabled(c->io, SD_EVENT_ON);
                                return;
                        }
                        conn_close(c);
                        return;
                }
                c->sent += (size_t) k;
        }
        conn_close(c); /* Connection: close */
}

static void conn_respond(TestConn *c, const char *body) {
        assert_int_equal(buffer_printf(&c->out,
                                       "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: %zu\r\n"
                                       "Connection: close\r\n\r\n%s",
                                       strlen(body), body),
                         0);
        conn_flush(c);
}

static int on_delay(sd_event_source *source, uint64_t usec, void *userdata) {
        conn_respond(userdata, "slow");
        return 0;
}

static int on_conn_io(sd_event_source *source, int fd, uint32_t revents, void *userdata) {
        TestConn *c = userdata;
        char path[64];
        uint8_t buf[4096];
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
        (void) buffer_append_byte(&c->in, 0);
        c->in.len--;
        if (!strstr((char *) buffer_data(&c->in), "\r\n\r\n"))
                return 0;
        (void) sd_event_source_set_enabled(c->io, SD_EVENT_OFF);
        assert_int_equal(sscanf((char *) buffer_data(&c->in), "GET %63s ", path), 1);
        c->server->n_requests++;

        if (strneq(path, "/echo/", 6))
                conn_respond(c, path + 6);
        else if (streq(path, "/slow")) {
                uint64_t now;
                assert_int_equal(sd_event_now(c->server->event, CLOCK_MONOTONIC, &now), 0);
                assert_int_equal(sd_event_add_time(c->server->event, &c->delay, CLOCK_MONOTONIC, now + 100 * 1000, 1,
                                                   on_delay, c),
                                 0);
        }
        /* "/never": keep the connection open and silent. */
        return 0;
}

static int on_accept(sd_event_source *source, int fd, uint32_t revents, void *userdata) {
        TestServer *s = userdata;
        TestConn *c;
        int cfd;

        cfd = accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (cfd < 0)
                return 0;
        c = calloc(1, sizeof(*c));
        assert_non_null(c);
        c->server = s;
        c->fd = cfd;
        assert_int_equal(sd_event_add_io(s->event, &c->io, cfd, EPOLLIN, on_conn_io, c), 0);
        c->next = s->conns;
        s->conns = c;
        return 0;
}

static void server_start(TestServer *s, sd_event *event) {
        struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        socklen_t sl = sizeof(sa);

        *s = (TestServer) { .event = event };
        s->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        assert_true(s->fd >= 0);
        assert_int_equal(bind(s->fd, (struct sockaddr *) &sa, sizeof(sa)), 0);
        assert_int_equal(listen(s->fd, 64), 0);
        assert_int_equal(getsockname(s->fd, (struct sockaddr *) &sa, &sl), 0);
        s->port = ntohs(sa.sin_port);
        assert_int_equal(sd_event_add_io(event, &s->accept_source, s->fd, EPOLLIN, on_accept, s), 0);
}

static void server_stop(TestServer *s) {
        while (s->conns)
                conn_close(s->conns);
        sd_event_source_disable_unref(s->accept_source);
        safe_close(s->fd);
}

/* ---- transfers ------------------------------------------------------------------------------- */

typedef struct Transfer {
        CURL *easy;
        Buffer body;
        bool done;
        CURLcode result;
        long status;
        unsigned *n_done;
        bool free_glue_when_done;
        CurlEvent **glue;
} Transfer;

static size_t on_write(char *data, size_t size, size_t n, void *userdata) {
        Transfer *t = userdata;

        assert_int_equal(buffer_append(&t->body, data, size * n), 0);
        return size * n;
}

static void on_done(CurlEvent *g, CURL *easy, CURLcode result, void *userdata) {
        Transfer *t = userdata;

        assert_ptr_equal(easy, t->easy);
        assert_false(t->done);
        t->done = true;
        t->result = result;
        (void) curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &t->status);
        if (t->n_done)
                (*t->n_done)++;
        if (t->free_glue_when_done)
                *t->glue = curl_event_free(*t->glue);
}

static void transfer_init(Transfer *t, unsigned port, const char *path, long timeout_ms) {
        char url[128];

        *t = (Transfer) {};
        snprintf(url, sizeof(url), "http://127.0.0.1:%u%s", port, path);
        t->easy = curl_easy_init();
        assert_non_null(t->easy);
        assert_int_equal(curl_easy_setopt(t->easy, CURLOPT_URL, url), CURLE_OK);
        assert_int_equal(curl_easy_setopt(t->easy, CURLOPT_WRITEFUNCTION, on_write), CURLE_OK);
        assert_int_equal(curl_easy_setopt(t->easy, CURLOPT_WRITEDATA, t), CURLE_OK);
        assert_int_equal(curl_easy_setopt(t->easy, CURLOPT_NOSIGNAL, 1L), CURLE_OK);
        if (timeout_ms > 0)
                assert_int_equal(curl_easy_setopt(t->easy, CURLOPT_TIMEOUT_MS, timeout_ms), CURLE_OK);
}

static void transfer_done(Transfer *t) {
        curl_easy_cleanup(t->easy);
        buffer_done(&t->body);
}

/* Run the loop until `cond` holds or `timeout_ms` passes; returns whether it held. */
#define RUN_UNTIL(event, cond, timeout_ms)                                                      \
        ({                                                                                      \
                unsigned long long _deadline = now_usec() + (timeout_ms) * 1000ULL;             \
                while (!(cond) && now_usec() < _deadline)                                       \
                        assert_true(sd_event_run((event), 10 * 1000) >= 0);                     \
                (cond);                                                                         \
        })

static void test_concurrent(void **state) {
        _cleanup_(sd_event_unrefp) sd_event *event = NULL;
        _cleanup_(curl_event_freep) CurlEvent *g = NULL;
        Transfer t[8];
        unsigned n_done = 0;
        TestServer s;

        assert_int_equal(sd_event_new(&event), 0);
        server_start(&s, event);
        assert_int_equal(curl_event_new(event, &g), 0);

        for (unsigned i = 0; i < ELEMENTSOF(t); i++) {
                char path[32];
                snprintf(path, sizeof(path), i == 0 ? "/slow" : "/echo/item%u", i);
                transfer_init(&t[i], s.port, path, 5000);
                t[i].n_done = &n_done;
                assert_int_equal(curl_event_add(g, t[i].easy, on_done, &t[i]), 0);
        }
        assert_int_equal(curl_event_n_transfers(g), ELEMENTSOF(t));

        assert_true(RUN_UNTIL(event, n_done == ELEMENTSOF(t), 5000));
        assert_int_equal(curl_event_n_transfers(g), 0);
        for (unsigned i = 0; i < ELEMENTSOF(t); i++) {
                char want[32];
                snprintf(want, sizeof(want), i == 0 ? "slow" : "item%u", i);
                assert_int_equal(t[i].result, CURLE_OK);
                assert_int_equal(t[i].status, 200);
                assert_int_equal(t[i].body.len, strlen(want));
                assert_memory_equal(buffer_data(&t[i].body), want, strlen(want));
        }

        /* An easy handle can run again once done. */
        buffer_clear(&t[1].body);
        t[1].done = false;
        assert_int_equal(curl_event_add(g, t[1].easy, on_done, &t[1]), 0);
        assert_true(RUN_UNTIL(event, t[1].done, 5000));
        assert_int_equal(t[1].result, CURLE_OK);
        assert_int_equal(t[1].body.len, 5);

        for (unsigned i = 0; i < ELEMENTSOF(t); i++)
                transfer_done(&t[i]);
        g = curl_event_free(g);
        server_stop(&s);
}

static void test_timeout_and_remove(void **state) {
        _cleanup_(sd_event_unrefp) sd_event *event = NULL;
        _cleanup_(curl_event_freep) CurlEvent *g = NULL;
        Transfer slow, removed;
        unsigned long long start;
        TestServer s;

        assert_int_equal(sd_event_new(&event), 0);
        server_start(&s, event);
        assert_int_equal(curl_event_new(event, &g), 0);

        transfer_init(&slow, s.port, "/never", 200);
        transfer_init(&removed, s.port, "/never", 0);
        start = now_usec();
        assert_int_equal(curl_event_add(g, slow.easy, on_done, &slow), 0);
        assert_int_equal(curl_event_add(g, removed.easy, on_done, &removed), 0);

        /* Both requests reach the server, then one is stopped by us, the other by curl. */
        assert_true(RUN_UNTIL(event, s.n_requests == 2, 2000));
        curl_event_remove(g, removed.easy);
        curl_event_remove(g, removed.easy); /* not running any more: a no-op */
        assert_int_equal(curl_event_n_transfers(g), 1);

        assert_true(RUN_UNTIL(event, slow.done, 3000));
        assert_int_equal(slow.result, CURLE_OPERATION_TIMEDOUT);
        assert_true(now_usec() - start >= 190 * 1000);
        assert_true(now_usec() - start < 2000 * 1000);

        /* The removed one never reports. */
        (void) RUN_UNTIL(event, false, 300);
        assert_false(removed.done);

        transfer_done(&slow);
        transfer_done(&removed);
        g = curl_event_free(g);
        server_stop(&s);
}

static void test_refused(void **state) {
        _cleanup_(sd_event_unrefp) sd_event *event = NULL;
        _cleanup_(curl_event_freep) CurlEvent *g = NULL;
        Transfer t;
        TestServer s;
        unsigned port;

        assert_int_equal(sd_event_new(&event), 0);
        /* A port that was just free: bind, note it, close. */
        server_start(&s, event);
        port = s.port;
        server_stop(&s);

        assert_int_equal(curl_event_new(event, &g), 0);
        transfer_init(&t, port, "/echo/x", 2000);
        assert_int_equal(curl_event_add(g, t.easy, on_done, &t), 0);
        assert_true(RUN_UNTIL(event, t.done, 3000));
        assert_int_equal(t.result, CURLE_COULDNT_CONNECT);
        transfer_done(&t);
}

static void test_free_while_running(void **state) {
        _cleanup_(sd_event_unrefp) sd_event *event = NULL;
        CurlEvent *g = NULL;
        Transfer quick, stuck;
        TestServer s;

        assert_int_equal(sd_event_new(&event), 0);
        server_start(&s, event);
        assert_int_equal(curl_event_new(event, &g), 0);

        /* The first transfer to finish frees the glue from its done callback, with the other
         * still running: no callback for it, nothing leaked, no use after free. */
        transfer_init(&quick, s.port, "/echo/q", 2000);
        transfer_init(&stuck, s.port, "/never", 0);
        quick.free_glue_when_done = true;
        quick.glue = &g;
        assert_int_equal(curl_event_add(g, stuck.easy, on_done, &stuck), 0);
        assert_true(RUN_UNTIL(event, s.n_requests == 1, 2000));
        assert_int_equal(curl_event_add(g, quick.easy, on_done, &quick), 0);
        assert_true(RUN_UNTIL(event, quick.done, 3000));
        assert_null(g);
        (void) RUN_UNTIL(event, false, 100);
        assert_false(stuck.done);

        transfer_done(&quick);
        transfer_done(&stuck);
        server_stop(&s);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_concurrent),
                cmocka_unit_test(test_timeout_and_remove),
                cmocka_unit_test(test_refused),
                cmocka_unit_test(test_free_while_running),
        };
        int r = cmocka_run_group_tests(tests, NULL, NULL);
        curl_global_cleanup();
        return r;
}

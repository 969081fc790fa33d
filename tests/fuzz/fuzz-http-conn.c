/* SPDX-License-Identifier: MIT */
/* agentix-server's HTTP/1.1 connection (runtime/http/http-conn.c) fed arbitrary bytes over a
 * socketpair, in the pieces the input chooses, with the real routes (an Engine.IO server that
 * echoes, and a route that reads headers back, http_conn_header()) behind it: requests, pipelining, bodies, upgrades, errors and early closes. The
 * connection must answer or close, never crash, leak or hang. */
#include <sys/socket.h>
#include <unistd.h>

#include <systemd/sd-event.h>

#include "eio-server.h"
#include "fuzz-util.h"
#include "http-server.h"
#include "log.h"

static sd_event *event;
static HttpServer *http;
static EioServer *eio;

static int on_open(EioSession *s, void *userdata) {
        return 0;
}

static void on_message(EioSession *s, bool binary, const uint8_t *data, size_t size, void *userdata) {
        (void) eio_session_send(s, binary, data, size);
}

static void on_close(EioSession *s, const char *reason, void *userdata) {
}

/* Reads headers as a takeover or a handler would, and answers with what it found. */
static void header_route(HttpConn *c, const char *path, void *userdata) {
        char v[64];
        int a = http_conn_header(c, "Host", v, sizeof(v)), b = http_conn_header(c, "E2b-Sandbox-Id", v, 8);
        /* The credentials a route checks: the token headers, whatever pieces they came in. */
        bool t = c->access_token[0] || http_conn_bearer_token(c);

        (void) http_conn_respond_error(c, a >= 0 && b >= 0 ? 200 : t ? 401 : 404, a, b >= 0 ? v : "none");
}

static void setup(void) {
        static const EioCallbacks cb = { .open = on_open, .message = on_message, .close = on_close };
        EioConfig ec = {
                .path = "/engine.io/",
                .ping_interval_ms = 60000,
                .ping_timeout_ms = 60000,
                .upgrade_timeout_ms = 10000,
                .max_payload = 64 * 1024,
                .max_message = 64 * 1024,
                .max_backlog = 1024 * 1024,
                .max_sessions = 64,
        };
        HttpServerConfig hc = { .max_connections = 64 };

        log_set_max_level(LOG_CRIT);
        CHECK(sd_event_new(&event) >= 0);
        CHECK(http_server_new(event, &hc, &http) >= 0);
        CHECK(eio_server_new(event, &ec, &cb, NULL, &eio) >= 0);
        CHECK(http_server_add_eio(http, eio, &eio_http_ops) >= 0);
        CHECK(http_server_add_route(http, "/h", header_route, NULL) >= 0);
}

static void drain(int fd) {
        char buf[65536];
        while (read(fd, buf, sizeof(buf)) > 0)
                ;
}

static void run_loop(int peer, unsigned n) {
        for (unsigned i = 0; i < n; i++) {
                if (sd_event_run(event, 0) <= 0)
                        break;
                drain(peer);
        }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        int sv[2];
        HttpConn *c;

        if (!event)
                setup();
        if (size < 1)
                return 0;
        /* First byte: piece size (1..64) and whether the client half-closes at the end. */
        size_t piece = (data[0] & 0x3f) + 1;
        bool half_close = data[0] & 0x40;
        data++, size--;

        CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) == 0);
        CHECK(http_conn_new(http, sv[0], &c) >= 0);
        for (size_t off = 0; off < size; off += piece) {
                size_t n = size - off < piece ? size - off : piece;
                if (write(sv[1], data + off, n) < 0)
                        break; /* the server closed */
                run_loop(sv[1], 4);
        }
        if (half_close)
                (void) shutdown(sv[1], SHUT_WR);
        run_loop(sv[1], 16);
        close(sv[1]);
        run_loop(-1, 16);
        /* Sessions opened by the input end with it. */
        eio_server_close_all(eio, "next input");
        run_loop(-1, 16);
        return 0;
}

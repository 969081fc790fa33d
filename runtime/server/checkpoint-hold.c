/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <jansson.h>

#include "buffer.h"
#include "checkpoint-hold.h"
#include "log.h"
#include "macro.h"
#include "socket-drain.h"
#include "tcp-blockers.h"

/* gVisor's TIME_WAIT (a minute), and a margin. */
#define TIME_WAIT_USEC (62ULL * 1000000)

/* A table bigger than this (some 100,000 connections) is not read to its end. */
#define TABLE_MAX (16u * 1024u * 1024u)

struct CheckpointHold {
        sd_event *event;
        HttpServer *http;
        Proxy *proxy;
        Rpc *rpc;
        sd_event_source *sigusr2, *timer;
        bool held;
};

/* procfs makes the text from memory as it is read: no I/O to wait for on the event loop. The
 * text is NUL-terminated. -ENOENT: no such table (no IPv6). */
static int read_table(const char *path, Buffer *ret) {
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);

        if (fd < 0)
                return negative_errno();
        while (ret->len < TABLE_MAX) {
                ssize_t n;

                if (buffer_reserve(ret, 64 * 1024) < 0)
                        return -ENOMEM;
                n = read(fd, buffer_data(ret) + ret->len, 64 * 1024 - 1);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return negative_errno();
                }
                if (n == 0)
                        break;
                ret->len += (size_t) n;
        }
        return buffer_append_byte(ret, 0);
}

/* The asking connection's ends, as its TCP socket has them (over TLS: the TLS connection's). */
static void asker_endpoints(CheckpointHold *h, HttpConn *asker, TcpEndpoint *ret_local, TcpEndpoint *ret_remote) {
        int fd = http_server_conn_socket(h->http, asker);
        struct sockaddr_storage ss;
        socklen_t len = sizeof(ss);

        *ret_local = *ret_remote = (TcpEndpoint) {};
        if (fd < 0)
                return;
        if (getsockname(fd, (struct sockaddr *) &ss, &len) == 0)
                (void) tcp_endpoint_from_sockaddr((struct sockaddr *) &ss, len, ret_local);
        len = sizeof(ss);
        if (getpeername(fd, (struct sockaddr *) &ss, &len) == 0)
                (void) tcp_endpoint_from_sockaddr((struct sockaddr *) &ss, len, ret_remote);
}

static int find_blockers(CheckpointHold *h, HttpConn *asker, TcpBlockers *ret) {
        static const char *const tables[] = { "/proc/net/tcp", "/proc/net/tcp6" };
        TcpEndpoint local, remote;
        uint16_t ports[16];
        size_t n_ports;

        asker_endpoints(h, asker, &local, &remote);
        /* Connections to these are ours: the hold resets them (agentd's, clients'). */
        n_ports = http_server_ports(h->http, ports, ELEMENTSOF(ports));
        *ret = (TcpBlockers) {};
        for (size_t i = 0; i < ELEMENTSOF(tables); i++) {
                _cleanup_buffer_ Buffer text = BUFFER_NULL;
                int r = read_table(tables[i], &text);

                if (r == -ENOENT)
                        continue;
                if (r < 0)
                        return log_error_errno(r, "Cannot read %s: %m", tables[i]);
                tcp_blockers_scan((const char *) buffer_data(&text), &local, &remote, ports, n_ports, ret);
        }
        return 0;
}

static void respond_blocked(HttpConn *c, const TcpBlockers *b) {
        _cleanup_free_ char *error = NULL;
        json_t *list = json_array();

        for (size_t i = 0; list && i < b->n; i++)
                (void) json_array_append_new(list, json_string(b->text[i]));
        if (asprintf(&error, "%zu TCP connection%s in the sandbox would keep it from being saved (%zu named)",
                     b->total, b->total == 1 ? "" : "s", b->n) < 0)
                error = NULL;
        log_info("Not holding still: %s.", strna(error));
        if (!error) {
                json_decref(list);
                list = NULL;
        }
        /* (NULL: a 500 for out of memory) */
        (void) http_conn_respond_json(c, 409, list ? json_pack("{s:s,s:o}", "error", error, "connections", list) : NULL);
}

/* A connection this runtime ended with a FIN (where the kernel cannot say what the peer has,
 * socket-drain.h) may sit in TIME_WAIT for gVisor's minute, unlisted and unsaveable: until then
 * the answer is 409 with when to try again. true: answered so. */
static bool refused_for_time_wait(CheckpointHold *h, HttpConn *c) {
        uint64_t fin = socket_drain_last_fin_usec(), now = 0;
        _cleanup_free_ char *error = NULL;
        unsigned wait;

        if (fin == 0 || sd_event_now(h->event, CLOCK_MONOTONIC, &now) < 0 || now >= fin + TIME_WAIT_USEC)
                return false;
        wait = (unsigned) ((fin + TIME_WAIT_USEC - now + 999999) / 1000000);
        if (asprintf(&error, "a connection the runtime ended %llu s ago may still be in TIME_WAIT, which gVisor "
                     "cannot save: try again in %u s", (unsigned long long) ((now - fin) / 1000000), wait) < 0)
                error = NULL;
        log_info("Not holding still: %s.", strna(error));
        (void) http_conn_respond_json(c, 409, error ? json_pack("{s:s,s:[],s:i}", "error", error, "connections",
                                                                "retry_after", (int) wait) : NULL);
        return true;
}

static void resume(CheckpointHold *h, const char *why) {
        int r;

        if (!h->held)
                return;
        (void) sd_event_source_set_enabled(h->timer, SD_EVENT_OFF);
        h->held = false;
        r = http_server_set_accepting(h->http, true);
        if (r < 0) {
                /* Nobody could reach this runtime any more: its supervisor starts it again. */
                log_error_errno(r, "Cannot listen again after holding still (%s): %m", why);
                (void) sd_event_exit(h->event, EXIT_FAILURE);
                return;
        }
        log_info("Listening again (%s).", why);
}

/* Stop accepting, then reset every connection but the asker's. 0, or why it could not. */
static int hold(CheckpointHold *h, HttpConn *asker) {
        uint64_t now;
        int r;

        r = http_server_set_accepting(h->http, false);
        if (r < 0) {
                (void) http_server_set_accepting(h->http, true);
                return log_error_errno(r, "Cannot stop listening to hold still: %m");
        }
        http_server_reset_connections(h->http, asker);
        if (h->proxy)
                proxy_reset_connections(h->proxy);

        r = sd_event_now(h->event, CLOCK_MONOTONIC, &now);
        if (r >= 0)
                r = sd_event_source_set_time(h->timer, now + HOLD_MAX_USEC);
        if (r >= 0)
                r = sd_event_source_set_enabled(h->timer, SD_EVENT_ONESHOT);
        if (r < 0) {
                (void) http_server_set_accepting(h->http, true);
                return log_error_errno(r, "Cannot set the time to listen again: %m");
        }
        if (!h->held)
                log_info("Holding still for a checkpoint: not accepting, every other connection reset; listening "
                         "again at SIGUSR2, or in %llu s.", (unsigned long long) (HOLD_MAX_USEC / 1000000));
        h->held = true;
        return 0;
}

static void on_request(HttpConn *c, void *data) {
        CheckpointHold *h = data;
        TcpBlockers blockers;

        http_conn_detach_handler(c);
        if (refused_for_time_wait(h, c))
                return;
        if (find_blockers(h, c, &blockers) < 0) {
                (void) http_conn_respond_error(c, 500, 500, "cannot read the sandbox's TCP connections");
                return;
        }
        if (blockers.total > 0) {
                respond_blocked(c, &blockers);
                return;
        }
        if (hold(h, c) < 0) {
                (void) http_conn_respond_error(c, 500, 500, "cannot stop listening");
                return;
        }
        /* Queued now, sent at the loop's next turn: everything else is reset by then. */
        (void) http_conn_respond_json(c, 200, json_pack("{s:b}", "held", 1));
}

static const HttpHandler hold_handler = { .request = on_request };

static void route(HttpConn *c, const char *path, void *userdata) {
        CheckpointHold *h = userdata;

        if (!streq(path, HOLD_PATH)) {
                (void) http_conn_respond_error(c, 404, 404, "not found");
                return;
        }
        /* As every endpoint that takes the runtime's token answers a request without it. */
        if (!rpc_request_token_ok(h->rpc, c->access_token, http_conn_bearer_token(c))) {
                (void) http_conn_respond_error(c, 401, 401,
                                               "this runtime wants its token: Authorization: Bearer TOKEN or X-Access-Token");
                return;
        }
        if (c->method != HTTP_METHOD_POST) {
                (void) http_conn_respond_error(c, 405, 405, "POST only");
                return;
        }
        /* Once the whole request is in (its body, if any, is dropped). */
        http_conn_set_handler(c, &hold_handler, h, 0);
}

static int on_sigusr2(sd_event_source *s, const struct signalfd_siginfo *si, void *userdata) {
        CheckpointHold *h = userdata;

        if (!h->held)
                log_debug("SIGUSR2 while not holding still: nothing to do.");
        resume(h, "SIGUSR2");
        return 0;
}

static int on_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        resume(userdata, "no SIGUSR2 came");
        return 0;
}

int checkpoint_hold_new(sd_event *event, HttpServer *http, Proxy *proxy, Rpc *rpc, CheckpointHold **ret) {
        CheckpointHold *h = calloc(1, sizeof(*h));
        int r;

        if (!h)
                return -ENOMEM;
        *h = (CheckpointHold) { .event = sd_event_ref(event), .http = http, .proxy = proxy, .rpc = rpc };
        r = sd_event_add_signal(event, &h->sigusr2, SIGUSR2, on_sigusr2, h);
        if (r >= 0)
                r = sd_event_add_time(event, &h->timer, CLOCK_MONOTONIC, 0, 1000 * 1000, on_timer, h);
        if (r >= 0)
                r = sd_event_source_set_enabled(h->timer, SD_EVENT_OFF);
        if (r >= 0)
                r = http_server_add_route(http, "/runtime/", route, h);
        if (r < 0) {
                checkpoint_hold_free(h);
                return log_error_errno(r, "Cannot set up %s: %m", HOLD_PATH);
        }
        *ret = h;
        return 0;
}

CheckpointHold *checkpoint_hold_free(CheckpointHold *h) {
        if (!h)
                return NULL;
        h->sigusr2 = sd_event_source_disable_unref(h->sigusr2);
        h->timer = sd_event_source_disable_unref(h->timer);
        sd_event_unref(h->event);
        return mfree(h);
}

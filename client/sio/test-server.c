/* SPDX-License-Identifier: MIT */
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <strings.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>

#include <cmocka.h>
#include <curl/curl.h>

#include "buffer.h"
#include "macro.h"
#include "test-server.h"

/* ---- agentix-server ---------------------------------------------------------------------------- */

static pid_t running[16];

static void running_add(pid_t pid) {
        for (size_t i = 0; i < ELEMENTSOF(running); i++)
                if (running[i] == 0) {
                        running[i] = pid;
                        return;
                }
        fail_msg("too many servers");
}

static void running_remove(pid_t pid) {
        for (size_t i = 0; i < ELEMENTSOF(running); i++)
                if (running[i] == pid)
                        running[i] = 0;
}

int test_server_kill_all(void **state) {
        for (size_t i = 0; i < ELEMENTSOF(running); i++)
                if (running[i] > 0) {
                        (void) kill(running[i], SIGKILL);
                        (void) waitpid(running[i], NULL, 0);
                        running[i] = 0;
                }
        return 0;
}

unsigned test_free_port(void) {
        struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        socklen_t sl = sizeof(sa);
        _cleanup_close_ int fd = -EBADF;

        fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        assert_true(fd >= 0);
        assert_int_equal(bind(fd, (struct sockaddr *) &sa, sizeof(sa)), 0);
        assert_int_equal(getsockname(fd, (struct sockaddr *) &sa, &sl), 0);
        return ntohs(sa.sin_port);
}

static size_t discard(char *data, size_t size, size_t n, void *userdata) {
        return size * n;
}

static bool health_ok(unsigned port) {
        char url[64];
        long status = 0;
        CURL *e = curl_easy_init();
        CURLcode r;

        assert_non_null(e);
        snprintf(url, sizeof(url), "http://127.0.0.1:%u/health", port);
        (void) curl_easy_setopt(e, CURLOPT_URL, url);
        (void) curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, 1000L);
        (void) curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
        (void) curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, discard);
        r = curl_easy_perform(e);
        (void) curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &status);
        curl_easy_cleanup(e);
        return r == CURLE_OK && status == 200;
}

void test_server_start(TestServer *s, unsigned port, const char *const *extra) {
        const char *server = getenv("AGENTIX_SERVER");
        char port_s[16];
        const char *argv[32] = {};
        size_t n = 0;
        pid_t pid;

        assert_non_null(server);
        *s = (TestServer) { .port = port ?: test_free_port() };
        snprintf(port_s, sizeof(port_s), "%u", s->port);
        snprintf(s->url, sizeof(s->url), "http://127.0.0.1:%u", s->port);

        argv[n++] = server;
        argv[n++] = "--host";
        argv[n++] = "127.0.0.1";
        argv[n++] = "--port";
        argv[n++] = port_s;
        for (size_t i = 0; extra && extra[i]; i++) {
                assert_true(n < ELEMENTSOF(argv) - 1);
                argv[n++] = extra[i];
        }

        pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                /* Never outlive the test, however it ends. */
                (void) prctl(PR_SET_PDEATHSIG, SIGKILL);
                setenv("AGENTIX_TOKEN", "t", 1);
                execv(server, (char *const *) argv);
                _exit(127);
        }
        s->pid = pid;
        running_add(pid);

        for (int i = 0; i < 200; i++) {
                int status;
                if (health_ok(s->port))
                        return;
                assert_int_equal(waitpid(pid, &status, WNOHANG), 0); /* it must not have died */
                (void) nanosleep(&(struct timespec) { .tv_nsec = 50 * 1000 * 1000 }, NULL);
        }
        fail_msg("agentix-server did not answer /health on port %u", s->port);
}

void test_server_stop(TestServer *s) {
        int status;

        if (s->pid <= 0)
                return;
        assert_int_equal(kill(s->pid, SIGTERM), 0);
        assert_int_equal(waitpid(s->pid, &status, 0), s->pid);
        running_remove(s->pid);
        s->pid = 0;
        assert_true(WIFEXITED(status));
        assert_int_equal(WEXITSTATUS(status), 0);
}

/* ---- the relay --------------------------------------------------------------------------------- */

#define RELAY_BUFFER_MAX (1024u * 1024u)

typedef struct Pair Pair;

typedef struct Side {
        Pair *pair;
        int fd;
        sd_event_source *io;
        Buffer out; /* bytes waiting to be written to this side */
        bool eof;   /* read EOF from this side */
} Side;

struct Pair {
        TestRelay *relay;
        Side client, upstream;
        bool relaying; /* past the first request's header */
        Pair *next;
};

struct TestRelay {
        sd_event *event;
        unsigned target_port;
        int fd;
        unsigned port;
        unsigned refused;
        sd_event_source *accept_source;
        Pair *pairs;
};

static void side_done(Side *s) {
        sd_event_source_disable_unref(s->io);
        s->io = NULL;
        s->fd = safe_close(s->fd);
        buffer_done(&s->out);
}

static void pair_free(Pair *p) {
        for (Pair **q = &p->relay->pairs; *q; q = &(*q)->next)
                if (*q == p) {
                        *q = p->next;
                        break;
                }
        side_done(&p->client);
        side_done(&p->upstream);
        free(p);
}

static Side *other(Side *s) {
        return s == &s->pair->client ? &s->pair->upstream : &s->pair->client;
}

static void side_update(Side *s) {
        uint32_t events = 0;

        if (!s->io)
                return;
        if (!s->eof && other(s)->out.len < RELAY_BUFFER_MAX && (s->pair->relaying || s == &s->pair->client))
                events |= EPOLLIN;
        if (s->out.len > 0)
                events |= EPOLLOUT;
        (void) sd_event_source_set_io_events(s->io, events);
}

static int connect_upstream(Pair *p) {
        struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK),
                                  .sin_port = htons(p->relay->target_port) };
        int fd;

        fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return -errno;
        /* Loopback: a blocking connect is immediate. */
        if (connect(fd, (struct sockaddr *) &sa, sizeof(sa)) < 0) {
                safe_close(fd);
                return -errno;
        }
        (void) setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &(int) { 1 }, sizeof(int));
        (void) fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
        return fd;
}

static int on_side_io(sd_event_source *source, int fd, uint32_t revents, void *userdata);

/* The first request's header is complete in upstream.out: refuse an upgrade, or start relaying. */
static bool first_request(Pair *p) {
        Buffer *h = &p->upstream.out;
        const char *text;

        (void) buffer_append_byte(h, 0);
        h->len--;
        text = (const char *) buffer_data(h);
        if (!strstr(text, "\r\n\r\n"))
                return true; /* wait for more */

        if (strcasestr(text, "\r\nupgrade: websocket") || strcasestr(text, "\r\nupgrade:websocket")) {
                static const char resp[] = "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
                p->relay->refused++;
                (void) !write(p->client.fd, resp, STRLEN(resp));
                pair_free(p);
                return false;
        }

        p->upstream.fd = connect_upstream(p);
        if (p->upstream.fd < 0 ||
            sd_event_add_io(p->relay->event, &p->upstream.io, p->upstream.fd, EPOLLIN, on_side_io, &p->upstream) < 0) {
                pair_free(p);
                return false;
        }
        p->relaying = true;
        side_update(&p->upstream);
        return true;
}

static int on_side_io(sd_event_source *source, int fd, uint32_t revents, void *userdata) {
        Side *s = userdata, *o = other(s);
        Pair *p = s->pair;

        if (revents & EPOLLOUT && s->out.len > 0) {
                ssize_t k = write(s->fd, buffer_data(&s->out), s->out.len);
                if (k < 0 && errno != EAGAIN) {
                        pair_free(p);
                        return 0;
                }
                if (k > 0)
                        buffer_consume(&s->out, (size_t) k);
        }
        if (revents & (EPOLLIN | EPOLLHUP | EPOLLERR) && !s->eof) {
                uint8_t buf[64 * 1024];
                ssize_t k = read(s->fd, buf, sizeof(buf));
                if (k < 0 && errno != EAGAIN) {
                        pair_free(p);
                        return 0;
                }
                if (k == 0)
                        s->eof = true;
                if (k > 0) {
                        assert_int_equal(buffer_append(&o->out, buf, (size_t) k), 0);
                        if (!p->relaying && !first_request(p))
                                return 0;
                }
        }
        /* One side is done and everything it sent was passed on: close both. */
        if ((s->eof && o->out.len == 0) || (o->eof && s->out.len == 0)) {
                pair_free(p);
                return 0;
        }
        side_update(s);
        side_update(o);
        return 0;
}

static int on_relay_accept(sd_event_source *source, int fd, uint32_t revents, void *userdata) {
        TestRelay *r = userdata;
        Pair *p;
        int cfd;

        cfd = accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (cfd < 0)
                return 0;
        p = calloc(1, sizeof(*p));
        assert_non_null(p);
        p->relay = r;
        p->client = (Side) { .pair = p, .fd = cfd };
        p->upstream = (Side) { .pair = p, .fd = -EBADF };
        assert_int_equal(sd_event_add_io(r->event, &p->client.io, cfd, EPOLLIN, on_side_io, &p->client), 0);
        p->next = r->pairs;
        r->pairs = p;
        return 0;
}

TestRelay *test_relay_new(sd_event *event, unsigned target_port) {
        struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        socklen_t sl = sizeof(sa);
        TestRelay *r;

        r = calloc(1, sizeof(*r));
        assert_non_null(r);
        r->event = event;
        r->target_port = target_port;
        r->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        assert_true(r->fd >= 0);
        assert_int_equal(bind(r->fd, (struct sockaddr *) &sa, sizeof(sa)), 0);
        assert_int_equal(listen(r->fd, 64), 0);
        assert_int_equal(getsockname(r->fd, (struct sockaddr *) &sa, &sl), 0);
        r->port = ntohs(sa.sin_port);
        assert_int_equal(sd_event_add_io(event, &r->accept_source, r->fd, EPOLLIN, on_relay_accept, r), 0);
        return r;
}

unsigned test_relay_port(const TestRelay *r) {
        return r->port;
}

unsigned test_relay_refused(const TestRelay *r) {
        return r->refused;
}

void test_relay_free(TestRelay *r) {
        if (!r)
                return;
        while (r->pairs)
                pair_free(r->pairs);
        sd_event_source_disable_unref(r->accept_source);
        safe_close(r->fd);
        free(r);
}

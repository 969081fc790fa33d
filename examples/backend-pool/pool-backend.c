/* SPDX-License-Identifier: MIT */
/* An agentd backend built outside the agentix tree, against the installed agentix/agentd-backend.h
 * and agentd-backend.pc only: "pool" hands out agentix runtimes that already run (started by
 * hand, on other machines, or pre-warmed), one sandbox per runtime, from
 *
 *     AGENTIX_POOL="http://10.0.0.5:8000=TOKEN http://10.0.0.6:8000=TOKEN"
 *
 * A create takes a free runtime and is ready once its /health answers; a delete gives it
 * back. What it shows: the constructor reads its settings from the environment and fails
 * before anything is made, and every wait is a source on agentd's loop (sd_event_default()). */
#include <arpa/inet.h>
#include <sys/epoll.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <systemd/sd-event.h>

#include <agentix/agentd-backend.h>

#define POOL_ENV "AGENTIX_POOL"
#define POOL_MAX 64
#define HEALTH_TIMEOUT_USEC (10ULL * 1000 * 1000)

typedef struct Runtime {
        char *url, *token;
        struct sockaddr_in addr;
        char sandbox[32];         /* the sandbox it serves, "" when free */
} Runtime;

struct AgentdBackend {
        sd_event *event;
        Runtime runtimes[POOL_MAX];
        size_t n;
};

struct AgentdJob {
        AgentdBackend *b;
        Runtime *runtime;
        agentd_made_t made;
        void *userdata;
        int fd;
        sd_event_source *io, *timeout;
        char reply[64];
        size_t got;
        int sent;
};

static int fail(char **ret_error, const char *fmt, const char *value) {
        if (asprintf(ret_error, fmt, value) < 0)
                *ret_error = NULL;
        return -EINVAL;
}

/* "http://IPV4:PORT=TOKEN" */
static int parse_runtime(const char *word, Runtime *rt) {
        char host[64];
        unsigned port;
        int n = 0;
        const char *eq = strchr(word, '=');

        if (!eq || sscanf(word, "http://%63[0-9.]:%u%n", host, &port, &n) != 2 || word + n != eq || port == 0 ||
            port > 65535 || !eq[1])
                return -EINVAL;
        rt->addr.sin_family = AF_INET;
        rt->addr.sin_port = htons((uint16_t) port);
        if (inet_pton(AF_INET, host, &rt->addr.sin_addr) != 1)
                return -EINVAL;
        rt->url = strndup(word, (size_t) (eq - word));
        rt->token = strdup(eq + 1);
        return rt->url && rt->token ? 0 : -ENOMEM;
}

static void pool_free(AgentdBackend *b) {
        if (!b)
                return;
        for (size_t i = 0; i < b->n; i++) {
                free(b->runtimes[i].url);
                free(b->runtimes[i].token);
        }
        sd_event_unref(b->event);
        free(b);
}

static int pool_new(AgentdBackend **ret, char **ret_error) {
        const char *v = getenv(POOL_ENV);
        AgentdBackend *b;
        char *copy, *save = NULL;
        int r = 0;

        if (!v || !*v)
                return fail(ret_error, "%s is not set: list the runtimes to hand out, like "
                            "%s=\"http://127.0.0.1:8000=TOKEN\"", POOL_ENV);
        b = calloc(1, sizeof(*b));
        copy = strdup(v);
        if (!b || !copy) {
                free(b);
                free(copy);
                return -ENOMEM;
        }
        for (char *w = strtok_r(copy, " \t", &save); w && r >= 0; w = strtok_r(NULL, " \t", &save)) {
                if (b->n == POOL_MAX)
                        r = fail(ret_error, "%s lists more than 64 runtimes", POOL_ENV);
                else if (parse_runtime(w, &b->runtimes[b->n]) < 0)
                        r = fail(ret_error, POOL_ENV ": this entry is not http://IPV4:PORT=TOKEN: %s", w);
                else
                        b->n++;
        }
        free(copy);
        if (r >= 0)
                r = sd_event_default(&b->event);
        if (r < 0) {
                pool_free(b);
                return r;
        }
        *ret = b;
        return 0;
}

static void job_free(AgentdJob *j) {
        sd_event_source_disable_unref(j->io);
        sd_event_source_disable_unref(j->timeout);
        if (j->fd >= 0)
                close(j->fd);
        free(j);
}

static void finish(AgentdJob *j, const char *error_name, const char *message) {
        AgentdSandboxPlace place = { .runtime_url = j->runtime->url, .token = j->runtime->token };

        if (error_name)
                j->runtime->sandbox[0] = 0; /* back in the pool */
        j->made(j->userdata, error_name ? NULL : &place, error_name, message);
        job_free(j);
}

/* Every runtime is taken: say so from the loop (made() must not run before *ret_job is set). */
static int on_exhausted(sd_event_source *s, void *userdata) {
        AgentdJob *j = userdata;
        char message[128];

        snprintf(message, sizeof(message), "All %zu runtimes of " POOL_ENV " serve a sandbox: delete one first", j->b->n);
        j->made(j->userdata, NULL, AGENTD_ERROR_TOO_MANY_SANDBOXES, message);
        job_free(j);
        return 0;
}

/* Connected: send GET /health, then read until the status line shows. */
static int on_io(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        AgentdJob *j = userdata;
        char req[] = "GET /health HTTP/1.0\r\n\r\n";
        ssize_t n;

        if (!j->sent) {
                int err = 0;
                socklen_t len = sizeof(err);
                if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0 || err ||
                    send(fd, req, sizeof(req) - 1, MSG_NOSIGNAL) != (ssize_t) sizeof(req) - 1) {
                        finish(j, AGENTD_ERROR_START_FAILED, "The pool's runtime does not answer");
                        return 0;
                }
                j->sent = 1;
                return sd_event_source_set_io_events(s, EPOLLIN);
        }
        n = recv(fd, j->reply + j->got, sizeof(j->reply) - 1 - j->got, 0);
        if (n > 0) {
                j->got += (size_t) n;
                j->reply[j->got] = 0;
                if (!strstr(j->reply, "\r\n") && j->got < sizeof(j->reply) - 1)
                        return 0;
        }
        if (strstr(j->reply, " 200 "))
                finish(j, NULL, NULL);
        else
                finish(j, AGENTD_ERROR_START_FAILED, "The pool's runtime is not healthy (GET /health is not 200)");
        return 0;
}

static int on_timeout(sd_event_source *s, uint64_t usec, void *userdata) {
        finish(userdata, AGENTD_ERROR_START_FAILED, "The pool's runtime did not answer /health within 10 s");
        return 0;
}

static int pool_create(AgentdBackend *b, const AgentdSandboxSpec *spec, agentd_made_t made, void *userdata,
                       AgentdJob **ret_job) {
        Runtime *rt = NULL;
        AgentdJob *j;
        int r;

        for (size_t i = 0; i < b->n && !rt; i++)
                if (!b->runtimes[i].sandbox[0])
                        rt = &b->runtimes[i];
        j = calloc(1, sizeof(*j));
        if (!j)
                return -ENOMEM;
        *j = (AgentdJob) { .b = b, .runtime = rt, .made = made, .userdata = userdata, .fd = -1 };
        if (!rt)
                r = sd_event_add_defer(b->event, &j->io, on_exhausted, j);
        else
                r = sd_event_add_time_relative(b->event, &j->timeout, CLOCK_MONOTONIC, HEALTH_TIMEOUT_USEC, 0,
                                               on_timeout, j);
        if (r >= 0 && rt) {
                j->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
                if (j->fd < 0 || (connect(j->fd, (struct sockaddr *) &rt->addr, sizeof(rt->addr)) < 0 &&
                                  errno != EINPROGRESS))
                        r = -errno;
                else
                        r = sd_event_add_io(b->event, &j->io, j->fd, EPOLLOUT, on_io, j);
        }
        if (r < 0) {
                job_free(j);
                return r;
        }
        if (rt)
                snprintf(rt->sandbox, sizeof(rt->sandbox), "%s", spec->id);
        *ret_job = j;
        return 0;
}

static void pool_cancel(AgentdJob *j) {
        job_free(j);
}

static int pool_remove(AgentdBackend *b, const char *sandbox_id, agentd_removed_t removed, void *userdata) {
        for (size_t i = 0; i < b->n; i++)
                if (strcmp(b->runtimes[i].sandbox, sandbox_id) == 0)
                        b->runtimes[i].sandbox[0] = 0;
        if (removed)
                removed(userdata, NULL, NULL);
        return 0;
}

AGENTD_BACKEND_DEFINE(
        .abi = AGENTD_BACKEND_ABI,
        .name = "pool",
        .new = pool_new,
        .free = pool_free,
        .create = pool_create,
        .cancel = pool_cancel,
        .remove = pool_remove,
);

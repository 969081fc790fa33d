/* SPDX-License-Identifier: MIT */
#include "buffer.h"
#include "curl-event.h"
#include "docker-client.h"
#include "log.h"

#define DEFAULT_TIMEOUT_USEC (30ULL * 1000 * 1000)
#define MAX_ANSWER (64u * 1024 * 1024)

struct DockerRequest {
        DockerClient *client;
        DockerRequest *prev, *next;
        CURL *easy;
        struct curl_slist *headers;
        char *method, *path, *body;
        uint64_t timeout_usec;
        Buffer answer;
        docker_reply_t reply;
        docker_line_t on_line;    /* a stream: lines go here as they come */
        docker_raw_t raw;         /* the answer as bytes, not JSON */
        void *userdata;
        void (*destroy)(void *userdata);
        bool unversioned;         /* GET /version: the one path without a version prefix */
        bool started;
};

struct DockerClient {
        sd_event *event;
        CurlEvent *curl;
        char *socket;
        char *version;
        uint64_t timeout_usec;
        bool negotiating;
        DockerRequest *requests;     /* every request not yet answered */
};

static void request_free(DockerRequest *r, bool answered) {
        DockerClient *d = r->client;

        if (!answered && r->destroy)
                r->destroy(r->userdata);
        if (r->started)
                curl_event_remove(d->curl, r->easy);
        if (r->prev)
                r->prev->next = r->next;
        else if (d->requests == r)
                d->requests = r->next;
        if (r->next)
                r->next->prev = r->prev;
        if (r->easy)
                curl_easy_cleanup(r->easy);
        curl_slist_free_all(r->headers);
        free(r->method);
        free(r->path);
        free(r->body);
        buffer_done(&r->answer);
        free(r);
}

void docker_request_cancel(DockerRequest *r) {
        if (r)
                request_free(r, false);
}

void docker_request_set_destroy(DockerRequest *r, void (*destroy)(void *userdata)) {
        r->destroy = destroy;
}

DockerClient *docker_client_free(DockerClient *d) {
        if (!d)
                return NULL;
        while (d->requests)
                request_free(d->requests, false);
        curl_event_free(d->curl);
        sd_event_unref(d->event);
        free(d->socket);
        free(d->version);
        free(d);
        return NULL;
}

const char *docker_client_version(DockerClient *d) {
        return d->version;
}

static size_t on_data(char *data, size_t size, size_t n, void *userdata) {
        DockerRequest *r = userdata;
        uint8_t *nl;

        if (r->answer.len + size * n > MAX_ANSWER)
                return 0;
        if (buffer_append(&r->answer, data, size * n) < 0)
                return 0;
        /* A stream hands over each complete line and keeps the rest. */
        while (r->on_line && (nl = memchr(buffer_data(&r->answer), '\n', r->answer.len))) {
                size_t len = nl - buffer_data(&r->answer);
                json_t *j = json_loadb((const char *) buffer_data(&r->answer), len, 0, NULL);

                if (j) {
                        r->on_line(r->client, j, r->userdata);
                        json_decref(j);
                }
                buffer_consume(&r->answer, len + 1);
        }
        return size * n;
}

static void deliver(DockerRequest *r, int status, const char *error) {
        json_t *body = NULL;
        docker_reply_t reply = r->reply;
        void *userdata = r->userdata;
        DockerClient *d = r->client;

        if (r->raw) {
                docker_raw_t raw = r->raw;
                Buffer answer = r->answer;
                r->answer = (Buffer) BUFFER_NULL;
                request_free(r, true);
                raw(d, status, buffer_data(&answer), answer.len, error, userdata);
                buffer_done(&answer);
                return;
        }

        if (r->answer.len > 0)
                body = json_loadb((const char *) buffer_data(&r->answer), r->answer.len, JSON_DECODE_ANY, NULL);
        request_free(r, true);
        reply(d, status, body, error, userdata);
        json_decref(body);
}

static void on_done(CurlEvent *g, CURL *easy, CURLcode result, void *userdata) {
        DockerRequest *r = userdata;
        long status = 0;

        r->started = false;
        if (result != CURLE_OK) {
                int err = result == CURLE_OPERATION_TIMEDOUT ? -ETIMEDOUT
                        : result == CURLE_COULDNT_CONNECT  ? -ECONNREFUSED
                                                           : -EIO;
                char msg[256];
                snprintf(msg, sizeof(msg), "Docker at %s: %s", r->client->socket, curl_easy_strerror(result));
                deliver(r, err, msg);
                return;
        }
        curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &status);
        deliver(r, (int) status, NULL);
}

static int request_start(DockerRequest *r) {
        DockerClient *d = r->client;
        char url[4096];

        if ((r->unversioned ? snprintf(url, sizeof(url), "http://docker%s", r->path)
                            : snprintf(url, sizeof(url), "http://docker/v%s%s", d->version, r->path)) >= (int) sizeof(url))
                return -ENAMETOOLONG;
        r->easy = curl_easy_init();
        if (!r->easy)
                return -ENOMEM;
        r->headers = curl_slist_append(NULL, "Content-Type: application/json");
        if (!r->headers)
                return -ENOMEM;
        curl_easy_setopt(r->easy, CURLOPT_UNIX_SOCKET_PATH, d->socket);
        curl_easy_setopt(r->easy, CURLOPT_URL, url);
        curl_easy_setopt(r->easy, CURLOPT_CUSTOMREQUEST, r->method);
        curl_easy_setopt(r->easy, CURLOPT_HTTPHEADER, r->headers);
        curl_easy_setopt(r->easy, CURLOPT_WRITEFUNCTION, on_data);
        curl_easy_setopt(r->easy, CURLOPT_WRITEDATA, r);
        curl_easy_setopt(r->easy, CURLOPT_NOSIGNAL, 1L);
        if (!r->on_line)
                curl_easy_setopt(r->easy, CURLOPT_TIMEOUT_MS, (long) (r->timeout_usec / 1000));
        curl_easy_setopt(r->easy, CURLOPT_CONNECTTIMEOUT_MS, (long) MIN(r->timeout_usec / 1000, 10000ULL));
        if (r->body) {
                curl_easy_setopt(r->easy, CURLOPT_POSTFIELDS, r->body);
                curl_easy_setopt(r->easy, CURLOPT_POSTFIELDSIZE, (long) strlen(r->body));
        } else if (streq(r->method, "POST"))
                curl_easy_setopt(r->easy, CURLOPT_POSTFIELDSIZE, 0L);
        int k = curl_event_add(d->curl, r->easy, on_done, r);
        if (k < 0)
                return k;
        r->started = true;
        return 0;
}

/* Requests made before the version was known go out now, or fail with the negotiation. */
static void flush_waiting(DockerClient *d, int status, const char *error) {
        for (DockerRequest *r = d->requests, *next; r; r = next) {
                next = r->next;
                if (r->started || r->unversioned)
                        continue;
                if (status < 0 || !d->version) {
                        deliver(r, status < 0 ? status : -EPROTO, error ?: "Docker did not say which API it speaks");
                        next = d->requests; /* the list may have changed under the reply */
                        continue;
                }
                int k = request_start(r);
                if (k < 0)
                        deliver(r, k, "cannot start a request to Docker");
                next = d->requests;
        }
}

static void on_version(DockerClient *d, int status, json_t *body, const char *error, void *userdata) {
        const char *v = json_string_value(json_object_get(body, "ApiVersion"));

        d->negotiating = false;
        if (status == 200 && v) {
                free(d->version);
                d->version = strdup(v);
                log_info("The Engine API at %s speaks version %s.", d->socket, v);
        } else
                log_warning("Docker at %s did not answer GET /version (%s).", d->socket,
                            error ?: json_string_value(json_object_get(body, "message")) ?: "no version");
        flush_waiting(d, status == 200 && v ? 0 : (status < 0 ? status : -EPROTO), error);
}

void docker_client_set_timeout(DockerClient *d, uint64_t usec) {
        d->timeout_usec = usec ?: DEFAULT_TIMEOUT_USEC;
}

int docker_client_new(sd_event *event, const char *socket, DockerClient **ret) {
        DockerClient *d = calloc(1, sizeof(*d));
        int r;

        if (!d)
                return -ENOMEM;
        d->timeout_usec = DEFAULT_TIMEOUT_USEC;
        d->event = sd_event_ref(event);
        d->socket = strdup(socket);
        if (!d->socket) {
                docker_client_free(d);
                return -ENOMEM;
        }
        r = curl_event_new(event, &d->curl);
        if (r < 0) {
                docker_client_free(d);
                return r;
        }
        /* Idle connections kept for reuse: a few, however many requests a burst had in flight
         * (curl's default keeps four per request, each an open fd). */
        (void) curl_multi_setopt(curl_event_multi(d->curl), CURLMOPT_MAXCONNECTS, (long) DOCKER_IDLE_CONNECTIONS);
        *ret = d;
        return 0;
}

/* A request in the client's list, not started. */
static DockerRequest *request_alloc(DockerClient *d, const char *method, const char *path, json_t *body,
                                    uint64_t timeout_usec, docker_line_t on_line, docker_reply_t reply, void *userdata) {
        DockerRequest *r = calloc(1, sizeof(*r));

        if (!r)
                return NULL;
        *r = (DockerRequest) { .client = d, .reply = reply, .on_line = on_line, .userdata = userdata,
                               .timeout_usec = timeout_usec ?: d->timeout_usec };
        r->method = strdup(method);
        r->path = strdup(path);
        r->body = body ? json_dumps(body, JSON_COMPACT) : NULL;
        r->next = d->requests;
        if (d->requests)
                d->requests->prev = r;
        d->requests = r;
        if (!r->method || !r->path || (body && !r->body)) {
                request_free(r, false);
                return NULL;
        }
        return r;
}

/* GET /version, which the requests made meanwhile wait for. */
static int negotiate(DockerClient *d, uint64_t timeout_usec) {
        DockerRequest *r = request_alloc(d, "GET", "/version", NULL, timeout_usec, NULL, on_version, NULL);
        int k;

        if (!r)
                return -ENOMEM;
        r->unversioned = true;
        k = request_start(r);
        if (k < 0) {
                request_free(r, false);
                return k;
        }
        d->negotiating = true;
        return 0;
}

static int request_new(DockerClient *d, const char *method, const char *path, json_t *body, uint64_t timeout_usec,
                       docker_line_t on_line, docker_reply_t reply, docker_raw_t raw, void *userdata,
                       DockerRequest **ret) {
        DockerRequest *r = request_alloc(d, method, path, body, timeout_usec, on_line, reply, userdata);
        int k;

        if (!r)
                return -ENOMEM;
        r->raw = raw;
        if (d->version)
                k = request_start(r);
        else if (!d->negotiating)
                k = negotiate(d, r->timeout_usec);
        else
                k = 0;
        if (k < 0) {
                request_free(r, false);
                return k;
        }
        if (ret)
                *ret = r;
        return 0;
}

int docker_request(DockerClient *d, const char *method, const char *path, json_t *body, uint64_t timeout_usec,
                   docker_reply_t reply, void *userdata, DockerRequest **ret) {
        return request_new(d, method, path, body, timeout_usec, NULL, reply, NULL, userdata, ret);
}

int docker_stream(DockerClient *d, const char *path, docker_line_t on_line, docker_reply_t reply, void *userdata,
                  DockerRequest **ret) {
        return request_new(d, "GET", path, NULL, 0, on_line, reply, NULL, userdata, ret);
}

int docker_request_raw(DockerClient *d, const char *path, docker_raw_t reply, void *userdata, DockerRequest **ret) {
        return request_new(d, "GET", path, NULL, 0, NULL, NULL, reply, userdata, ret);
}

const char *docker_error_message(int status, json_t *body, const char *error, char *buf, size_t size) {
        const char *m = json_string_value(json_object_get(body, "message"));

        if (m)
                return m;
        if (error)
                return error;
        snprintf(buf, size, "Docker answered HTTP %d", status);
        return buf;
}

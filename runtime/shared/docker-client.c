/* SPDX-License-Identifier: MIT */
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

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
        char *socket;             /* what messages name: the socket's path, or tcp://HOST:PORT */
        char *unix_path;          /* a unix socket, or NULL: over TCP to base */
        char *base;               /* http://docker, or http(s)://HOST:PORT */
        char *tls_ca, *tls_cert, *tls_key; /* client TLS (docker_client_set_tls()), or NULL */
        char *version;
        uint64_t timeout_usec;
        bool negotiating;
        DockerRequest *requests;     /* every request not yet answered */
        CURL *blocking;              /* the blocking calls' handle (its connection is reused) */
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
        if (d->blocking)
                curl_easy_cleanup(d->blocking);
        sd_event_unref(d->event);
        free(d->socket);
        free(d->unix_path);
        free(d->base);
        free(d->tls_ca);
        free(d->tls_cert);
        free(d->tls_key);
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

/* Where the daemon is and how to reach it: the part of every request that is the client's. */
static void setup_transport(DockerClient *d, CURL *easy) {
        if (d->unix_path)
                curl_easy_setopt(easy, CURLOPT_UNIX_SOCKET_PATH, d->unix_path);
        else
                curl_easy_setopt(easy, CURLOPT_NOPROXY, "*"); /* the Engine API is never proxied */
        if (d->tls_ca) {
                curl_easy_setopt(easy, CURLOPT_CAINFO, d->tls_ca);
                curl_easy_setopt(easy, CURLOPT_SSLCERT, d->tls_cert);
                curl_easy_setopt(easy, CURLOPT_SSLKEY, d->tls_key);
        }
        curl_easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);
}

static int request_start(DockerRequest *r) {
        DockerClient *d = r->client;
        char url[4096];

        if ((r->unversioned ? snprintf(url, sizeof(url), "%s%s", d->base, r->path)
                            : snprintf(url, sizeof(url), "%s/v%s%s", d->base, d->version, r->path)) >= (int) sizeof(url))
                return -ENAMETOOLONG;
        r->easy = curl_easy_init();
        if (!r->easy)
                return -ENOMEM;
        r->headers = curl_slist_append(NULL, "Content-Type: application/json");
        if (!r->headers)
                return -ENOMEM;
        setup_transport(d, r->easy);
        curl_easy_setopt(r->easy, CURLOPT_URL, url);
        curl_easy_setopt(r->easy, CURLOPT_CUSTOMREQUEST, r->method);
        curl_easy_setopt(r->easy, CURLOPT_HTTPHEADER, r->headers);
        curl_easy_setopt(r->easy, CURLOPT_WRITEFUNCTION, on_data);
        curl_easy_setopt(r->easy, CURLOPT_WRITEDATA, r);
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

int docker_client_set_tls(DockerClient *d, const char *ca, const char *cert, const char *key) {
        char *base;

        if (d->unix_path)
                return -EPROTONOSUPPORT;
        if (asprintf(&base, "https://%s", d->base + strlen("http://")) < 0)
                base = NULL;
        d->tls_ca = strdup(ca);
        d->tls_cert = strdup(cert);
        d->tls_key = strdup(key);
        if (!base || !d->tls_ca || !d->tls_cert || !d->tls_key) {
                free(base);
                return -ENOMEM;
        }
        free(d->base);
        d->base = base;
        return 0;
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
        d->event = event ? sd_event_ref(event) : NULL;
        d->socket = strdup(socket);
        if (startswith(socket, "tcp://")) {
                if (asprintf(&d->base, "http://%s", socket + 6) < 0)
                        d->base = NULL;
        } else {
                d->unix_path = strdup(startswith(socket, "unix://") ?: socket);
                d->base = strdup("http://docker");
        }
        if (!d->socket || !d->base || (!d->unix_path && !startswith(socket, "tcp://"))) {
                docker_client_free(d);
                return -ENOMEM;
        }
        if (event) {
                r = curl_event_new(event, &d->curl);
                if (r < 0) {
                        docker_client_free(d);
                        return r;
                }
                /* Idle connections kept for reuse: a few, however many requests a burst had in
                 * flight (curl's default keeps four per request, each an open fd). */
                (void) curl_multi_setopt(curl_event_multi(d->curl), CURLMOPT_MAXCONNECTS,
                                         (long) DOCKER_IDLE_CONNECTIONS);
        }
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
        DockerRequest *r;
        int k;

        if (!d->curl)
                return -EOPNOTSUPP; /* a client for blocking calls only */
        r = request_alloc(d, method, path, body, timeout_usec, on_line, reply, userdata);
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

static size_t collect(char *data, size_t size, size_t n, void *userdata) {
        Buffer *b = userdata;

        if (b->len + size * n > MAX_ANSWER || buffer_append(b, data, size * n) < 0)
                return 0;
        return size * n;
}

/* One blocking request; unversioned: the path as it is (GET /version, /info). */
static int call_blocking(DockerClient *d, const char *method, const char *path, bool unversioned, int body_fd,
                         const char *content_type, Buffer *ret_answer, char **ret_error) {
        _cleanup_free_ char *url = NULL, *type_header = NULL;
        _cleanup_(fclosep) FILE *body = NULL;
        struct curl_slist *headers = NULL;
        char err[CURL_ERROR_SIZE] = "";
        long status = 0;
        CURLcode c;

        if ((unversioned ? asprintf(&url, "%s%s", d->base, path)
                         : asprintf(&url, "%s/v%s%s", d->base, d->version, path)) < 0)
                return -ENOMEM;
        if (!d->blocking && !(d->blocking = curl_easy_init()))
                return -ENOMEM;
        curl_easy_reset(d->blocking);
        setup_transport(d, d->blocking);
        curl_easy_setopt(d->blocking, CURLOPT_URL, url);
        curl_easy_setopt(d->blocking, CURLOPT_CUSTOMREQUEST, method);
        curl_easy_setopt(d->blocking, CURLOPT_WRITEFUNCTION, collect);
        curl_easy_setopt(d->blocking, CURLOPT_WRITEDATA, ret_answer);
        curl_easy_setopt(d->blocking, CURLOPT_ERRORBUFFER, err);
        curl_easy_setopt(d->blocking, CURLOPT_TIMEOUT_MS, (long) (d->timeout_usec / 1000));
        curl_easy_setopt(d->blocking, CURLOPT_CONNECTTIMEOUT_MS, (long) MIN(d->timeout_usec / 1000, 10000ULL));
        if (body_fd >= 0) {
                struct stat st;
                int fd;

                if (fstat(body_fd, &st) < 0)
                        return message_set_first(ret_error, -errno, "cannot read the request's body: %m");
                fd = fcntl(body_fd, F_DUPFD_CLOEXEC, 3);
                if (fd < 0 || !(body = fdopen(fd, "re"))) {
                        if (fd >= 0)
                                close(fd);
                        return message_set_first(ret_error, -errno, "cannot read the request's body: %m");
                }
                if (asprintf(&type_header, "Content-Type: %s", content_type ?: "application/octet-stream") < 0 ||
                    !(headers = curl_slist_append(NULL, type_header)))
                        return -ENOMEM;
                curl_easy_setopt(d->blocking, CURLOPT_UPLOAD, 1L);
                curl_easy_setopt(d->blocking, CURLOPT_READDATA, body);
                curl_easy_setopt(d->blocking, CURLOPT_INFILESIZE_LARGE, (curl_off_t) st.st_size);
                curl_easy_setopt(d->blocking, CURLOPT_HTTPHEADER, headers);
        } else if (streq(method, "POST"))
                curl_easy_setopt(d->blocking, CURLOPT_POSTFIELDSIZE, 0L);
        c = curl_easy_perform(d->blocking);
        curl_slist_free_all(headers);
        if (c == CURLE_COULDNT_CONNECT && d->unix_path) {
                long os_errno = 0;

                /* curl names "docker port 80"; the socket and why it refused say more. */
                curl_easy_getinfo(d->blocking, CURLINFO_OS_ERRNO, &os_errno);
                return message_set_first(ret_error, -ECONNREFUSED, "cannot reach Docker at %s: %s (is dockerd running?)",
                                         d->unix_path, strerror(os_errno ? (int) os_errno : ECONNREFUSED));
        }
        if (c != CURLE_OK)
                return message_set_first(ret_error, c == CURLE_OPERATION_TIMEDOUT ? -ETIMEDOUT : -EHOSTUNREACH,
                                         "cannot reach Docker at %s: %s", d->socket, *err ? err : curl_easy_strerror(c));
        curl_easy_getinfo(d->blocking, CURLINFO_RESPONSE_CODE, &status);
        return (int) status;
}

int docker_negotiate_blocking(DockerClient *d, char **ret_error) {
        _cleanup_buffer_ Buffer answer = BUFFER_NULL;
        json_t *j;
        const char *v;
        int status;

        status = call_blocking(d, "GET", "/version", true, -1, NULL, &answer, ret_error);
        if (status < 0)
                return status;
        j = json_loadb((const char *) buffer_data(&answer), answer.len, 0, NULL);
        v = json_string_value(json_object_get(j, "ApiVersion"));
        if (status != 200 || !v) {
                json_decref(j);
                return message_set_first(ret_error, -EPROTO, "Docker at %s answered GET /version with HTTP %d, "
                                         "without an API version", d->socket, status);
        }
        free(d->version);
        d->version = strdup(v);
        json_decref(j);
        return d->version ? 0 : -ENOMEM;
}

int docker_call(DockerClient *d, const char *method, const char *path, int body_fd, const char *content_type,
                Buffer *ret_answer, char **ret_error) {
        int r;

        if (!d->version) {
                r = docker_negotiate_blocking(d, ret_error);
                if (r < 0)
                        return r;
        }
        return call_blocking(d, method, path, false, body_fd, content_type, ret_answer, ret_error);
}

int docker_get_blocking(DockerClient *d, const char *path, json_t **ret, char **ret_error) {
        _cleanup_buffer_ Buffer answer = BUFFER_NULL;
        int status;

        status = call_blocking(d, "GET", path, true, -1, NULL, &answer, ret_error);
        if (status < 0)
                return status;
        *ret = status == 200 ? json_loadb((const char *) buffer_data(&answer), answer.len, 0, NULL) : NULL;
        if (!*ret)
                return message_set_first(ret_error, -EPROTO, "%s answered GET %s with HTTP %d, not Docker's JSON",
                                         d->socket, path, status);
        return 0;
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

char *docker_escape(const char *s) {
        char *e = curl_easy_escape(NULL, s, 0), *copy;

        copy = e ? strdup(e) : NULL;
        curl_free(e);
        return copy;
}

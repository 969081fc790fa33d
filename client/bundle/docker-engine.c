/* SPDX-License-Identifier: MIT */
#include <curl/curl.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdarg.h>
#include <sys/stat.h>

#include "buffer.h"
#include "docker-engine.h"
#include "docker-host.h"
#include "macro.h"

#define LOAD_TIMEOUT_S 600

static inline void curl_freep(char **p) {
        curl_free(*p);
}
#define _cleanup_curl_free_ _cleanup_(curl_freep)

struct DockerEngine {
        CURL *curl;
        char *socket;
        char *version;            /* "1.41" */
};

static size_t on_body(char *data, size_t size, size_t n, void *userdata) {
        return buffer_append(userdata, data, size * n) < 0 ? 0 : size * n;
}

#define set_error(ret_error, ...) message_set_first((ret_error), -EIO, __VA_ARGS__)

/* The "message" of an Engine API error body, else the body itself. */
static char *error_message(const Buffer *body) {
        json_t *j = json_loadb((const char *) buffer_data(body), body->len, 0, NULL);
        const char *m = j ? json_string_value(json_object_get(j, "message")) : NULL;
        char *s = m ? strdup(m) : strndup((const char *) buffer_data(body) ?: "", MIN(body->len, (size_t) 200));

        json_decref(j);
        if (s)
                s[strcspn(s, "\n")] = 0;
        return s;
}

/* One request. body_fd >= 0: upload that file as the body. Returns the HTTP status. */
static int request(DockerEngine *d, const char *method, const char *path, int body_fd, Buffer *ret_body,
                   char **ret_error) {
        char url[2048], err[CURL_ERROR_SIZE] = "";
        struct curl_slist *headers = NULL;
        FILE *body = NULL;
        long status = 0;
        CURLcode c;

        if (d->version)
                snprintf(url, sizeof(url), "http://docker/v%s%s", d->version, path);
        else
                snprintf(url, sizeof(url), "http://docker%s", path);
        curl_easy_reset(d->curl);
        curl_easy_setopt(d->curl, CURLOPT_UNIX_SOCKET_PATH, d->socket);
        curl_easy_setopt(d->curl, CURLOPT_URL, url);
        curl_easy_setopt(d->curl, CURLOPT_CUSTOMREQUEST, method);
        curl_easy_setopt(d->curl, CURLOPT_WRITEFUNCTION, on_body);
        curl_easy_setopt(d->curl, CURLOPT_WRITEDATA, ret_body);
        curl_easy_setopt(d->curl, CURLOPT_ERRORBUFFER, err);
        curl_easy_setopt(d->curl, CURLOPT_CONNECTTIMEOUT, 10L);
        curl_easy_setopt(d->curl, CURLOPT_TIMEOUT, (long) LOAD_TIMEOUT_S);
        curl_easy_setopt(d->curl, CURLOPT_NOSIGNAL, 1L);
        if (body_fd >= 0) {
                struct stat st;
                if (fstat(body_fd, &st) < 0 || !(body = fdopen(dup(body_fd), "re")))
                        return set_error(ret_error, "cannot read the image archive: %m");
                headers = curl_slist_append(headers, "Content-Type: application/x-tar");
                curl_easy_setopt(d->curl, CURLOPT_UPLOAD, 1L);
                curl_easy_setopt(d->curl, CURLOPT_CUSTOMREQUEST, method);
                curl_easy_setopt(d->curl, CURLOPT_READDATA, body);
                curl_easy_setopt(d->curl, CURLOPT_INFILESIZE_LARGE, (curl_off_t) st.st_size);
                curl_easy_setopt(d->curl, CURLOPT_HTTPHEADER, headers);
        } else if (streq(method, "POST"))
                curl_easy_setopt(d->curl, CURLOPT_POSTFIELDSIZE, 0L);
        c = curl_easy_perform(d->curl);
        curl_slist_free_all(headers);
        if (body)
                fclose(body);
        if (c != CURLE_OK)
                return set_error(ret_error, "cannot reach Docker at %s: %s", d->socket, *err ? err : curl_easy_strerror(c));
        curl_easy_getinfo(d->curl, CURLINFO_RESPONSE_CODE, &status);
        return (int) status;
}

int docker_engine_open(DockerEngine **ret, char **ret_error) {
        _cleanup_buffer_ Buffer body = BUFFER_NULL;
        DockerEngine *d;
        json_t *j;
        const char *v;
        int status;

        d = calloc(1, sizeof(*d));
        if (!d)
                return -ENOMEM;
        status = docker_socket_from_env(&d->socket);
        if (status == -EPROTONOSUPPORT) {
                docker_engine_free(d);
                return set_error(ret_error, "DOCKER_HOST=%s: only unix:// sockets are supported", getenv("DOCKER_HOST")),
                       -EPROTONOSUPPORT;
        }
        d->curl = curl_easy_init();
        if (!d->curl || !d->socket) {
                docker_engine_free(d);
                return -ENOMEM;
        }
        status = request(d, "GET", "/version", -1, &body, ret_error);
        if (status < 0) {
                docker_engine_free(d);
                return status;
        }
        j = json_loadb((const char *) buffer_data(&body), body.len, 0, NULL);
        v = j ? json_string_value(json_object_get(j, "ApiVersion")) : NULL;
        if (status != 200 || !v) {
                json_decref(j);
                status = set_error(ret_error, "Docker at %s answered GET /version with HTTP %d", d->socket, status);
                docker_engine_free(d);
                return status;
        }
        d->version = strdup(v);
        json_decref(j);
        if (!d->version) {
                docker_engine_free(d);
                return -ENOMEM;
        }
        *ret = d;
        return 0;
}

DockerEngine *docker_engine_free(DockerEngine *d) {
        if (!d)
                return NULL;
        if (d->curl)
                curl_easy_cleanup(d->curl);
        free(d->socket);
        free(d->version);
        free(d);
        return NULL;
}

int docker_image_exists(DockerEngine *d, const char *ref, char **ret_error) {
        _cleanup_buffer_ Buffer body = BUFFER_NULL;
        _cleanup_curl_free_ char *escaped = curl_easy_escape(d->curl, ref, 0);
        _cleanup_free_ char *path = NULL;
        int status;

        if (!escaped || asprintf(&path, "/images/%s/json", escaped) < 0)
                return -ENOMEM;
        status = request(d, "GET", path, -1, &body, ret_error);
        if (status < 0)
                return status;
        if (status == 200)
                return 1;
        if (status == 404)
                return 0;
        _cleanup_free_ char *m = error_message(&body);
        return set_error(ret_error, "Docker: cannot inspect %s: HTTP %d: %s", ref, status, strna(m));
}

int docker_image_load(DockerEngine *d, const char *path, char **ret_error) {
        _cleanup_buffer_ Buffer body = BUFFER_NULL;
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
        int status;

        if (fd < 0)
                return set_error(ret_error, "cannot read %s: %m", path);
        status = request(d, "POST", "/images/load?quiet=1", fd, &body, ret_error);
        if (status < 0)
                return status;
        if (status != 200) {
                _cleanup_free_ char *m = error_message(&body);
                return set_error(ret_error, "Docker refused the image: HTTP %d: %s", status, strna(m));
        }
        /* A stream of JSON messages; a failure is one with "error". */
        if (buffer_append_byte(&body, 0) < 0)
                return -ENOMEM;
        for (char *line = (char *) buffer_data(&body), *next; line && *line; line = next) {
                json_t *j;
                const char *e;

                next = strchr(line, '\n');
                if (next)
                        *next++ = 0;
                j = json_loads(line, 0, NULL);
                e = j ? json_string_value(json_object_get(j, "error")) : NULL;
                if (e) {
                        set_error(ret_error, "Docker could not load the image: %s", e);
                        json_decref(j);
                        return -EIO;
                }
                json_decref(j);
        }
        return 0;
}

int docker_image_tag(DockerEngine *d, const char *ref, const char *repo, const char *tag, char **ret_error) {
        _cleanup_buffer_ Buffer body = BUFFER_NULL;
        _cleanup_curl_free_ char *r_esc = curl_easy_escape(d->curl, repo, 0), *t_esc = curl_easy_escape(d->curl, tag, 0);
        _cleanup_free_ char *path = NULL;
        int status;

        if (!r_esc || !t_esc || asprintf(&path, "/images/%s/tag?repo=%s&tag=%s", ref, r_esc, t_esc) < 0)
                return -ENOMEM;
        status = request(d, "POST", path, -1, &body, ret_error);
        if (status < 0)
                return status;
        if (status != 201 && status != 200) {
                _cleanup_free_ char *m = error_message(&body);
                return set_error(ret_error, "Docker: cannot tag %s as %s:%s: HTTP %d: %s", ref, repo, tag, status, strna(m));
        }
        return 0;
}

/* SPDX-License-Identifier: MIT */
#include <fcntl.h>
#include <jansson.h>

#include "buffer.h"
#include "docker-engine.h"
#include "docker-host.h"
#include "macro.h"

/* Loading a bundle of some hundred MiB into a busy dockerd takes a while. */
#define LOAD_TIMEOUT_USEC (600ULL * 1000 * 1000)

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

int docker_engine_open(DockerClient **ret, char **ret_error) {
        _cleanup_free_ char *socket = NULL;
        DockerClient *d;
        int r;

        r = docker_socket_from_env(&socket);
        if (r == -EPROTONOSUPPORT)
                return message_set_first(ret_error, r, "DOCKER_HOST=%s: only unix:// sockets are supported",
                                         getenv("DOCKER_HOST"));
        if (r < 0)
                return r;
        r = docker_client_new(NULL, socket, &d);
        if (r < 0)
                return r;
        docker_client_set_timeout(d, LOAD_TIMEOUT_USEC);
        r = docker_negotiate_blocking(d, ret_error);
        if (r < 0) {
                docker_client_free(d);
                return r;
        }
        *ret = d;
        return 0;
}

int docker_image_exists(DockerClient *d, const char *ref, char **ret_error) {
        _cleanup_buffer_ Buffer body = BUFFER_NULL;
        _cleanup_free_ char *escaped = docker_escape(ref), *path = NULL;
        int status;

        if (!escaped || asprintf(&path, "/images/%s/json", escaped) < 0)
                return -ENOMEM;
        status = docker_call(d, "GET", path, -1, NULL, &body, ret_error);
        if (status < 0)
                return status;
        if (status == 200)
                return 1;
        if (status == 404)
                return 0;
        _cleanup_free_ char *m = error_message(&body);
        return set_error(ret_error, "Docker: cannot inspect %s: HTTP %d: %s", ref, status, strna(m));
}

int docker_image_load(DockerClient *d, const char *path, char **ret_error) {
        _cleanup_buffer_ Buffer body = BUFFER_NULL;
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
        int status;

        if (fd < 0)
                return set_error(ret_error, "cannot read %s: %m", path);
        status = docker_call(d, "POST", "/images/load?quiet=1", fd, "application/x-tar", &body, ret_error);
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

int docker_image_tag(DockerClient *d, const char *ref, const char *repo, const char *tag, char **ret_error) {
        _cleanup_buffer_ Buffer body = BUFFER_NULL;
        _cleanup_free_ char *r_esc = docker_escape(repo), *t_esc = docker_escape(tag), *path = NULL;
        int status;

        if (!r_esc || !t_esc || asprintf(&path, "/images/%s/tag?repo=%s&tag=%s", ref, r_esc, t_esc) < 0)
                return -ENOMEM;
        status = docker_call(d, "POST", path, -1, NULL, &body, ret_error);
        if (status < 0)
                return status;
        if (status != 201 && status != 200) {
                _cleanup_free_ char *m = error_message(&body);
                return set_error(ret_error, "Docker: cannot tag %s as %s:%s: HTTP %d: %s", ref, repo, tag, status, strna(m));
        }
        return 0;
}

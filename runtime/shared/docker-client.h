/* SPDX-License-Identifier: MIT */
#pragma once

/* The Docker Engine API client of every program that talks to Docker (agentd's engine and swarm
 * backends, agentixctl build): requests over the daemon's unix socket, or TCP with TLS, with
 * libcurl. On sd-event (curl-event.h), never blocking the loop; or blocking, for a program with
 * no loop (docker_call()). The API version is negotiated once (GET /version) before the first
 * request goes out; requests made meanwhile wait for it. A slow or hung Docker delays only the
 * requests sent to it. */

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <systemd/sd-event.h>

#include "buffer.h"

/* Idle connections to the daemon kept open for the next requests. */
#define DOCKER_IDLE_CONNECTIONS 4

typedef struct DockerClient DockerClient;
typedef struct DockerRequest DockerRequest;

/* status: the HTTP status, or a negative errno when no answer came (-ETIMEDOUT, -ECONNREFUSED,
 * …; `error` then says what curl said). body: the answer parsed as JSON when it is JSON, else
 * NULL (borrowed: valid during the call). */
typedef void (*docker_reply_t)(DockerClient *d, int status, json_t *body, const char *error, void *userdata);

/* socket: a unix socket's path (docker_socket_from_env()) or unix://PATH, or tcp://HOST:PORT.
 * event NULL: a client for the blocking calls only (the others fail with -EOPNOTSUPP). */
int docker_client_new(sd_event *event, const char *socket, DockerClient **ret);
/* Over TCP only (-EPROTONOSUPPORT on a unix socket): HTTPS, the server checked against the CA
 * file and this client known by its certificate and key (files, PEM), as `docker --tlsverify`. */
int docker_client_set_tls(DockerClient *d, const char *ca, const char *cert, const char *key);
DockerClient *docker_client_free(DockerClient *d);

/* The timeout of requests that name none, and of the blocking calls (default 30 s). */
void docker_client_set_timeout(DockerClient *d, uint64_t usec);

/* "1.41" once negotiated, else NULL. */
const char *docker_client_version(DockerClient *d);

/* Send METHOD /v<version><path> with body (NULL: none; borrowed) and call reply once, from
 * the event loop. timeout_usec 0: the client's default (30 s). ret may be NULL. */
int docker_request(DockerClient *d, const char *method, const char *path, json_t *body, uint64_t timeout_usec,
                   docker_reply_t reply, void *userdata, DockerRequest **ret);
/* A long-lived request whose answer is a stream of JSON lines (GET /events): on_line gets each
 * line as it arrives (borrowed), reply once the stream ends or failed. No timeout. */
typedef void (*docker_line_t)(DockerClient *d, json_t *line, void *userdata);
int docker_stream(DockerClient *d, const char *path, docker_line_t on_line, docker_reply_t reply, void *userdata,
                  DockerRequest **ret);

/* GET path, whose answer is not JSON (a container's logs): reply gets the bytes as they came
 * (at most 64 MiB; borrowed). status as for docker_reply_t; on an error status, data is Docker's
 * answer (JSON with a message). */
typedef void (*docker_raw_t)(DockerClient *d, int status, const void *data, size_t size, const char *error,
                             void *userdata);
int docker_request_raw(DockerClient *d, const char *path, docker_raw_t reply, void *userdata, DockerRequest **ret);

/* What frees the request's userdata when it is dropped unanswered (cancelled, or the client
 * freed): a reply that never comes cannot free it. */
void docker_request_set_destroy(DockerRequest *r, void (*destroy)(void *userdata));

/* ---- blocking ------------------------------------------------------------------------------ */

/* GET /version, waiting for the answer: the API version the calls use (docker_call() does it
 * itself when it is not known). On failure *ret_error says why. */
int docker_negotiate_blocking(DockerClient *d, char **ret_error);
/* METHOD /v<version><path>, waiting for the answer (the version negotiated first, the same
 * way, when it is not known yet). body_fd >= 0: that file's bytes are the body, sent as
 * content_type. Returns the HTTP status, the answer in *ret_answer (at most 64 MiB); without an
 * answer a negative errno, and *ret_error (malloc'ed) says why. */
int docker_call(DockerClient *d, const char *method, const char *path, int body_fd, const char *content_type,
                Buffer *ret_answer, char **ret_error);
/* GET path (unversioned, as /info), waiting for the answer: for a backend's new(), before
 * agentd's loop runs. *ret: the answer's JSON (HTTP 200 only); else *ret_error says why. */
int docker_get_blocking(DockerClient *d, const char *path, json_t **ret, char **ret_error);

/* Forget a request: its reply is never called. */
void docker_request_cancel(DockerRequest *r);

/* Docker's message for a failed request: body.message, else "HTTP <status>". */
const char *docker_error_message(int status, json_t *body, const char *error, char *buf, size_t size);

/* A string escaped for a URL's query or path (malloc'ed). */
char *docker_escape(const char *s);

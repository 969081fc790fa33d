/* SPDX-License-Identifier: MIT */
/* envd's plain HTTP file transfer (e2b-envd-files.h), what the `e2b` SDK's files.read and
 * files.write send to a sandbox's port 49983:
 *
 *   GET  /files?path=P&username=U   the file's bytes (fs::read_stream, streamed as they come)
 *   POST /files?path=P&username=U   multipart/form-data, a part "file" per file (its filename
 *                                   the path when there is no P, or more than one file), or
 *                                   application/octet-stream (the body is P's bytes, inflated
 *                                   in the worker with Content-Encoding: gzip); written
 *                                   with fs::upload (atomically, parents made); answers
 *                                   [{"path", "name", "type": "file"}]
 *
 * Relative paths are below U's home (without U, the default user's: e2b-envd-entry.h). Both
 * run as U (fs-as-user.h): they reach only what U may read or write, whatever links U planted,
 * and what an upload makes is U's. Errors are envd's:
 * {"code": STATUS, "message"} with 400, 401, 403, 404, 413 or 500. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "e2b-envd-entry.h"
#include "e2b-envd-files.h"
#include "envelope.h"
#include "json-msgpack.h"
#include "macro.h"
#include "mp-check.h"
#include "multipart.h"

#define FILES_UPLOAD_MAX (256u * 1024u * 1024u - 1024u * 1024u) /* under the worker's message bound */
#define FILES_CHUNK (256u * 1024u)

typedef struct FilesRequest {
        Rpc *rpc;
        HttpConn *conn;
        RpcCall *call;
        EnvdUser user;          /* ?username, else the default: relative paths are below its home,
                                 * and what an upload makes is its own */
        char *path;             /* ?path, absolute; NULL when not given (an upload by file names) */
        char content_type[256];
        bool gzip;              /* Content-Encoding: gzip (octet-stream only): the worker inflates it */
        char **written;         /* an upload's paths, for the answer */
        size_t n_written;
        uint64_t uncredited;    /* a download's bytes sent on, not yet credited to the worker */
} FilesRequest;

static void request_free(FilesRequest *q) {
        if (!q)
                return;
        free(q->path);
        for (size_t i = 0; i < q->n_written; i++)
                free(q->written[i]);
        free(q->written);
        free(q);
}

static void request_finish(FilesRequest *q) {
        if (q->conn)
                http_conn_detach_handler(q->conn);
        request_free(q);
}

static void respond_error(HttpConn *c, unsigned status, const char *message) {
        (void) http_conn_respond_json(c, status, json_pack("{s:i,s:s}", "code", (int) status, "message", message));
}

/* An fs:: error code (a failed call's type, or a result's "error") as envd's status. */
static unsigned status_of(const char *fs_error) {
        if (!fs_error)
                return 500;
        if (streq(fs_error, "file_not_found"))
                return 404;
        if (streq(fs_error, "permission_denied"))
                return 403;
        if (streq(fs_error, "invalid_path") || streq(fs_error, "is_directory") || streq(fs_error, "not_a_directory"))
                return 400;
        return 500;
}

/* ---- download ----------------------------------------------------------------------------- */

static void download_item(RpcCall *c, const uint8_t *payload, size_t size, void *userdata) {
        FilesRequest *q = userdata;
        const msgpack_object *value;
        msgpack_unpacked u;
        size_t off = 0;

        msgpack_unpacked_init(&u);
        if (mp_check(payload, size) < 0 ||
            msgpack_unpack_next(&u, (const char *) payload, size, &off) != MSGPACK_UNPACK_SUCCESS ||
            !(value = mp_map_get(&u.data, "value")) || value->type != MSGPACK_OBJECT_BIN) {
                msgpack_unpacked_destroy(&u);
                rpc_call_local_credit(c, size);
                return;
        }
        if (!q->conn->streaming)
                (void) http_conn_stream_begin(q->conn, 200, "application/octet-stream");
        (void) http_conn_stream_write(q->conn, value->via.bin.ptr, value->via.bin.size);
        msgpack_unpacked_destroy(&u);
        /* Credited once the client has taken it (drained): a slow reader slows the read. */
        q->uncredited += size;
        if (http_conn_pending(q->conn) == 0) {
                rpc_call_local_credit(c, q->uncredited);
                q->uncredited = 0;
        }
}

static void download_done(RpcCall *c, const char *event, const uint8_t *data, size_t size, void *userdata) {
        FilesRequest *q = userdata;

        q->call = NULL;
        if (streq(event, "call:error") || !data) {
                _cleanup_free_ char *type = NULL, *message = NULL;

                rpc_error_of(data, size, &type, &message);
                if (q->conn->streaming)
                        (void) http_conn_stream_end(q->conn); /* cut short: the length will not match */
                else
                        respond_error(q->conn, status_of(type), message ?: "the file could not be read");
        } else if (q->conn->streaming)
                (void) http_conn_stream_end(q->conn);
        else
                (void) http_conn_respond(q->conn, 200, "application/octet-stream", NULL); /* empty */
        request_finish(q);
}

static const RpcLocalHandlers download_handlers = {
        .item = download_item,
        .done = download_done,
};

static void download_start(FilesRequest *q) {
        _cleanup_buffer_ Buffer args = BUFFER_NULL, kwargs = BUFFER_NULL;
        msgpack_packer pk;
        int r = 0;

        mp_packer_init_buffer(&pk, &args);
        r |= msgpack_pack_array(&pk, 2);
        r |= mp_pack_cstr(&pk, q->path);
        r |= msgpack_pack_uint32(&pk, FILES_CHUNK);
        /* Read as the user: what a link it planted points to is read only if it may read it. */
        mp_packer_init_buffer(&pk, &kwargs);
        r |= envd_pack_owner_kwargs(&pk, &q->user, 0);
        if (r == 0)
                r = rpc_call_local(q->rpc, "fs::read_stream", "stream", &args, &kwargs, &download_handlers, q, &q->call);
        if (r < 0) {
                respond_error(q->conn, r == -EBUSY ? 503 : 500, "the worker cannot take the call now");
                request_finish(q);
        }
}

static void on_drained(HttpConn *c, void *userdata) {
        FilesRequest *q = userdata;

        if (q->call && q->uncredited > 0 && http_conn_pending(c) == 0) {
                rpc_call_local_credit(q->call, q->uncredited);
                q->uncredited = 0;
        }
}

/* ---- upload -------------------------------------------------------------------------------- */

static void upload_done(RpcCall *c, const char *event, const uint8_t *data, size_t size, void *userdata) {
        FilesRequest *q = userdata;
        const msgpack_object *value;
        msgpack_unpacked u;
        size_t off = 0;
        json_t *out;

        q->call = NULL;
        if (data && streq(event, "call:error")) {
                _cleanup_free_ char *type = NULL, *message = NULL;

                /* permission_denied: the worker may not act as the user. */
                rpc_error_of(data, size, &type, &message);
                respond_error(q->conn, status_of(type), message ?: "the worker could not write the files");
                request_finish(q);
                return;
        }
        msgpack_unpacked_init(&u);
        if (!data || !streq(event, "call:result") || mp_check(data, size) < 0 ||
            msgpack_unpack_next(&u, (const char *) data, size, &off) != MSGPACK_UNPACK_SUCCESS ||
            !(value = mp_map_get(&u.data, "value")) || value->type != MSGPACK_OBJECT_ARRAY) {
                msgpack_unpacked_destroy(&u);
                respond_error(q->conn, 500, "the worker could not write the files");
                request_finish(q);
                return;
        }
        /* The first file that failed says why; the others were written (each atomically). */
        for (uint32_t i = 0; i < value->via.array.size; i++) {
                const char *error, *message;
                size_t error_n, message_n;
                char code[64], text[512] = "the file could not be written";

                if (mp_map_get_str(&value->via.array.ptr[i], "error", &error, &error_n) < 0 || error_n >= sizeof(code))
                        continue;
                memcpy(code, error, error_n);
                code[error_n] = 0;
                if (mp_map_get_str(&value->via.array.ptr[i], "message", &message, &message_n) >= 0)
                        snprintf(text, sizeof(text), "%.*s", (int) message_n, message);
                msgpack_unpacked_destroy(&u);
                respond_error(q->conn, status_of(code), text);
                request_finish(q);
                return;
        }
        msgpack_unpacked_destroy(&u);
        out = json_array();
        for (size_t i = 0; out && i < q->n_written; i++) {
                const char *name = strrchr(q->written[i], '/');
                (void) json_array_append_new(out, json_pack("{s:s,s:s,s:s}", "path", q->written[i], "name",
                                                            name ? name + 1 : q->written[i], "type", "file"));
        }
        (void) http_conn_respond_json(q->conn, 200, out);
        request_finish(q);
}

static void upload_item(RpcCall *c, const uint8_t *payload, size_t size, void *userdata) {
        rpc_call_local_credit(c, size); /* unary: none */
}

static const RpcLocalHandlers upload_handlers = {
        .item = upload_item,
        .done = upload_done,
};

/* Add one file: its absolute path (kept for the answer) and bytes, packed for fs::upload. */
static int add_file(FilesRequest *q, msgpack_packer *pk, const char *path, const void *data, size_t size) {
        char *abs = path[0] == '/' ? strdup(path) : envd_absolute_path(q->user.home, path);
        char **l;
        int r = 0;

        if (!abs)
                return -ENOMEM;
        l = realloc(q->written, (q->n_written + 1) * sizeof(char *));
        if (!l) {
                free(abs);
                return -ENOMEM;
        }
        q->written = l;
        q->written[q->n_written++] = abs;
        r |= msgpack_pack_array(pk, 2);
        r |= mp_pack_cstr(pk, abs);
        r |= msgpack_pack_bin(pk, size);
        r |= msgpack_pack_bin_body(pk, data, size);
        return r ? -ENOMEM : 0;
}

static void upload_start(FilesRequest *q, HttpConn *c) {
        _cleanup_buffer_ Buffer args = BUFFER_NULL, kwargs = BUFFER_NULL;
        _cleanup_free_ MultipartPart *parts = NULL;
        char boundary[MULTIPART_BOUNDARY_MAX + 1];
        size_t n_parts = 0, n_files = 0;
        msgpack_packer pk;
        int r = 0;

        mp_packer_init_buffer(&pk, &args);
        if (q->gzip && strncasecmp(q->content_type, "application/octet-stream", 24) != 0) {
                respond_error(c, 400, "Content-Encoding: gzip is taken with application/octet-stream uploads only");
                request_finish(q);
                return;
        }
        if (strncasecmp(q->content_type, "application/octet-stream", 24) == 0) {
                if (!q->path) {
                        respond_error(c, 400, "an application/octet-stream upload needs ?path");
                        request_finish(q);
                        return;
                }
                r |= msgpack_pack_array(&pk, 1);
                r |= msgpack_pack_array(&pk, 1);
                r |= add_file(q, &pk, q->path, buffer_data(&c->body), c->body.len);
        } else {
                if (multipart_boundary(q->content_type, boundary) < 0 ||
                    multipart_parse(buffer_data(&c->body), c->body.len, boundary, &parts, &n_parts) < 0) {
                        respond_error(c, 400, "the body is not multipart/form-data with its boundary");
                        request_finish(q);
                        return;
                }
                for (size_t i = 0; i < n_parts; i++)
                        n_files += streq(parts[i].name, "file");
                if (n_files == 0) {
                        respond_error(c, 400, "no part named \"file\" in the form");
                        request_finish(q);
                        return;
                }
                r |= msgpack_pack_array(&pk, 1);
                r |= msgpack_pack_array(&pk, n_files);
                for (size_t i = 0; i < n_parts && r == 0; i++) {
                        /* ?path names the one file; with several, each part's file name does. */
                        const char *path = q->path && n_files == 1 ? q->path : parts[i].filename;

                        if (!streq(parts[i].name, "file"))
                                continue;
                        if (!path[0]) {
                                respond_error(c, 400, "a file part without a file name, and no ?path");
                                request_finish(q);
                                return;
                        }
                        r = add_file(q, &pk, path, parts[i].data, parts[i].size);
                }
        }
        mp_packer_init_buffer(&pk, &kwargs);
        r |= envd_pack_owner_kwargs(&pk, &q->user, q->gzip);
        if (q->gzip) {
                r |= mp_pack_cstr(&pk, "encoding");
                r |= mp_pack_cstr(&pk, "gzip");
        }
        if (r == 0)
                r = rpc_call_local(q->rpc, "fs::upload", "unary", &args, &kwargs, &upload_handlers, q, &q->call);
        buffer_done(&c->body); /* packed into args: not kept twice */
        if (r < 0) {
                respond_error(c, r == -EBUSY ? 503 : 500, "the worker cannot take the call now");
                request_finish(q);
        }
}

/* ---- requests ------------------------------------------------------------------------------ */

static void on_request(HttpConn *c, void *data) {
        FilesRequest *q = data;

        if (c->body_oversized) {
                respond_error(c, 413, "the upload is larger than the runtime takes (255 MiB)");
                request_finish(q);
                return;
        }
        if (c->method == HTTP_METHOD_GET)
                download_start(q);
        else
                upload_start(q, c);
}

static void on_closed(HttpConn *c, void *data) {
        FilesRequest *q = data;

        q->conn = NULL;
        rpc_call_local_abandon(q->call);
        request_free(q);
}

static const HttpHandler handler = {
        .request = on_request,
        .drained = on_drained,
        .closed = on_closed,
};

static void route(HttpConn *c, const char *path, void *userdata) {
        Rpc *rpc = userdata;
        char value[4096], user[256] = "";
        FilesRequest *q;
        int n;

        if (!streq(path, "/files")) {
                respond_error(c, 404, "not found");
                return;
        }
        if (!rpc_request_token_ok(rpc, c->access_token, http_conn_bearer_token(c))) {
                respond_error(c, 401, "this runtime wants its token: X-Access-Token");
                return;
        }
        if (c->method != HTTP_METHOD_GET && c->method != HTTP_METHOD_POST) {
                respond_error(c, 405, "/files takes GET and POST");
                return;
        }
        q = calloc(1, sizeof(FilesRequest));
        if (!q) {
                respond_error(c, 500, "out of memory");
                return;
        }
        *q = (FilesRequest) { .rpc = rpc, .conn = c };
        (void) http_conn_query(c, "username", user, sizeof(user));
        if (envd_user_named(user, &q->user) < 0) {
                respond_error(c, 400, "no such user in this sandbox");
                request_free(q);
                return;
        }
        n = http_conn_query(c, "path", value, sizeof(value));
        if (n > 0 && !(q->path = envd_absolute_path(q->user.home, value))) {
                respond_error(c, 500, "out of memory");
                request_free(q);
                return;
        }
        if (c->method == HTTP_METHOD_GET && !q->path) {
                respond_error(c, 400, "GET /files needs ?path");
                request_free(q);
                return;
        }
        (void) http_conn_header(c, "Content-Type", q->content_type, sizeof(q->content_type));
        if (c->method == HTTP_METHOD_POST && http_conn_header(c, "Content-Encoding", value, sizeof(value)) > 0 &&
            strcasecmp(value, "identity") != 0) {
                if (strcasecmp(value, "gzip") != 0) {
                        respond_error(c, 415, "Content-Encoding: the runtime takes gzip (or none)");
                        request_free(q);
                        return;
                }
                q->gzip = true;
        }
        http_conn_set_handler(c, &handler, q, c->method == HTTP_METHOD_POST ? FILES_UPLOAD_MAX : 0);
}

int envd_files_api_new(Rpc *rpc, HttpServer *http) {
        return http_server_add_route(http, "/files", route, rpc);
}

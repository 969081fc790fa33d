/* SPDX-License-Identifier: MIT */
#pragma once

/* What the envd faces share: Connect's errors and stream messages, envd's EntryInfo made from
 * an fs::stat result, and a request's user and paths. */

#include <jansson.h>
#include <msgpack.h>
#include <stdbool.h>
#include <sys/types.h>

#include "http-server.h"

/* Connect's code names ("not_found", …) as HTTP statuses. */
unsigned envd_connect_status(const char *code);
/* Answer with Connect's error: the code's status and {"code", "message"}. */
void envd_respond_error(HttpConn *c, const char *code, const char *message);
/* An fs:: error code as a Connect code. */
const char *envd_code_of(const char *fs_error);
/* One fs::stat result map as envd's EntryInfo, or NULL. */
json_t *envd_entry_json(const msgpack_object *m);
/* The account a request is for, as in E2B: the one it names (envd's `Authorization: Basic
 * base64(USER:)`, /files' ?username=), else the sandbox's default user (agentd passes a
 * template's DefaultUser= as $AGENTIX_DEFAULT_USER), else `user` when the image has that
 * account, else the runtime's own. */
#define ENVD_IMAGE_USER "user"
typedef struct EnvdUser {
        uid_t uid;
        gid_t gid;
        bool own;           /* the runtime's own account: commands need no change of account */
        char name[64];
        char home[256];     /* relative paths resolve against it */
} EnvdUser;
/* name NULL or "": the default. -ENOENT when the image has no such account. */
int envd_user_named(const char *name, EnvdUser *ret);
/* -EINVAL for an Authorization header that does not decode, -ENOENT as above. */
int envd_request_user(HttpConn *c, EnvdUser *ret);
/* {uid, gid} of user, the fs:: kwargs that make a call run as the user (what it reaches is what
 * the user may; what it makes is the user's), or {} for the runtime's own account; extra: more
 * keys the caller packs after these. */
int envd_pack_owner_kwargs(msgpack_packer *pk, const EnvdUser *user, uint32_t extra);
/* The default user (NULL or "": none; then `user` or the runtime's own). */
int envd_set_default_user(const char *name);
/* A path of the request as an absolute, clean one: relative ones below home (malloc'ed). */
char *envd_absolute_path(const char *home, const char *path);

/* Connect's server streams: each message a flag byte, a 4-byte length and JSON. */
#define ENVD_STREAM_END 0x02
/* One message (msg taken); the stream's head must be out (http_conn_stream_begin()). */
int envd_stream_send(HttpConn *c, uint8_t flags, json_t *msg);
/* {"event": event} (taken), as the Process service's messages are. */
void envd_stream_event(HttpConn *c, json_t *event);
/* End the stream (its head first if need be): {} or {"error": {code, message}} (code NULL: {}). */
void envd_stream_end(HttpConn *c, const char *code, const char *message);
/* The request's Keepalive-Ping-Interval (seconds, at most an hour) in µs; 0 without one. */
uint64_t envd_keepalive_usec(HttpConn *c);
/* The one message of a stream request's body, or NULL when it is not one envelope of JSON. */
json_t *envd_stream_request(HttpConn *c);

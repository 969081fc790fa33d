/* SPDX-License-Identifier: MIT */
#pragma once

/* Jupyter messaging protocol (version 5.3) messages on the wire: building and signing what the
 * client sends, checking and parsing what a kernel sends. No ZeroMQ here: a message is a list
 * of frames, so this is tested and fuzzed on its own (fuzz-jupyter-message.c).
 *
 * A message is the frames
 *     [routing ids or a topic …] "<IDS|MSG>" signature header parent_header metadata content [buffers …]
 * where signature is the hex HMAC-SHA256 of the four JSON frames under the connection file's
 * key (an empty key: no signing, an empty signature). Everything before the delimiter is
 * ignored; buffers are ignored. */

#include <stdbool.h>
#include <stddef.h>
#include <sys/uio.h>

#include <jansson.h>

#define JUPYTER_DELIMITER "<IDS|MSG>"
#define JUPYTER_PROTOCOL_VERSION "5.3"
#define JUPYTER_KEY_MAX 256
#define JUPYTER_MSG_ID_LEN 32 /* hex of 16 random bytes */

typedef struct JupyterSession {
        char key[JUPYTER_KEY_MAX + 1]; /* the HMAC key as the connection file gives it */
        char session[JUPYTER_MSG_ID_LEN + 1];
        unsigned long counter;         /* makes msg_ids unique within the session */
} JupyterSession;

/* A fresh session with a random key and session id. */
int jupyter_session_init(JupyterSession *s);

/* A message ready to send: the delimiter and five frames (frames[0..5]). */
typedef struct JupyterOutgoing {
        char msg_id[JUPYTER_MSG_ID_LEN + 16];
        char signature[65];
        char *header, *parent, *metadata, *content; /* malloc()ed JSON text */
        struct iovec frames[6];
} JupyterOutgoing;

/* Build `msg_type` with `content` (borrowed; NULL: {}). */
int jupyter_message_build(JupyterSession *s, const char *msg_type, const json_t *content, JupyterOutgoing *ret);
void jupyter_outgoing_done(JupyterOutgoing *m);

typedef struct JupyterMessage {
        json_t *header, *parent_header, *metadata, *content;
        const char *msg_type;      /* header.msg_type (points into header) */
        const char *parent_msg_id; /* parent_header.msg_id, or NULL (points into parent_header) */
} JupyterMessage;

#define JUPYTER_MESSAGE_NULL ((JupyterMessage) {})

/* Parse received frames. -EBADMSG: no delimiter, too few frames, or a signature that does not
 * match; -EINVAL: a JSON frame that is not an object, or a header without msg_type. */
int jupyter_message_parse(const JupyterSession *s, const struct iovec *frames, size_t n, JupyterMessage *ret);
void jupyter_message_done(JupyterMessage *m);

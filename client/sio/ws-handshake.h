/* SPDX-License-Identifier: MIT */
#pragma once

/* The client's half of the WebSocket opening handshake (RFC 6455 section 4.1): the upgrade
 * request, and the check of the server's answer. No subprotocol and no extension is asked
 * for, so an answer that names one is refused. */

#include <stddef.h>
#include <stdint.h>

#include "buffer.h"

/* base64 of 16 random bytes; of a SHA-1 digest */
#define WS_KEY_LEN 24u
#define WS_ACCEPT_LEN 28u
/* The longest answer head read (status line and headers). */
#define WS_HANDSHAKE_HEAD_MAX (16u * 1024u)

/* A fresh Sec-WebSocket-Key. */
int ws_handshake_key(char ret_key[static WS_KEY_LEN + 1]);
/* The Sec-WebSocket-Accept a server must answer `key` with. */
int ws_handshake_accept(const char *key, char ret_accept[static WS_ACCEPT_LEN + 1]);

/* Append the upgrade request for `path` (with its query) on `host_header` ("host:port"). */
int ws_handshake_request(Buffer *out, const char *host_header, const char *path, const char *key);

typedef struct WsHandshakeAnswer {
        unsigned status;      /* the HTTP status of a complete head, 0 before */
        const char *problem;  /* why a complete head was not accepted (static text) */
        size_t head_size;     /* bytes of the head, its final CRLFCRLF included */
} WsHandshakeAnswer;

/* Look at the first n bytes the server sent. 0: the head is not complete yet; 1: a valid
 * "101 Switching Protocols" for `accept`, the frames start at head_size; -EPROTO: a complete
 * head that is not (status and problem say why; a status other than 101 means the server
 * does not take WebSocket upgrades here); -EBADMSG: not HTTP, or a head over
 * WS_HANDSHAKE_HEAD_MAX. */
int ws_handshake_answer(const uint8_t *data, size_t n, const char *accept, WsHandshakeAnswer *ret);

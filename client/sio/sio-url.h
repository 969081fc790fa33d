/* SPDX-License-Identifier: MIT */
#pragma once

/* The server URL a SioClient is given, taken apart (with libcurl's URL parser) into what each
 * transport needs. http:// and ws:// are the same server; the Engine.IO path defaults to
 * /socket.io/; https:// and wss:// are the same over TLS (tls set). */

#include <stdbool.h>

typedef struct SioUrl {
        char *host;          /* for connecting: a name, or an address without brackets */
        unsigned port;
        char *host_header;   /* "127.0.0.1:8000", "[::1]:8000" */
        char *path;          /* the Engine.IO path, ending in '/': "/socket.io/" */
        char *ws_path;       /* path + "?EIO=4&transport=websocket" */
        char *polling_url;   /* "http://" (or "https://") host_header path (no query) */
        bool tls;
} SioUrl;

int sio_url_parse(const char *url, SioUrl *ret);
void sio_url_done(SioUrl *u);

/* SPDX-License-Identifier: MIT */
#pragma once

/* envd's WatchDir and its polled watchers (e2b-envd-watch.c), routed by e2b-envd-filesystem.c. */

#include <stdbool.h>

#include "http-server.h"
#include "rpc.h"

typedef struct EnvdWatchApi EnvdWatchApi;

int envd_watch_api_new(Rpc *rpc, EnvdWatchApi **ret);
/* Every watch ends. */
EnvdWatchApi *envd_watch_api_free(EnvdWatchApi *api);

/* Take the request for Filesystem method `name` when it is one of the watch calls (its route
 * checked the token and the method): true when taken. */
bool envd_watch_take(EnvdWatchApi *api, HttpConn *c, const char *name);

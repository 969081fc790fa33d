/* SPDX-License-Identifier: MIT */
#pragma once

/* E2B's envd Filesystem service (Connect RPC in JSON) on the worker's fs:: module: see
 * e2b-envd-filesystem.c. */

#include "http-server.h"
#include "rpc.h"

typedef struct EnvdFilesystemApi EnvdFilesystemApi;

/* Serve /filesystem.Filesystem/… on http, with calls through rpc. */
int envd_filesystem_api_new(Rpc *rpc, HttpServer *http, EnvdFilesystemApi **ret);
EnvdFilesystemApi *envd_filesystem_api_free(EnvdFilesystemApi *api);

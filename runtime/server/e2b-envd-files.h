/* SPDX-License-Identifier: MIT */
#pragma once

/* envd's GET and POST /files (e2b-envd-files.c): a file's bytes, and uploads. */

#include "http-server.h"
#include "rpc.h"

/* Serve /files on http, with calls through rpc. */
int envd_files_api_new(Rpc *rpc, HttpServer *http);

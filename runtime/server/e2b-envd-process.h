/* SPDX-License-Identifier: MIT */
#pragma once

/* E2B's envd Process service (Connect RPC in JSON) on sandbox::exec: see e2b-envd-process.c. */

#include <systemd/sd-event.h>

#include "http-server.h"
#include "rpc.h"

typedef struct EnvdProcessApi EnvdProcessApi;

/* Serve /process.Process/… on http, with calls through rpc. */
int envd_process_api_new(Rpc *rpc, sd_event *event, HttpServer *http, EnvdProcessApi **ret);
/* Every process it runs is killed. */
EnvdProcessApi *envd_process_api_free(EnvdProcessApi *api);

/* SPDX-License-Identifier: MIT */
#pragma once

/* E2B's control API (/sandboxes and /v2/sandboxes, as E2B's SDKs call it): create from a
 * template (a pool of agentd's), get, list (metadata and state filters, pages with
 * x-next-token), kill, set timeout, connect, pause, resume and metrics. Each request's X-API-KEY names
 * a user (api-keys.h); the work is agentd's, called over that user's own bus connection
 * (user-bus.h), so a sandbox made with a key is its user's and invisible to every other key.
 * Errors in E2B's form: {"code": STATUS, "message": "..."}. This file routes; the requests'
 * bodies are checked in control-body.c, the agentd calls they make are Ops (control-op.h),
 * the create's in control-create.c, the list's in control-list.c. */

#include "api-keys.h"
#include "http-server.h"
#include "user-bus.h"

typedef struct ControlApi ControlApi;

/* Serve the control API on http. *keys is read at each request (it may be replaced between
 * requests: a reload). */
int control_api_new(HttpServer *http, UserBuses *buses, ApiKeys *const *keys, ControlApi **ret);
ControlApi *control_api_free(ControlApi *api);

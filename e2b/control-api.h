/* SPDX-License-Identifier: MIT */
#pragma once

/* E2B's control API (/sandboxes and /v2/sandboxes, as E2B's SDKs call it): create from a
 * template (a pool of agentd's), get, list (metadata and state filters, pages with
 * x-next-token), kill, set timeout, connect, pause, resume and metrics. Each request's X-API-KEY names
 * a user (api-keys.h); the work is agentd's, called over that user's own bus connection
 * (user-bus.h), so a sandbox made with a key is its user's and invisible to every other key.
 * Errors in E2B's form: {"code": STATUS, "message": "..."}. */

#include "api-keys.h"
#include "sandbox-info.h"
#include "http-server.h"
#include "user-bus.h"

/* agentd's names on the bus (org.agentix.Agentd1(5)). */
#define AGENTD_NAME "org.agentix.Agentd1"
#define MANAGER_PATH "/org/agentix/Agentd1"
#define MANAGER_IFACE "org.agentix.Agentd1.Manager"
#define SANDBOX_IFACE "org.agentix.Agentd1.Sandbox"

/* E2B's timeout when a create names none. */
#define E2B_DEFAULT_TIMEOUT_SEC 300

typedef struct ControlApi ControlApi;

/* Serve the control API on http. *keys is read at each request (it may be replaced between
 * requests: a reload). */
int control_api_new(HttpServer *http, UserBuses *buses, ApiKeys *const *keys, ControlApi **ret);
ControlApi *control_api_free(ControlApi *api);

/* E2B's access token for a sandbox whose runtime token is runtime_token: what envdAccessToken
 * says and sandbox traffic must carry; derived (runtime_token_derive()), so it outlives a
 * gateway restart and opens nothing but the gateway's route. */
int e2b_access_token(const char *runtime_token, char ret[static 65]);
/* E2B's traffic access token (trafficAccessToken, sent as e2b-traffic-access-token): opens the
 * ports of a sandbox made with network.allowPublicTraffic=false, and the code interpreter's;
 * never envd's. Derived likewise, for another purpose. */
int e2b_traffic_token(const char *runtime_token, char ret[static 65]);

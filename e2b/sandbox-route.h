/* SPDX-License-Identifier: MIT */
#pragma once

/* Sandbox traffic through the gateway: a request that names a sandbox (sandbox-target.h: E2B's
 * E2b-Sandbox-Id and E2b-Sandbox-Port headers, or a Host of PORT-ID.DOMAIN with --domain) goes
 * to that sandbox's runtime, which serves E2B's envd (port 49983) and code interpreter (49999)
 * itself, if the sandbox was made through the gateway (sandbox-info.h: E2B_TEMPLATE_LABEL); any
 * other is answered as an id that does not exist. envd's port wants the sandbox's E2B access
 * token (X-Access-Token, what the create answered), the code interpreter's that or the traffic
 * token; the runtime gets its own token in their place, so no E2B client ever holds the
 * runtime's. Other ports (a web app in the sandbox, sandbox.getHost(port)) go to the runtime's
 * port proxy: open to anyone when the create allowed public traffic (E2B's default), else only
 * with the traffic token (e2b-traffic-access-token). One request per connection (the response
 * says Connection: close): a client's next request may be for another sandbox. */

#include <systemd/sd-event.h>

#include "http-server.h"

#define E2B_ENVD_PORT 49983
#define E2B_CODE_INTERPRETER_PORT 49999

typedef struct SandboxRoute SandboxRoute;

/* domain: route Host: PORT-ID.DOMAIN too (NULL: the headers only). The sandboxes are looked up
 * on the bus DBUS_SYSTEM_BUS_ADDRESS names, as the gateway itself (root may ask for any); when
 * that connection drops, the route connects again (every second until it can). */
int sandbox_route_new(sd_event *event, HttpServer *http, const char *domain, SandboxRoute **ret);
SandboxRoute *sandbox_route_free(SandboxRoute *r);

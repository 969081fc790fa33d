/* SPDX-License-Identifier: MIT */
#pragma once

/* The tokens E2B's clients get for a sandbox, derived from its runtime's token
 * (runtime_token_derive(): HMAC-SHA256, each for its own purpose), so that they outlive a
 * gateway restart, neither gives the other nor the runtime's token, and each opens nothing but
 * this sandbox through the gateway. */

/* envdAccessToken: what envd's calls (X-Access-Token) must carry. */
int e2b_access_token(const char *runtime_token, char ret[static 65]);

/* trafficAccessToken (sent as e2b-traffic-access-token): opens the ports of a sandbox made with
 * network.allowPublicTraffic=false, and the code interpreter's; never envd's. */
int e2b_traffic_token(const char *runtime_token, char ret[static 65]);

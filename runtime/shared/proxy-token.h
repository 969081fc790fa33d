/* SPDX-License-Identifier: MIT */
#pragma once

/* The token of a runtime's port proxy (/proxy/PORT/, agentix-server(8)): HMAC-SHA256 keyed
 * with the runtime's own token over "agentix-proxy:PORT", in lowercase hex. agentd hands it out
 * (Manager.GetPortUrl()); the runtime computes it again to check a request, so neither keeps
 * any state. It differs per runtime and per port, says nothing about the runtime's token, and
 * the runtime never takes it for its own (/socket.io/ wants the runtime token). */

#include <stdbool.h>
#include <stddef.h>

#define PROXY_TOKEN_LEN 64

int proxy_token(const char *runtime_token, unsigned port, char ret[static PROXY_TOKEN_LEN + 1]);
/* The same keyed hash over another purpose (agentix-e2b's access token: "agentix-e2b:access"):
 * tokens made from the runtime's for one use, that open nothing else. */
int runtime_token_derive(const char *runtime_token, const char *purpose, char ret[static PROXY_TOKEN_LEN + 1]);
/* token (len bytes) is port's token for runtime_token; compared in constant time. */
bool proxy_token_valid(const char *runtime_token, unsigned port, const char *token, size_t len);

/* SPDX-License-Identifier: MIT */
#include "e2b-token.h"
#include "proxy-token.h"

int e2b_access_token(const char *runtime_token, char ret[static 65]) {
        return runtime_token_derive(runtime_token, "agentix-e2b:access", ret);
}

int e2b_traffic_token(const char *runtime_token, char ret[static 65]) {
        return runtime_token_derive(runtime_token, "agentix-e2b:traffic", ret);
}

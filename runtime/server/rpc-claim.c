/* SPDX-License-Identifier: MIT */
#include <string.h>

#include "envelope.h"
#include "rpc-claim.h"

char *claim_token(const msgpack_object *envelope_map, const char **ret_error) {
        const msgpack_object *kwargs = mp_map_get(envelope_map, "kwargs");
        const char *t;
        size_t len;

        if (!kwargs || mp_map_get_str(kwargs, "token", &t, &len) < 0) {
                *ret_error = "runtime::claim takes the new token as the keyword argument 'token' (a string)";
                return NULL;
        }
        if (len < CLAIM_TOKEN_MIN || len > CLAIM_TOKEN_MAX) {
                *ret_error = "runtime::claim: the token must have 16 to 256 characters";
                return NULL;
        }
        for (size_t i = 0; i < len; i++)
                if (t[i] <= ' ' || t[i] > '~') {
                        *ret_error = "runtime::claim: the token must be printable ASCII without spaces";
                        return NULL;
                }
        return strndup(t, len);
}

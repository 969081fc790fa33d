/* SPDX-License-Identifier: MIT */
/* Checking the control API's bodies (control-body.h). */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "control-body.h"
#include "macro.h"
#include "sandbox-info.h"

static int problem(char **ret, const char *fmt, ...) _printf_(2, 3);
static int problem(char **ret, const char *fmt, ...) {
        va_list ap;

        va_start(ap, fmt);
        if (vasprintf(ret, fmt, ap) < 0)
                *ret = NULL;
        va_end(ap);
        return *ret ? -EINVAL : -ENOMEM;
}

int control_body_parse(const void *data, size_t size, json_t **ret, char **ret_problem) {
        json_error_t e;
        json_t *j = json_loadb(data, size, 0, &e);

        if (!j || !json_is_object(j)) {
                json_decref(j);
                return problem(ret_problem, "the body is not a JSON object: %s", j ? "not an object" : e.text);
        }
        *ret = j;
        return 0;
}

int control_body_timeout(json_t *body, uint64_t *ret, char **ret_problem) {
        json_t *timeout = json_object_get(body, "timeout");

        if (!timeout || json_is_null(timeout)) {
                *ret = 0;
                return 0;
        }
        if (!json_is_integer(timeout) || json_integer_value(timeout) < 0 ||
            json_integer_value(timeout) > E2B_TIMEOUT_MAX_SEC)
                return problem(ret_problem, "timeout is a number of seconds");
        *ret = (uint64_t) json_integer_value(timeout);
        return 0;
}

/* E2B's maps are of strings, and not too many. NULL when o is fine, else why not. */
static const char *string_map_problem(json_t *o) {
        const char *k;
        json_t *v;

        if (!o || json_is_null(o))
                return NULL;
        if (!json_is_object(o))
                return "is not an object";
        if (json_object_size(o) > E2B_METADATA_MAX)
                return "has more than 64 entries";
        json_object_foreach(o, k, v)
                if (!json_is_string(v) || !*k)
                        return "has a value that is not a string, or an empty key";
        return NULL;
}

int control_body_create(json_t *body, ControlCreate *ret, char **ret_problem) {
        json_t *template = json_object_get(body, "templateID"), *metadata = json_object_get(body, "metadata"),
               *env = json_object_get(body, "envVars"), *network = json_object_get(body, "network"),
               *public_traffic, *value;
        const char *why, *key;

        if (!json_is_string(template) || !*json_string_value(template))
                return problem(ret_problem, "templateID is required (a template is a pool: pools.d/NAME.pool)");
        if ((why = string_map_problem(metadata)))
                return problem(ret_problem, "metadata %s", why);
        if ((why = string_map_problem(env)))
                return problem(ret_problem, "envVars %s", why);
        /* The gateway's own labels say what it made and how open it is: E2B's metadata sets none. */
        json_object_foreach(metadata, key, value)
                if (startswith(key, E2B_LABEL_PREFIX))
                        return problem(ret_problem, "metadata key '%s' is the gateway's own (no key may start with '%s')",
                                       key, E2B_LABEL_PREFIX);
        /* E2B's network: {allowPublicTraffic} (true when not given). */
        if (network && !json_is_null(network) && !json_is_object(network))
                return problem(ret_problem, "network is not an object");
        public_traffic = json_object_get(network, "allowPublicTraffic");
        if (public_traffic && !json_is_null(public_traffic) && !json_is_boolean(public_traffic))
                return problem(ret_problem, "network.allowPublicTraffic is true or false");
        *ret = (ControlCreate) {
                .template_id = json_string_value(template),
                .metadata = json_is_object(metadata) ? metadata : NULL,
                .env = json_is_object(env) ? env : NULL,
                .public_traffic = !json_is_false(public_traffic),
        };
        return 0;
}

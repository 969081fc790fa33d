/* SPDX-License-Identifier: MIT */
/* agentix-e2b's checks of the control API's JSON bodies (e2b/control-body.c), with any bytes:
 * they decide without reading out of bounds or leaking, every refusal has a message, and what
 * passes is what agentd may be asked for: a timeout of 0 to ten years, a create's template not
 * empty, its metadata and envVars objects of at most 64 strings with no empty key, and no
 * metadata key of the gateway's own labels (agentix-e2b.*), which say what the gateway made
 * and whether its ports are public. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "control-body.h"
#include "fuzz-util.h"
#include "macro.h"
#include "sandbox-info.h"

static void check_strings(json_t *o, bool metadata) {
        const char *k;
        json_t *v;

        if (!o)
                return;
        CHECK(json_is_object(o) && json_object_size(o) <= E2B_METADATA_MAX);
        json_object_foreach(o, k, v) {
                CHECK(*k && json_is_string(v));
                CHECK(!metadata || !startswith(k, E2B_LABEL_PREFIX));
        }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        char *problem = NULL;
        json_t *body = NULL;
        uint64_t timeout;
        ControlCreate c;
        int r;

        if (size > 64 * 1024)
                return 0;
        r = control_body_parse(data, size, &body, &problem);
        CHECK(r == 0 || r == -ENOMEM || (r == -EINVAL && problem && *problem));
        free(problem);
        problem = NULL;
        if (r < 0)
                return 0;
        CHECK(json_is_object(body));

        r = control_body_timeout(body, &timeout, &problem);
        CHECK(r == 0 || r == -ENOMEM || (r == -EINVAL && problem && *problem));
        if (r == 0)
                CHECK(timeout <= (uint64_t) E2B_TIMEOUT_MAX_SEC);
        free(problem);
        problem = NULL;

        r = control_body_create(body, &c, &problem);
        CHECK(r == 0 || r == -ENOMEM || (r == -EINVAL && problem && *problem));
        if (r == 0) {
                CHECK(c.template_id && *c.template_id);
                check_strings(c.metadata, true);
                check_strings(c.env, false);
                /* A create that did not say otherwise has public ports, as E2B's. */
                json_t *network = json_object_get(body, "network");
                CHECK(c.public_traffic == !json_is_false(json_object_get(network, "allowPublicTraffic")));
        }
        free(problem);
        json_decref(body);
        return 0;
}

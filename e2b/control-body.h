/* SPDX-License-Identifier: MIT */
#pragma once

/* The JSON bodies of E2B's control API, checked before anything is asked of agentd: any
 * request's (an object, its "timeout") and a create's (templateID, metadata, envVars,
 * network.allowPublicTraffic). Pure functions of the bytes, so that a fuzzer can drive them
 * (fuzz-control-body). Each problem is the message of a 400, allocated. */

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define E2B_METADATA_MAX 64              /* entries in a create's metadata or envVars */
#define E2B_TIMEOUT_MAX_SEC (10LL * 365 * 24 * 3600)

/* data (size bytes, any) as a JSON object, in *ret (a new reference). -EINVAL with *ret_problem. */
int control_body_parse(const void *data, size_t size, json_t **ret, char **ret_problem);

/* The body's "timeout" in seconds (0 when absent or null; body may be NULL). -EINVAL with
 * *ret_problem. */
int control_body_timeout(json_t *body, uint64_t *ret, char **ret_problem);

/* What a create asks for. The pointers are borrowed from the body. */
typedef struct ControlCreate {
        const char *template_id;    /* not empty */
        json_t *metadata;           /* NULL, or an object of at most E2B_METADATA_MAX strings, no
                                     * key empty or of the gateway's own (E2B_LABEL_PREFIX) */
        json_t *env;                /* NULL, or an object of at most E2B_METADATA_MAX strings */
        bool public_traffic;        /* network.allowPublicTraffic (true when absent) */
} ControlCreate;

int control_body_create(json_t *body, ControlCreate *ret, char **ret_problem);

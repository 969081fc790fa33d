/* SPDX-License-Identifier: MIT */
#pragma once

/* E2B's create (POST /v2/sandboxes): the body's template (a pool of agentd's), metadata (the
 * sandbox's labels, beside the gateway's own: made through it, public or not), envVars and
 * timeout, as one CreateSandbox call; the answer says how to reach it. A create whose client
 * leaves still waits for agentd's answer, and deletes the sandbox nobody will get. */

#include "control-op.h"

/* E2B's timeout when a create names none. */
#define E2B_DEFAULT_TIMEOUT_SEC 300

/* Check the body, ask agentd, answer: the whole Op. */
void control_create_start(Op *op);

/* Its client left (op->c is NULL now). true: the create goes on, to delete what it makes;
 * false: nothing is under way, the Op may be freed. */
bool control_create_client_left(Op *op);

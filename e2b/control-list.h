/* SPDX-License-Identifier: MIT */
#pragma once

/* E2B's list of sandboxes (GET /v2/sandboxes): the key's user's running and paused sandboxes,
 * filtered by state and metadata, ordered by creation then id, in pages of `limit` with
 * x-next-token naming where the next page starts. */

#include "control-op.h"

/* Read the request's query, ask agentd, answer: the whole Op. */
void control_list_start(Op *op);

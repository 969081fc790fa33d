/* SPDX-License-Identifier: MIT */
#pragma once

/* Ask a sandbox's runtime to hold still for a checkpoint: POST RUNTIME_URL/runtime/hold with
 * its token (agentix-server(8)). The runtime then stops listening (its ports stay its own),
 * resets every connection but this one, and listens again at SIGUSR2. This request's own
 * connection is closed by a reset too (SO_LINGER 0): gVisor cannot save a TCP endpoint in
 * TIME_WAIT, and the runtime's side of a connection the peer resets has none. */

#include "curl-event.h"

typedef struct RuntimeHold RuntimeHold;

/* held: the runtime holds still. Else why not (error: valid during the call): what it answered
 * (409 names the TCP connections in the way) or why it could not be asked; retry_after: the
 * seconds after which it says it could (a TIME_WAIT of its own to wait out), else 0. The hold is
 * freed after done() returns. */
typedef void (*runtime_hold_done_t)(bool held, const char *error, unsigned retry_after, void *userdata);

int runtime_hold_start(CurlEvent *curl, const char *runtime_url, const char *token, runtime_hold_done_t done,
                       void *userdata, RuntimeHold **ret);
/* done() is not called. NULL. */
RuntimeHold *runtime_hold_free(RuntimeHold *h);

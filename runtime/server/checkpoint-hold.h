/* SPDX-License-Identifier: MIT */
#pragma once

/* POST /runtime/hold: the runtime holds still so that gVisor can checkpoint its sandbox. gVisor
 * refuses to save a TCP endpoint that epoll watches ("endpoint still has waiters upon save":
 * our listening sockets while sd-event watches them), and one that is connected or in TIME_WAIT
 * with an address other than loopback. So, for a request with the runtime's token (as the
 * other protected endpoints take it: X-Access-Token or Authorization: Bearer):
 *
 *   - a TCP connection in the way (tcp-blockers.h), other than the asking one, gets 409 with
 *     {"error": …, "connections": ["LOCAL REMOTE STATE", …]} (at most TCP_BLOCKERS_MAX named),
 *     and nothing changes;
 *   - else every listening socket stops accepting and keeps its port
 *     (http_server_set_accepting()), every connection but the asking one is reset, the HTTP
 *     server's and the port proxy's, and the answer is 200 {"held": true}. The asker (agentd)
 *     resets its connection once it has read that.
 *
 * The runtime listens again at SIGUSR2 (agentd sends it after the restore, or after a failed
 * checkpoint), or on its own HOLD_MAX_USEC after the last hold. When it cannot listen again it
 * makes the event loop exit with 1: a runtime nobody can reach is better restarted. A hold while
 * held is answered the same way (200 again when nothing is in the way) and starts the time
 * again. */

#include <systemd/sd-event.h>

#include "http-proxy.h"
#include "http-server.h"
#include "rpc.h"

#define HOLD_PATH "/runtime/hold"
#define HOLD_MAX_USEC (120ULL * 1000 * 1000)

typedef struct CheckpointHold CheckpointHold;

/* proxy may be NULL. Takes SIGUSR2, which the caller has blocked. */
int checkpoint_hold_new(sd_event *event, HttpServer *http, Proxy *proxy, Rpc *rpc, CheckpointHold **ret);
CheckpointHold *checkpoint_hold_free(CheckpointHold *h);

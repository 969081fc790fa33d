/* SPDX-License-Identifier: MIT */
#pragma once

/* --conformance: behave like the reference test servers of the protocol projects, so their
 * test suites (engine.io-protocol, socket.io-protocol) can run against this implementation:
 *   /engine.io/  raw Engine.IO, every message echoed back
 *   /socket.io/  Socket.IO: on connect emit "auth" with the handshake auth (once the CONNECT
 *                reply has been written, as the reference server does); "message" is
 *                answered with "message-back" (same arguments), "message-with-ack" is acked
 *                with its arguments; namespaces "/" and "/custom". */

#include "eio-server.h"
#include "sio-server.h"

extern const EioCallbacks conformance_echo_callbacks;
int conformance_add_namespaces(SioServer *sio, sd_event *event);

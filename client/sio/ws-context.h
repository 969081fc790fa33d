/* SPDX-License-Identifier: MIT */
#pragma once

/* The libwebsockets client context of one SioClient, on a libuv loop embedded in sd-event
 * (runtime/shared/uv-event.h): Debian's lws 4.1 has no sd-event support, but takes a foreign
 * libuv loop. Created on the first WebSocket attempt, freed with the client, after every
 * transport on it. */

#include <libwebsockets.h>
#include <systemd/sd-event.h>
#include <uv.h>

typedef struct WsContext WsContext;

extern const struct lws_protocols ws_transport_protocols[];

/* connect_timeout_usec bounds lws's own handshake timeouts (our attempt timer is the real bound). */
int ws_context_new(sd_event *event, uint64_t connect_timeout_usec, WsContext **ret);
/* Waits for name lookups still running on libuv's thread pool (they cannot be interrupted). */
WsContext *ws_context_free(WsContext *ctx);

struct lws_context *ws_context_lws(WsContext *ctx);
uv_loop_t *ws_context_loop(WsContext *ctx);
sd_event *ws_context_event(WsContext *ctx);

/* Let libuv (and so lws) run once now, without blocking. */
void ws_context_run(WsContext *ctx);
/* Let libuv run on the next loop iteration: lws work was queued from outside its callbacks
 * (lws_callback_on_writable() only takes effect when the uv loop runs). */
void ws_context_wakeup(WsContext *ctx);

void ws_context_resolve_started(WsContext *ctx);
void ws_context_resolve_done(WsContext *ctx);

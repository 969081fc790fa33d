/* SPDX-License-Identifier: MIT */
#pragma once

/* Run a libuv loop inside an sd-event loop.
 *
 * Debian's libwebsockets 4.1 has no sd-event backend and no external-poll hooks, but it can
 * use a foreign libuv loop. So the uv loop is embedded in sd-event: an io source on
 * uv_backend_fd() and a timer from uv_backend_timeout() both run uv_run(UV_RUN_NOWAIT), and a
 * post source does the same after every sd-event iteration in which anything else ran (our
 * own handlers may have queued lws work, e.g. lws_callback_on_writable()). */

#include <systemd/sd-event.h>
#include <uv.h>

typedef struct UvEvent UvEvent;

int uv_event_new(sd_event *event, UvEvent **ret);
UvEvent *uv_event_free(UvEvent *u);

uv_loop_t *uv_event_loop(UvEvent *u);

/* Run the uv loop once without blocking and re-arm the sd-event timer. */
void uv_event_run(UvEvent *u);

/* Run the loop without blocking until nothing is active or closing any more (bounded), so
 * pending close callbacks have run. */
void uv_event_settle(UvEvent *u);

/* Tear down: close every remaining uv handle, run the loop until they are gone, close it.
 * Call after destroying whatever uses the loop (the lws context). */
void uv_event_drain(UvEvent *u);

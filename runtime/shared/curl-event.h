/* SPDX-License-Identifier: MIT */
#pragma once

/* libcurl's multi interface driven by sd-event: curl's socket callback becomes one sd-event io
 * source per socket, its timer callback one sd-event time source, and finished transfers are
 * reported through a per-transfer callback. Nothing here blocks: name resolution is curl's
 * (threaded on Debian), the rest is non-blocking sockets. Modelled on systemd's
 * src/import/curl-util.c.
 *
 * The glue owns CURLOPT_PRIVATE of the easy handles it runs; pass your context as the
 * `userdata` of curl_event_add() instead. */

#include <stdbool.h>

#include <curl/curl.h>
#include <systemd/sd-event.h>

typedef struct CurlEvent CurlEvent;

/* A transfer finished (successfully or not: look at `result`, and at CURLINFO_RESPONSE_CODE for
 * HTTP). The easy handle is no longer part of the multi handle: the callback owns it again and
 * may reuse it (curl_event_add() again), free it, start or stop other transfers. It runs from
 * the event loop, never from inside another curl callback. */
typedef void (*curl_event_done_t)(CurlEvent *g, CURL *easy, CURLcode result, void *userdata);

int curl_event_new(sd_event *event, CurlEvent **ret);
/* Stops every transfer still running (their done callbacks are not called; the caller still
 * owns their easy handles). May be called from a done callback. */
CurlEvent *curl_event_free(CurlEvent *g);

static inline void curl_event_freep(CurlEvent **g) {
        if (*g)
                curl_event_free(*g);
}

CURLM *curl_event_multi(CurlEvent *g);
sd_event *curl_event_event(CurlEvent *g);

/* Start a transfer. Must not be called from inside a curl callback (write, read, header,
 * progress): libcurl refuses that (CURLM_RECURSIVE_API_CALL, reported as -EBUSY). */
int curl_event_add(CurlEvent *g, CURL *easy, curl_event_done_t done, void *userdata);

/* Stop a running transfer without calling its done callback. A no-op for an easy handle that
 * is not running. Same restriction as curl_event_add(). */
void curl_event_remove(CurlEvent *g, CURL *easy);

/* Number of transfers started and not yet finished or removed. */
unsigned curl_event_n_transfers(const CurlEvent *g);

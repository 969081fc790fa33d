/* SPDX-License-Identifier: MIT */
#pragma once

/* Name lookups that do not block the event loop: getaddrinfo() on a short-lived thread of its
 * own, the answer reported from an sd-event source. (libsystemd's sd-resolve does this, but
 * Debian's libsystemd does not install its header.) A lookup cannot be interrupted; one that
 * is dropped early finishes on its thread and cleans up after itself. */

#include <netdb.h>

#include <systemd/sd-event.h>

typedef struct ResolveQuery ResolveQuery;

/* error: 0, or an EAI_* code (gai_strerror() names it); ai: the addresses (NULL on error),
 * valid during the call. */
typedef void (*resolve_handler_t)(int error, const struct addrinfo *ai, void *userdata);

/* Look up `host` for a TCP connection. The handler runs once, from the loop, unless the query
 * is freed first. An address literal is answered at once (still from the loop). */
int resolve_start(sd_event *event, const char *host, resolve_handler_t handler, void *userdata,
                  ResolveQuery **ret);

/* Done with the query, answered or not: no handler call after this. A lookup still running
 * finishes on its thread, which then frees what is left. */
ResolveQuery *resolve_query_free(ResolveQuery *q);

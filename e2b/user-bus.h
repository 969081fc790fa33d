/* SPDX-License-Identifier: MIT */
#pragma once

/* One bus connection per user the gateway acts for. agentd knows a caller by the credentials of
 * its connection, so a request made with a user's API key goes over a connection that user
 * would have made: while it connects, the gateway's thread takes that user's uid, gid and
 * groups with raw system calls (a thread's own credentials, not the process's, unlike
 * glibc's setresuid()), and takes its own back at once. agentd then sees, counts and limits
 * that user exactly as if they had called it (their `agentixctl list` shows the sandbox).
 * Needs CAP_SETUID and CAP_SETGID, or a gateway that runs as that user already. */

#include <sys/types.h>

#include <systemd/sd-bus.h>
#include <systemd/sd-event.h>

#include "api-keys.h"

typedef struct UserBuses UserBuses;

/* Connections to the bus DBUS_SYSTEM_BUS_ADDRESS names (else the system bus), attached to
 * event. */
int user_buses_new(sd_event *event, UserBuses **ret);
UserBuses *user_buses_free(UserBuses *b);

/* Whether the gateway may act for every key's user: a key of another user than its own needs
 * CAP_SETUID and CAP_SETGID. -EPERM with *ret_error (malloc'ed) naming the first that cannot be
 * served. Checked when keys are loaded, so that a request never finds it out. */
int user_buses_check_keys(const ApiKeys *keys, char **ret_error);

/* The connection for key's user (made now when there is none, or the last one closed). The
 * reference stays the cache's. */
int user_buses_get(UserBuses *b, const ApiKey *key, sd_bus **ret);

/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <grp.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "log.h"
#include "macro.h"
#include "user-bus.h"

#define USER_BUSES_MAX API_KEYS_MAX

typedef struct UserBus {
        uid_t uid;
        sd_bus *bus;
} UserBus;

struct UserBuses {
        sd_event *event;
        char *address;
        UserBus *buses;
        size_t n;
};

int user_buses_new(sd_event *event, UserBuses **ret) {
        UserBuses *b = calloc(1, sizeof(UserBuses));
        const char *address = getenv("DBUS_SYSTEM_BUS_ADDRESS");

        if (!b)
                return -ENOMEM;
        b->event = sd_event_ref(event);
        b->address = strdup(address && *address ? address : "unix:path=/run/dbus/system_bus_socket");
        if (!b->address) {
                user_buses_free(b);
                return -ENOMEM;
        }
        *ret = b;
        return 0;
}

UserBuses *user_buses_free(UserBuses *b) {
        if (!b)
                return NULL;
        for (size_t i = 0; i < b->n; i++)
                sd_bus_flush_close_unref(b->buses[i].bus);
        free(b->buses);
        free(b->address);
        sd_event_unref(b->event);
        free(b);
        return NULL;
}

/* This thread's credentials become the user's, or (become == false) its own again. Raw system
 * calls: glibc's wrappers would change every thread of the process. */
static int switch_credentials(const ApiKey *key, bool become, uid_t own_uid, gid_t own_gid, const gid_t *own_groups,
                              int n_own_groups) {
        if (become) {
                if (syscall(SYS_setgroups, (size_t) key->n_groups, key->groups) < 0 ||
                    syscall(SYS_setresgid, (gid_t) -1, key->gid, (gid_t) -1) < 0 ||
                    syscall(SYS_setresuid, (uid_t) -1, key->uid, (uid_t) -1) < 0)
                        return -errno;
                return 0;
        }
        /* The uid first: only it gives back the right to set the others. */
        if (syscall(SYS_setresuid, (uid_t) -1, own_uid, (uid_t) -1) < 0 ||
            syscall(SYS_setresgid, (gid_t) -1, own_gid, (gid_t) -1) < 0 ||
            syscall(SYS_setgroups, (size_t) n_own_groups, own_groups) < 0)
                return -errno;
        return 0;
}

/* Connect as key's user. sd_bus_start() connects (a local socket connects at once) and sends
 * its authentication there and then, so both the socket's credentials and what it claims are
 * the user's; the rest of the handshake runs on the event loop. */
static int connect_as(UserBuses *b, const ApiKey *key, sd_bus **ret) {
        _cleanup_(sd_bus_flush_close_unrefp) sd_bus *bus = NULL;
        uid_t own_uid = geteuid();
        gid_t own_gid = getegid(), own_groups[API_KEY_MAX_GROUPS];
        int n_own_groups, r, k;

        r = sd_bus_new(&bus);
        if (r < 0)
                return r;
        r = sd_bus_set_address(bus, b->address);
        if (r >= 0)
                r = sd_bus_set_bus_client(bus, true);
        if (r >= 0)
                r = sd_bus_negotiate_creds(bus, true, SD_BUS_CREDS_UNIQUE_NAME);
        if (r < 0)
                return r;
        if (key->uid == own_uid)
                r = sd_bus_start(bus);
        else {
                n_own_groups = getgroups(ELEMENTSOF(own_groups), own_groups);
                if (n_own_groups < 0)
                        return -errno;
                r = switch_credentials(key, true, 0, 0, NULL, 0);
                if (r >= 0)
                        r = sd_bus_start(bus);
                k = switch_credentials(key, false, own_uid, own_gid, own_groups, n_own_groups);
                if (k < 0) {
                        /* Acting on as someone else would be far worse than stopping. */
                        log_error_errno(k, "Cannot take back the gateway's own credentials: %m");
                        abort();
                }
        }
        if (r < 0)
                return r;
        r = sd_bus_attach_event(bus, b->event, SD_EVENT_PRIORITY_NORMAL);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(bus);
        return 0;
}

int user_buses_get(UserBuses *b, const ApiKey *key, sd_bus **ret) {
        UserBus *u = NULL, *l;
        int r;

        for (size_t i = 0; i < b->n; i++)
                if (b->buses[i].uid == key->uid)
                        u = &b->buses[i];
        if (u && sd_bus_is_open(u->bus) > 0) {
                *ret = u->bus;
                return 0;
        }
        if (!u) {
                if (b->n >= USER_BUSES_MAX)
                        return -E2BIG;
                l = realloc(b->buses, (b->n + 1) * sizeof(UserBus));
                if (!l)
                        return -ENOMEM;
                b->buses = l;
                u = &b->buses[b->n++];
                *u = (UserBus) { .uid = key->uid };
        } else
                u->bus = sd_bus_flush_close_unref(u->bus);
        r = connect_as(b, key, &u->bus);
        if (r < 0) {
                log_warning_errno(r, "Cannot connect to the bus as user %s: %m", key->user);
                return r;
        }
        *ret = u->bus;
        return 0;
}

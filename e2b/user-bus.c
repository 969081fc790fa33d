/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <grp.h>
#include <linux/capability.h>
#include <stdint.h>
#include <stdio.h>
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

/* The gateway's own credentials, taken back after each connect. */
typedef struct Credentials {
        uid_t uid;
        gid_t gid;
        gid_t groups[API_KEY_MAX_GROUPS];
        int n_groups;
} Credentials;

static int credentials_save(Credentials *ret) {
        int n = getgroups(ELEMENTSOF(ret->groups), ret->groups);

        if (n < 0)
                return log_error_errno(errno, "Cannot read the gateway's own groups: %m");
        ret->uid = geteuid();
        ret->gid = getegid();
        ret->n_groups = n;
        return 0;
}

/* This thread takes key's user's groups, gid and uid. Raw system calls: glibc's wrappers would
 * change every thread of the process. On failure some steps may have been taken:
 * credentials_restore() undoes them. */
static int become_user(const ApiKey *key) {
        if (syscall(SYS_setgroups, (size_t) key->n_groups, key->groups) < 0)
                return log_warning_errno(errno, "Cannot take user %s's groups (setgroups): %m", key->user);
        if (syscall(SYS_setresgid, (gid_t) -1, key->gid, (gid_t) -1) < 0)
                return log_warning_errno(errno, "Cannot take user %s's group id (setresgid): %m", key->user);
        if (syscall(SYS_setresuid, (uid_t) -1, key->uid, (uid_t) -1) < 0)
                return log_warning_errno(errno, "Cannot take user %s's user id (setresuid): %m", key->user);
        return 0;
}

/* This thread's credentials are the gateway's own again. The uid first: only it gives back the
 * right to set the others. */
static int credentials_restore(const Credentials *own) {
        if (syscall(SYS_setresuid, (uid_t) -1, own->uid, (uid_t) -1) < 0)
                return log_error_errno(errno, "Cannot take back the gateway's own user id (setresuid): %m");
        if (syscall(SYS_setresgid, (gid_t) -1, own->gid, (gid_t) -1) < 0)
                return log_error_errno(errno, "Cannot take back the gateway's own group id (setresgid): %m");
        if (syscall(SYS_setgroups, (size_t) own->n_groups, own->groups) < 0)
                return log_error_errno(errno, "Cannot take back the gateway's own groups (setgroups): %m");
        return 0;
}

/* Whether this process may take other users' credentials: CAP_SETUID and CAP_SETGID in its
 * effective set. */
static bool may_switch_credentials(void) {
        struct __user_cap_header_struct header = { .version = _LINUX_CAPABILITY_VERSION_3 };
        struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3] = {};
        uint32_t need = (UINT32_C(1) << CAP_SETUID) | (UINT32_C(1) << CAP_SETGID);

        if (syscall(SYS_capget, &header, data) < 0)
                return false;
        return (data[0].effective & need) == need;
}

int user_buses_check_keys(const ApiKeys *keys, char **ret_error) {
        uid_t own_uid = geteuid();

        if (may_switch_credentials())
                return 0;
        for (size_t i = 0; i < keys->n; i++)
                if (keys->keys[i].uid != own_uid) {
                        if (asprintf(ret_error,
                                     "the key of user %s needs CAP_SETUID and CAP_SETGID (the gateway runs as uid %u "
                                     "without them): give it both, or keep only keys of its own user",
                                     keys->keys[i].user, (unsigned) own_uid) < 0)
                                *ret_error = NULL;
                        return -EPERM;
                }
        return 0;
}

/* Connect as key's user. sd_bus_start() connects (a local socket connects at once) and sends
 * its authentication there and then, so both the socket's credentials and what it claims are
 * the user's; the rest of the handshake runs on the event loop. */
static int connect_as(UserBuses *b, const ApiKey *key, sd_bus **ret) {
        _cleanup_(sd_bus_flush_close_unrefp) sd_bus *bus = NULL;
        Credentials own;
        int r;

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
        if (key->uid == geteuid())
                r = sd_bus_start(bus);
        else {
                r = credentials_save(&own);
                if (r < 0)
                        return r;
                r = become_user(key);
                if (r >= 0)
                        r = sd_bus_start(bus);
                /* Acting on as someone else would be far worse than stopping; and the keys were
                 * checked at load (user_buses_check_keys()), so this cannot fail for want of a
                 * capability. */
                if (credentials_restore(&own) < 0)
                        abort();
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

/* SPDX-License-Identifier: MIT */
#include "agentd-errors.h"
#include "backend.h"
#include "buffer.h"
#include "hibernate.h"
#include "lifecycle.h"
#include "macro.h"
#include "metrics-dbus.h"
#include "sandbox-dbus.h"
#include "sandbox-stats.h"
#include "snapshot.h"
#include "utf8.h"

/* The object's userdata is the Manager: its sandbox comes from the path. */
static Sandbox *sandbox_of(Manager *m, const char *path) {
        _cleanup_free_ char *id = NULL;

        if (sd_bus_path_decode(path, SANDBOX_PATH_PREFIX, &id) <= 0)
                return NULL;
        return manager_get_sandbox(m, id);
}

/* The caller's labels ("key=value" each) as a{ss}. */
static int append_labels(sd_bus_message *reply, char **labels) {
        int r;

        r = sd_bus_message_open_container(reply, 'a', "{ss}");
        if (r < 0)
                return r;
        for (char **l = labels; l && *l; l++) {
                _cleanup_free_ char *key = NULL;
                const char *eq = strchr(*l, '=');

                if (!eq)
                        continue;
                key = strndup(*l, (size_t) (eq - *l));
                if (!key)
                        return -ENOMEM;
                r = sd_bus_message_append(reply, "{ss}", key, eq + 1);
                if (r < 0)
                        return r;
        }
        return sd_bus_message_close_container(reply);
}

static int property_get(sd_bus *bus, const char *path, const char *interface, const char *property,
                        sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        Sandbox *s = sandbox_of(userdata, path);
        const char *v = "";

        if (!s)
                return sd_bus_error_setf(error, AGENTD_ERROR_NO_SUCH_SANDBOX, "No sandbox at %s.", path);
        if (streq(property, "Owner"))
                return sd_bus_message_append(reply, "u", (uint32_t) s->owner);
        if (streq(property, "CreatedAt"))
                return sd_bus_message_append(reply, "t", s->created_at);
        if (streq(property, "ExpiresAt"))
                return sd_bus_message_append(reply, "t", s->expires_at);
        if (streq(property, "Labels"))
                return append_labels(reply, s->config->labels);
        if (streq(property, "CPUs"))
                return sd_bus_message_append(reply, "d", s->config->limits.cpus);
        if (streq(property, "Memory"))
                return sd_bus_message_append(reply, "t", s->config->limits.memory);
        if (streq(property, "Id"))
                v = s->id;
        else if (streq(property, "Backend"))
                v = s->config->backend;
        else if (streq(property, "Image"))
                v = s->config->image;
        else if (streq(property, "Bundle"))
                v = s->config->bundle;
        else if (streq(property, "Platform"))
                v = s->config->platform ?: "";
        else if (streq(property, "Runtime"))
                v = s->config->runtime ?: "";
        else if (streq(property, "RuntimeUrl"))
                v = s->runtime_url ?: "";
        else if (streq(property, "State"))
                v = sandbox_state_to_string(s->state);
        else if (streq(property, "ContainerId"))
                v = s->container_id ?: "";
        else if (streq(property, "Pool"))
                v = s->pool_name ?: "";
        return sd_bus_message_append(reply, "s", v);
}

/* The sandbox a method call is for, when its caller may act on it. */
static int own_sandbox(sd_bus_message *m, Manager *mgr, Sandbox **ret, sd_bus_error *error) {
        Sandbox *s = sandbox_of(mgr, sd_bus_message_get_path(m));

        if (!s)
                return sd_bus_error_setf(error, AGENTD_ERROR_NO_SUCH_SANDBOX, "No sandbox at %s.",
                                         sd_bus_message_get_path(m));
        *ret = s;
        return sandbox_check_caller(s, m, error);
}

static int method_delete(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        Sandbox *s = NULL;
        int r;

        r = own_sandbox(m, userdata, &s, error);
        if (r < 0)
                return r;
        r = lifecycle_delete(userdata, s, m);
        return r < 0 ? r : 1; /* answered once the container is gone */
}

/* Extend(t) and SetTTL(t): seconds from 1 to 10 years, then apply. */
static int expiry_method(sd_bus_message *m, void *userdata, const char *name,
                         int (*apply)(Manager *m, Sandbox *s, uint64_t seconds, sd_bus_error *error), sd_bus_error *error) {
        Sandbox *s = NULL;
        uint64_t seconds;
        int r;

        r = own_sandbox(m, userdata, &s, error);
        if (r < 0)
                return r;
        r = sd_bus_message_read(m, "t", &seconds);
        if (r < 0)
                return r;
        if (seconds == 0 || seconds > 10ULL * 365 * 24 * 3600)
                return sd_bus_error_setf(error, AGENTD_ERROR_INVALID_CONFIG, "%s takes 1 to 315360000 seconds, not %llu.",
                                         name, (unsigned long long) seconds);
        r = apply(userdata, s, seconds, error);
        if (r < 0)
                return r;
        return sd_bus_reply_method_return(m, NULL);
}

static int method_extend(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        return expiry_method(m, userdata, "Extend", lifecycle_extend, error);
}

static int method_set_ttl(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        return expiry_method(m, userdata, "SetTTL", lifecycle_set_ttl, error);
}

static int pause_or_resume(sd_bus_message *m, void *userdata, bool pause, sd_bus_error *error) {
        Sandbox *s = NULL;
        int r;

        r = own_sandbox(m, userdata, &s, error);
        if (r < 0)
                return r;
        return lifecycle_pause(userdata, s, pause, m, error);
}

static int method_pause(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        return pause_or_resume(m, userdata, true, error);
}

static int method_resume(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        return pause_or_resume(m, userdata, false, error);
}

/* Hibernate(): its processes, memory and files to disk, its memory given back (hibernate.h). */
static int method_hibernate(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        Sandbox *s = NULL;
        int r;

        r = own_sandbox(m, userdata, &s, error);
        if (r < 0)
                return r;
        return hibernate_start(userdata, s, m, error);
}

/* Snapshot(a{sv} options) → s image. Options: tag (s), the image's name. */
static int method_snapshot(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        const char *tag = NULL;
        Sandbox *s = NULL;
        int r;

        r = own_sandbox(m, userdata, &s, error);
        if (r < 0)
                return r;
        r = sd_bus_message_enter_container(m, 'a', "{sv}");
        if (r < 0)
                return r;
        while ((r = sd_bus_message_enter_container(m, 'e', "sv")) > 0) {
                const char *key;

                r = sd_bus_message_read(m, "s", &key);
                if (r < 0)
                        return r;
                if (!streq(key, "tag"))
                        return sd_bus_error_setf(error, AGENTD_ERROR_INVALID_CONFIG,
                                                 "Unknown snapshot option '%s' (there is: tag).", key);
                r = sd_bus_message_read(m, "v", "s", &tag);
                if (r < 0)
                        return sd_bus_error_setf(error, AGENTD_ERROR_INVALID_CONFIG, "Option tag is a string (s).");
                if (!tag[0] || strlen(tag) > 255)
                        return sd_bus_error_setf(error, AGENTD_ERROR_INVALID_CONFIG,
                                                 "Option tag is an image name of 1 to 255 characters.");
                r = sd_bus_message_exit_container(m);
                if (r < 0)
                        return r;
        }
        if (r < 0)
                return r;
        r = sd_bus_message_exit_container(m);
        if (r < 0)
                return r;
        return snapshot_take(userdata, s, tag, m, error);
}

/* What Logs() keeps of a long log: its end. */
#define LOGS_MAX_BYTES (4U * 1024 * 1024)
#define LOGS_MAX_LINES 100000U

static void on_logs(void *userdata, const char *text, size_t size, const char *error_name, const char *message) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *call = userdata;
        _cleanup_buffer_ Buffer valid = BUFFER_NULL;

        if (error_name) {
                (void) sd_bus_reply_method_errorf(call, error_name, "%s", message ?: "The backend gave no reason");
                return;
        }
        if (size > LOGS_MAX_BYTES) {
                text += size - LOGS_MAX_BYTES;
                size = LOGS_MAX_BYTES;
        }
        /* D-Bus strings are UTF-8 without NUL: what a program wrote need not be. */
        if (utf8_append_sanitized(&valid, (const uint8_t *) text, size) < 0 || buffer_append(&valid, "", 1) < 0) {
                (void) sd_bus_reply_method_errorf(call, SD_BUS_ERROR_NO_MEMORY, "Out of memory");
                return;
        }
        for (size_t i = 0; i + 1 < valid.len; i++)
                if (((char *) buffer_data(&valid))[i] == 0)
                        ((char *) buffer_data(&valid))[i] = ' ';
        (void) sd_bus_reply_method_return(call, "s", (const char *) buffer_data(&valid));
}

static int method_logs(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        Sandbox *s = NULL;
        uint64_t lines;
        int r;

        r = own_sandbox(m, userdata, &s, error);
        if (r < 0)
                return r;
        r = sd_bus_message_read(m, "t", &lines);
        if (r < 0)
                return r;
        if (lines == 0 || lines > LOGS_MAX_LINES)
                return sd_bus_error_setf(error, AGENTD_ERROR_INVALID_CONFIG, "Logs takes 1 to %u lines, not %llu.",
                                         LOGS_MAX_LINES, (unsigned long long) lines);
        if (!s->backend->ops->logs)
                return sd_bus_error_setf(error, AGENTD_ERROR_BACKEND_UNAVAILABLE, "The %s backend keeps no logs.",
                                         s->backend->name);
        r = s->backend->ops->logs(s->backend->state, s->id, lines, on_logs, sd_bus_message_ref(m));
        if (r < 0) {
                sd_bus_message_unref(m);
                return r;
        }
        return 1; /* answered when the backend has it */
}

static int method_get_stats(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        Sandbox *s = NULL;
        int r;

        r = own_sandbox(m, userdata, &s, error);
        if (r < 0)
                return r;
        return sandbox_stats_reply(userdata, s, m, error);
}

METRICS_COUNTED("Snapshot", method_snapshot)
METRICS_COUNTED("Delete", method_delete)
METRICS_COUNTED("Pause", method_pause)
METRICS_COUNTED("Resume", method_resume)
METRICS_COUNTED("Hibernate", method_hibernate)
METRICS_COUNTED("Logs", method_logs)
METRICS_COUNTED("GetStats", method_get_stats)
METRICS_COUNTED("Extend", method_extend)
METRICS_COUNTED("SetTTL", method_set_ttl)

const sd_bus_vtable sandbox_vtable[] = {
        SD_BUS_VTABLE_START(0),
        SD_BUS_PROPERTY("Id", "s", property_get, 0, SD_BUS_VTABLE_PROPERTY_CONST),
        SD_BUS_PROPERTY("Backend", "s", property_get, 0, SD_BUS_VTABLE_PROPERTY_CONST),
        SD_BUS_PROPERTY("Image", "s", property_get, 0, SD_BUS_VTABLE_PROPERTY_CONST),
        SD_BUS_PROPERTY("Bundle", "s", property_get, 0, SD_BUS_VTABLE_PROPERTY_CONST),
        SD_BUS_PROPERTY("Platform", "s", property_get, 0, SD_BUS_VTABLE_PROPERTY_CONST),
        SD_BUS_PROPERTY("RuntimeUrl", "s", property_get, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_PROPERTY("State", "s", property_get, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_PROPERTY("Owner", "u", property_get, 0, SD_BUS_VTABLE_PROPERTY_CONST),
        SD_BUS_PROPERTY("CreatedAt", "t", property_get, 0, SD_BUS_VTABLE_PROPERTY_CONST),
        SD_BUS_PROPERTY("ExpiresAt", "t", property_get, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_PROPERTY("ContainerId", "s", property_get, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_PROPERTY("Pool", "s", property_get, 0, SD_BUS_VTABLE_PROPERTY_CONST),
        SD_BUS_PROPERTY("Labels", "a{ss}", property_get, 0, SD_BUS_VTABLE_PROPERTY_CONST),
        SD_BUS_PROPERTY("CPUs", "d", property_get, 0, SD_BUS_VTABLE_PROPERTY_CONST),
        SD_BUS_PROPERTY("Memory", "t", property_get, 0, SD_BUS_VTABLE_PROPERTY_CONST),
        SD_BUS_PROPERTY("Runtime", "s", property_get, 0, SD_BUS_VTABLE_PROPERTY_CONST),
        SD_BUS_METHOD("Delete", "", "", method_delete_counted, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD("Pause", "", "", method_pause_counted, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD("Resume", "", "", method_resume_counted, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD("Hibernate", "", "", method_hibernate_counted, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_NAMES("Snapshot", "a{sv}", SD_BUS_PARAM(options), "s", SD_BUS_PARAM(image),
                                 method_snapshot_counted, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_NAMES("Logs", "t", SD_BUS_PARAM(lines), "s", SD_BUS_PARAM(text), method_logs_counted,
                                 SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_NAMES("GetStats", "", , "a{sv}", SD_BUS_PARAM(stats), method_get_stats_counted,
                                 SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_NAMES("Extend", "t", SD_BUS_PARAM(seconds), "", , method_extend_counted,
                                 SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_NAMES("SetTTL", "t", SD_BUS_PARAM(seconds), "", , method_set_ttl_counted,
                                 SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_VTABLE_END
};

/* Whether the caller of the message being handled may see s. With no message being handled,
 * agentd itself is asking (emitting PropertiesChanged, say): it sees all. */
static bool caller_sees(sd_bus *bus, const Sandbox *s) {
        sd_bus_message *m = sd_bus_get_current_message(bus);
        uid_t uid;

        if (!m)
                return true;
        return sender_uid(m, &uid) >= 0 && sandbox_visible_to(s, uid);
}

int sandbox_object_find(sd_bus *bus, const char *path, const char *interface, void *userdata, void **found,
                        sd_bus_error *error) {
        Sandbox *s = sandbox_of(userdata, path);

        /* Another user's sandbox is no object of theirs. */
        if (!s || !caller_sees(bus, s))
                return 0;
        *found = userdata;
        return 1;
}

int sandbox_node_enumerator(sd_bus *bus, const char *path, void *userdata, char ***nodes, sd_bus_error *error) {
        Manager *m = userdata;
        size_t n = strmap_size(m->sandboxes), i = 0, state = 0;
        char **l = calloc(n + 1, sizeof(char *));
        Sandbox *s;

        if (!l)
                return -ENOMEM;
        while ((s = strmap_iterate(m->sandboxes, &state)) && i < n) {
                if (!caller_sees(bus, s))
                        continue;
                l[i] = strdup(s->path);
                if (!l[i]) {
                        for (size_t k = 0; k < i; k++)
                                free(l[k]);
                        free(l);
                        return -ENOMEM;
                }
                i++;
        }
        *nodes = l;
        return 1;
}

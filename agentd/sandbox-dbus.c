/* SPDX-License-Identifier: MIT */
#include "agentd-errors.h"
#include "log.h"
#include "manager.h"
#include "sandbox-dbus.h"

static int property_string(sd_bus *bus, const char *path, const char *interface, const char *property,
                           sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        Sandbox *s = userdata;
        const char *v = "";

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
        else if (streq(property, "RuntimeUrl"))
                v = s->runtime_url ?: "";
        else if (streq(property, "State"))
                v = sandbox_state_to_string(s->state);
        else if (streq(property, "ContainerId"))
                v = s->container_id ?: "";
        return sd_bus_message_append(reply, "s", v);
}

static int caller_uid(sd_bus_message *m, uid_t *ret) {
        _cleanup_(sd_bus_creds_unrefp) sd_bus_creds *creds = NULL;
        int r;

        r = sd_bus_query_sender_creds(m, SD_BUS_CREDS_EUID, &creds);
        if (r < 0)
                return r;
        return sd_bus_creds_get_euid(creds, ret);
}

int sandbox_check_caller(Sandbox *s, sd_bus_message *m, sd_bus_error *error) {
        uid_t uid;
        int r;

        r = caller_uid(m, &uid);
        if (r < 0)
                return r;
        if (uid != 0 && uid != s->owner)
                return sd_bus_error_setf(error, AGENTD_ERROR_NOT_OWNER,
                                         "Sandbox %s belongs to uid %u, not to you (uid %u).", s->id, (unsigned) s->owner,
                                         (unsigned) uid);
        return 0;
}

static int method_delete(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        Sandbox *s = userdata;
        int r;

        r = sandbox_check_caller(s, m, error);
        if (r < 0)
                return r;
        r = sandbox_delete(s, m);
        return r < 0 ? r : 1; /* answered once the container is gone */
}

static int method_extend(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        Sandbox *s = userdata;
        uint64_t seconds;
        int r;

        r = sandbox_check_caller(s, m, error);
        if (r < 0)
                return r;
        r = sd_bus_message_read(m, "t", &seconds);
        if (r < 0)
                return r;
        if (seconds == 0 || seconds > 10ULL * 365 * 24 * 3600)
                return sd_bus_error_setf(error, AGENTD_ERROR_INVALID_CONFIG, "Extend takes 1 to 315360000 seconds, not %llu.",
                                         (unsigned long long) seconds);
        s->expires_at += seconds * 1000000ULL;
        manager_schedule_reaper(s->manager);
        (void) sd_bus_emit_properties_changed(sd_bus_message_get_bus(m), s->path, SANDBOX_INTERFACE, "ExpiresAt", NULL);
        return sd_bus_reply_method_return(m, NULL);
}

const sd_bus_vtable sandbox_vtable[] = {
        SD_BUS_VTABLE_START(0),
        SD_BUS_PROPERTY("Id", "s", property_string, 0, SD_BUS_VTABLE_PROPERTY_CONST),
        SD_BUS_PROPERTY("Backend", "s", property_string, 0, SD_BUS_VTABLE_PROPERTY_CONST),
        SD_BUS_PROPERTY("Image", "s", property_string, 0, SD_BUS_VTABLE_PROPERTY_CONST),
        SD_BUS_PROPERTY("Bundle", "s", property_string, 0, SD_BUS_VTABLE_PROPERTY_CONST),
        SD_BUS_PROPERTY("Platform", "s", property_string, 0, SD_BUS_VTABLE_PROPERTY_CONST),
        SD_BUS_PROPERTY("RuntimeUrl", "s", property_string, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_PROPERTY("State", "s", property_string, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_PROPERTY("Owner", "u", NULL, offsetof(Sandbox, owner), SD_BUS_VTABLE_PROPERTY_CONST),
        SD_BUS_PROPERTY("CreatedAt", "t", NULL, offsetof(Sandbox, created_at), SD_BUS_VTABLE_PROPERTY_CONST),
        SD_BUS_PROPERTY("ExpiresAt", "t", NULL, offsetof(Sandbox, expires_at), SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_PROPERTY("ContainerId", "s", property_string, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_METHOD("Delete", "", "", method_delete, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_NAMES("Extend", "t", SD_BUS_PARAM(seconds), "", , method_extend,
                                 SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_VTABLE_END
};

int sandbox_object_find(sd_bus *bus, const char *path, const char *interface, void *userdata, void **found,
                        sd_bus_error *error) {
        _cleanup_free_ char *id = NULL;
        Manager *m = userdata;
        Sandbox *s;
        int r;

        r = sd_bus_path_decode(path, SANDBOX_PATH_PREFIX, &id);
        if (r <= 0)
                return 0;
        s = manager_get_sandbox(m, id);
        if (!s)
                return 0;
        *found = s;
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

void sandbox_dbus_new(Sandbox *s) {
        (void) sd_bus_emit_signal(s->manager->bus, MANAGER_PATH, MANAGER_INTERFACE, "SandboxNew", "so", s->id, s->path);
}

void sandbox_dbus_removed(Sandbox *s) {
        (void) sd_bus_emit_signal(s->manager->bus, MANAGER_PATH, MANAGER_INTERFACE, "SandboxRemoved", "so", s->id,
                                  s->path);
}

void sandbox_dbus_state_changed(Sandbox *s) {
        (void) sd_bus_emit_properties_changed(s->manager->bus, s->path, SANDBOX_INTERFACE, "State", "RuntimeUrl",
                                              "ContainerId", NULL);
}

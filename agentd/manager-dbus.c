/* SPDX-License-Identifier: MIT */
#include <systemd/sd-daemon.h>
#include <time.h>

#include "agentd-errors.h"
#include "hibernate.h"
#include "lifecycle.h"
#include "log.h"
#include "manager-dbus.h"
#include "metrics-dbus.h"
#include "pool.h"
#include "proxy-token.h"
#include "quota.h"
#include "sandbox-dbus.h"
#include "snapshot.h"
#include "strv.h"

static int get_sandbox(Manager *m, sd_bus_message *msg, Sandbox **ret, sd_bus_error *error) {
        const char *id;
        Sandbox *s;
        int r;

        r = sd_bus_message_read(msg, "s", &id);
        if (r < 0)
                return r;
        s = manager_get_sandbox(m, id);
        if (!s)
                return sd_bus_error_setf(error, AGENTD_ERROR_NO_SUCH_SANDBOX, "No sandbox '%s' (ListSandboxes shows them).",
                                         id);
        *ret = s;
        return 0;
}

/* The sandbox the message's id names, when the caller may act on it (its owner, or root). */
static int get_own_sandbox(Manager *m, sd_bus_message *msg, Sandbox **ret, sd_bus_error *error) {
        int r = get_sandbox(m, msg, ret, error);

        return r < 0 ? r : sandbox_check_caller(*ret, msg, error);
}

static int method_create_sandbox(sd_bus_message *msg, void *userdata, sd_bus_error *error) {
        _cleanup_(sd_bus_creds_unrefp) sd_bus_creds *creds = NULL;
        Manager *m = userdata;
        SandboxConfig *config = NULL;
        uid_t uid;
        int r;

        if (m->stopping)
                return sd_bus_error_setf(error, AGENTD_ERROR_BACKEND_UNAVAILABLE,
                                         "agentd is stopping (deleting its sandboxes): try again when it is back.");
        r = sd_bus_query_sender_creds(msg, SD_BUS_CREDS_EUID, &creds);
        if (r >= 0)
                r = sd_bus_creds_get_euid(creds, &uid);
        if (r < 0)
                return r;
        r = sandbox_config_read(msg, &m->config->defaults, &m->config->maxima, m->config->max_ttl_sec,
                                m->config->default_backend, &config, error);
        if (r < 0)
                return r;
        if (config->pool) {
                r = pool_config_apply(m, config, error);
                if (r < 0)
                        return r;
        }
        r = sandbox_config_apply_runtimes(config, m->config->allowed_runtimes, m->config->default_runtime, error);
        if (r < 0)
                return r;
        r = lifecycle_create(m, config, uid, msg, error);
        return r < 0 ? r : 1; /* answered when the runtime answers /health */
}

static int method_get_sandbox(sd_bus_message *msg, void *userdata, sd_bus_error *error) {
        Sandbox *s = NULL;
        int r;

        r = get_own_sandbox(userdata, msg, &s, error);
        if (r < 0)
                return r;
        return sd_bus_reply_method_return(msg, "o", s->path);
}

static int method_list_sandboxes(sd_bus_message *msg, void *userdata, sd_bus_error *error) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        Manager *m = userdata;
        size_t state = 0;
        Sandbox *s;
        uid_t uid;
        int r;

        r = sender_uid(msg, &uid);
        if (r < 0)
                return r;
        r = sd_bus_message_new_method_return(msg, &reply);
        if (r < 0)
                return r;
        r = sd_bus_message_open_container(reply, 'a', "(ssso)");
        if (r < 0)
                return r;
        while ((s = strmap_iterate(m->sandboxes, &state))) {
                if (!sandbox_visible_to(s, uid))
                        continue; /* a user sees their own; root sees all */
                r = sd_bus_message_append(reply, "(ssso)", s->id, s->config->image, sandbox_state_to_string(s->state),
                                          s->path);
                if (r < 0)
                        return r;
        }
        r = sd_bus_message_close_container(reply);
        if (r < 0)
                return r;
        return sd_bus_send(NULL, reply, NULL);
}

static int method_delete_sandbox(sd_bus_message *msg, void *userdata, sd_bus_error *error) {
        Sandbox *s = NULL;
        int r;

        r = get_own_sandbox(userdata, msg, &s, error);
        if (r < 0)
                return r;
        r = lifecycle_delete(userdata, s, msg);
        return r < 0 ? r : 1;
}

static int answer_runtime_access(Sandbox *s, sd_bus_message *msg) {
        return sd_bus_reply_method_return(msg, "ss", s->runtime_url, s->token);
}

static int method_get_runtime_access(sd_bus_message *msg, void *userdata, sd_bus_error *error) {
        Sandbox *s = NULL;
        int r;

        r = get_own_sandbox(userdata, msg, &s, error);
        if (r < 0)
                return r;
        /* Hibernated (or on its way there or back): answered once it runs again. */
        r = hibernate_wait_running(userdata, s, msg, answer_runtime_access, error);
        if (r != 0)
                return r;
        /* A paused sandbox's runtime answers once it is resumed: calls wait meanwhile. */
        if ((s->state != SANDBOX_RUNNING && s->state != SANDBOX_PAUSED) || !s->runtime_url)
                return sd_bus_error_setf(error, AGENTD_ERROR_START_FAILED, "Sandbox %s is %s, not running.", s->id,
                                         sandbox_state_to_string(s->state));
        return sd_bus_reply_method_return(msg, "ss", s->runtime_url, s->token);
}

static int answer_port_url(Sandbox *s, sd_bus_message *msg) {
        _cleanup_free_ char *url = NULL;
        char token[PROXY_TOKEN_LEN + 1];
        const char *id;
        uint16_t port;
        int r;

        /* Read again: it may have waited for the sandbox to run (hibernate_wait_running()). */
        r = sd_bus_message_rewind(msg, true);
        if (r < 0)
                return r;
        r = sd_bus_message_read(msg, "sq", &id, &port);
        if (r < 0)
                return r;
        if (proxy_token(s->token, port, token) < 0 || asprintf(&url, "%s/proxy/%u/", s->runtime_url, port) < 0)
                return -ENOMEM;
        return sd_bus_reply_method_return(msg, "ss", url, token);
}

/* The address of a port of the sandbox through its runtime's proxy (/proxy/PORT/), and that
 * port's token (proxy-token.h): the owner's and root's. */
static int method_get_port_url(sd_bus_message *msg, void *userdata, sd_bus_error *error) {
        Sandbox *s = NULL;
        uint16_t port;
        int r;

        r = get_own_sandbox(userdata, msg, &s, error);
        if (r < 0)
                return r;
        r = sd_bus_message_read(msg, "q", &port);
        if (r < 0)
                return r;
        if (port == 0)
                return sd_bus_error_setf(error, AGENTD_ERROR_INVALID_CONFIG, "Ports go from 1 to 65535.");
        r = hibernate_wait_running(userdata, s, msg, answer_port_url, error);
        if (r != 0)
                return r;
        if ((s->state != SANDBOX_RUNNING && s->state != SANDBOX_PAUSED) || !s->runtime_url)
                return sd_bus_error_setf(error, AGENTD_ERROR_NOT_RUNNING, "Sandbox %s is %s, not running.", s->id,
                                         sandbox_state_to_string(s->state));
        return answer_port_url(s, msg);
}

/* a(suu): each pool agentd.conf's pools.d names, its ready sandboxes and its Size=. */
static int method_list_pools(sd_bus_message *msg, void *userdata, sd_bus_error *error) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        Manager *m = userdata;
        int r;

        r = sd_bus_message_new_method_return(msg, &reply);
        if (r >= 0)
                r = sd_bus_message_open_container(reply, 'a', "(suu)");
        for (size_t i = 0; r >= 0 && i < m->n_pools; i++) {
                Pool *p = m->pools[i];
                if (p->config)
                        r = sd_bus_message_append(reply, "(suu)", p->config->name, (uint32_t) p->n_ready,
                                                  (uint32_t) p->config->size);
        }
        if (r >= 0)
                r = sd_bus_message_close_container(reply);
        return r < 0 ? r : sd_bus_send(NULL, reply, NULL);
}

/* a{ss}: each pool that cannot make sandboxes now, and why (its last failure). */
static int property_pool_errors(sd_bus *bus, const char *path, const char *interface, const char *property,
                                sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        Manager *m = userdata;
        int r;

        r = sd_bus_message_open_container(reply, 'a', "{ss}");
        for (size_t i = 0; r >= 0 && i < m->n_pools; i++)
                if (m->pools[i]->config && m->pools[i]->error)
                        r = sd_bus_message_append(reply, "{ss}", m->pools[i]->name, m->pools[i]->error);
        return r < 0 ? r : sd_bus_message_close_container(reply);
}

int manager_dbus_reload(Manager *m, sd_bus_error *error) {
        _cleanup_free_ char *why = NULL;
        struct timespec ts;
        int r;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        (void) sd_notifyf(false, "RELOADING=1\nMONOTONIC_USEC=%llu\nSTATUS=Reloading %s",
                          (unsigned long long) ts.tv_sec * 1000000ULL + (unsigned long long) ts.tv_nsec / 1000, m->config_path);
        r = manager_reload(m, &why);
        if (r >= 0)
                pools_sync(m); /* at once: the pools still point into the configuration just freed */
        (void) sd_notify(false, "READY=1");
        manager_notify_status(m);
        if (r < 0) {
                log_error("Reload failed, the configuration in effect is unchanged: %s", why ?: strerror(-r));
                return sd_bus_error_setf(error, AGENTD_ERROR_INVALID_CONFIG,
                                         "Reload failed, the configuration in effect is unchanged: %s", why ?: strerror(-r));
        }
        log_info("Reloaded %s.", m->config_path);
        (void) sd_bus_emit_properties_changed(m->bus, MANAGER_PATH, MANAGER_INTERFACE, "DefaultBackend", "DefaultRuntime",
                                              NULL);
        return 0;
}

/* a(ssutt): image, sandbox, owner, created, size of the caller's snapshots (root: everyone's). */
static int method_list_snapshots(sd_bus_message *msg, void *userdata, sd_bus_error *error) {
        uid_t uid;
        int r;

        r = sender_uid(msg, &uid);
        if (r < 0)
                return r;
        return snapshot_list(userdata, uid, msg);
}

/* GetUsage(): the caller's usage and quotas. GetUsageOf(u uid): anyone's, for root (and the
 * user themself). */
static int method_get_usage(sd_bus_message *msg, void *userdata, sd_bus_error *error) {
        uid_t caller;
        int r;

        r = sender_uid(msg, &caller);
        if (r < 0)
                return r;
        return quota_usage_reply(userdata, caller, msg);
}

static int method_get_usage_of(sd_bus_message *msg, void *userdata, sd_bus_error *error) {
        uid_t caller;
        uint32_t uid;
        int r;

        r = sender_uid(msg, &caller);
        if (r < 0)
                return r;
        r = sd_bus_message_read(msg, "u", &uid);
        if (r < 0)
                return r;
        if (uid != caller && caller != 0)
                return sd_bus_error_setf(error, AGENTD_ERROR_NOT_OWNER, "Only root may ask for another user's usage.");
        return quota_usage_reply(userdata, uid, msg);
}

static int method_delete_snapshot(sd_bus_message *msg, void *userdata, sd_bus_error *error) {
        const char *image;
        uid_t uid;
        int r;

        r = sender_uid(msg, &uid);
        if (r < 0)
                return r;
        r = sd_bus_message_read(msg, "s", &image);
        if (r < 0)
                return r;
        if (!image[0])
                return sd_bus_error_setf(error, AGENTD_ERROR_NO_SUCH_SNAPSHOT, "Name a snapshot (an image name).");
        return snapshot_delete(userdata, image, uid, msg);
}

static int method_reload(sd_bus_message *msg, void *userdata, sd_bus_error *error) {
        uid_t uid;
        int r;

        r = sender_uid(msg, &uid);
        if (r < 0)
                return r;
        if (uid != 0)
                return sd_bus_error_setf(error, SD_BUS_ERROR_ACCESS_DENIED,
                                         "Only root may reload agentd (you are uid %u).", (unsigned) uid);
        r = manager_dbus_reload(userdata, error);
        return r < 0 ? r : sd_bus_reply_method_return(msg, "");
}

/* a(sss): each backend Load= names, "loaded" or "failed", and its file or why it failed. */
static int property_backends(sd_bus *bus, const char *path, const char *interface, const char *property,
                             sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        Manager *m = userdata;
        int r;

        r = sd_bus_message_open_container(reply, 'a', "(sss)");
        for (size_t i = 0; r >= 0 && i < m->n_backends; i++) {
                Backend *b = m->backends[i];
                r = sd_bus_message_append(reply, "(sss)", b->name, b->state ? "loaded" : "failed",
                                           b->state ? b->path : b->error ?: "");
        }
        return r < 0 ? r : sd_bus_message_close_container(reply);
}

/* Each loaded backend's runtimes (as its service reports them), and whether agentd.conf's
 * [Runtimes] Allowed= lets creates name them. */
static int property_runtimes(sd_bus *bus, const char *path, const char *interface, const char *property,
                             sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        Manager *m = userdata;
        int r;

        r = sd_bus_message_open_container(reply, 'a', "(ssb)");
        for (size_t i = 0; r >= 0 && i < m->n_backends; i++) {
                Backend *b = m->backends[i];
                _cleanup_strv_free_ char **names = NULL;

                if (!b->state || !b->ops->runtimes || b->ops->runtimes(b->state, &names) < 0)
                        continue; /* none, or not known yet */
                for (char **n = names; r >= 0 && *n; n++)
                        r = sd_bus_message_append(reply, "(ssb)", b->name, *n,
                                                  strv_isempty(m->config->allowed_runtimes) ||
                                                          strv_contains(m->config->allowed_runtimes, *n));
        }
        return r < 0 ? r : sd_bus_message_close_container(reply);
}

static int property_default_runtime(sd_bus *bus, const char *path, const char *interface, const char *property,
                                    sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        Manager *m = userdata;

        return sd_bus_message_append(reply, "s", m->config->default_runtime ?: "");
}

/* agentd's runtime CA, PEM: what clients verify https:// runtimes with; "" without TLS. */
static int property_runtime_ca(sd_bus *bus, const char *path, const char *interface, const char *property,
                               sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        return sd_bus_message_append(reply, "s", manager_runtime_ca_pem(userdata) ?: "");
}

static int property_default_backend(sd_bus *bus, const char *path, const char *interface, const char *property,
                                    sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        Manager *m = userdata;

        return sd_bus_message_append(reply, "s", m->config->default_backend);
}

METRICS_COUNTED("CreateSandbox", method_create_sandbox)
METRICS_COUNTED("GetSandbox", method_get_sandbox)
METRICS_COUNTED("ListSandboxes", method_list_sandboxes)
METRICS_COUNTED("DeleteSandbox", method_delete_sandbox)
METRICS_COUNTED("GetPortUrl", method_get_port_url)
METRICS_COUNTED("ListPools", method_list_pools)
METRICS_COUNTED("ListSnapshots", method_list_snapshots)
METRICS_COUNTED("DeleteSnapshot", method_delete_snapshot)
METRICS_COUNTED("GetUsage", method_get_usage)
METRICS_COUNTED("GetRuntimeAccess", method_get_runtime_access)
METRICS_COUNTED("GetUsageOf", method_get_usage_of)
METRICS_COUNTED("Reload", method_reload)

static const sd_bus_vtable manager_vtable[] = {
        SD_BUS_VTABLE_START(0),
        SD_BUS_PROPERTY("Backends", "a(sss)", property_backends, 0, SD_BUS_VTABLE_PROPERTY_CONST),
        SD_BUS_PROPERTY("DefaultBackend", "s", property_default_backend, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_PROPERTY("Runtimes", "a(ssb)", property_runtimes, 0, 0),
        SD_BUS_PROPERTY("DefaultRuntime", "s", property_default_runtime, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_PROPERTY("PoolErrors", "a{ss}", property_pool_errors, 0, 0),
        SD_BUS_PROPERTY("RuntimeCA", "s", property_runtime_ca, 0, SD_BUS_VTABLE_PROPERTY_CONST),
        SD_BUS_METHOD_WITH_NAMES("CreateSandbox", "a{sv}", SD_BUS_PARAM(config), "os", SD_BUS_PARAM(sandbox) SD_BUS_PARAM(id),
                                 method_create_sandbox_counted, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_NAMES("GetSandbox", "s", SD_BUS_PARAM(id), "o", SD_BUS_PARAM(sandbox), method_get_sandbox_counted,
                                 SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_NAMES("ListSandboxes", "", , "a(ssso)", SD_BUS_PARAM(sandboxes), method_list_sandboxes_counted,
                                 SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_NAMES("DeleteSandbox", "s", SD_BUS_PARAM(id), "", , method_delete_sandbox_counted,
                                 SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_NAMES("GetRuntimeAccess", "s", SD_BUS_PARAM(id), "ss", SD_BUS_PARAM(url) SD_BUS_PARAM(token),
                                 method_get_runtime_access_counted, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_NAMES("GetPortUrl", "sq", SD_BUS_PARAM(id) SD_BUS_PARAM(port), "ss",
                                 SD_BUS_PARAM(url) SD_BUS_PARAM(token), method_get_port_url_counted, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_NAMES("ListPools", "", , "a(suu)", SD_BUS_PARAM(pools), method_list_pools_counted,
                                 SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_NAMES("ListSnapshots", "", , "a(ssutt)", SD_BUS_PARAM(snapshots), method_list_snapshots_counted,
                                 SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_NAMES("DeleteSnapshot", "s", SD_BUS_PARAM(image), "", , method_delete_snapshot_counted,
                                 SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_NAMES("GetUsage", "", , "a{sv}", SD_BUS_PARAM(usage), method_get_usage_counted,
                                 SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_NAMES("GetUsageOf", "u", SD_BUS_PARAM(uid), "a{sv}", SD_BUS_PARAM(usage),
                                 method_get_usage_of_counted, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD("Reload", "", "", method_reload_counted, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_SIGNAL_WITH_NAMES("SandboxNew", "so", SD_BUS_PARAM(id) SD_BUS_PARAM(sandbox), 0),
        SD_BUS_SIGNAL_WITH_NAMES("SandboxRemoved", "so", SD_BUS_PARAM(id) SD_BUS_PARAM(sandbox), 0),
        SD_BUS_VTABLE_END
};

int manager_dbus_register(Manager *m) {
        int r;

        r = sd_bus_add_object_vtable(m->bus, NULL, MANAGER_PATH, MANAGER_INTERFACE, manager_vtable, m);
        if (r < 0)
                return log_error_errno(r, "Failed to publish %s: %m", MANAGER_PATH);
        r = sd_bus_add_fallback_vtable(m->bus, NULL, SANDBOX_PATH_PREFIX, SANDBOX_INTERFACE, sandbox_vtable,
                                       sandbox_object_find, m);
        if (r < 0)
                return log_error_errno(r, "Failed to publish the sandbox objects: %m");
        r = sd_bus_add_node_enumerator(m->bus, NULL, SANDBOX_PATH_PREFIX, sandbox_node_enumerator, m);
        if (r < 0)
                return log_error_errno(r, "Failed to add the sandbox node enumerator: %m");
        return 0;
}

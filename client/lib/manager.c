/* SPDX-License-Identifier: MIT */
/* Sandboxes through agentd: blocking sd-bus calls to org.agentix.Agentd1. */
#include <systemd/sd-bus.h>

#include "agentix.h"
#include "error.h"
#include "macro.h"

#define BUS_NAME "org.agentix.Agentd1"
#define MANAGER_PATH "/org/agentix/Agentd1"
#define MANAGER_INTERFACE "org.agentix.Agentd1.Manager"
#define SANDBOX_INTERFACE "org.agentix.Agentd1.Sandbox"
#define ERROR_PREFIX "org.agentix.Agentd1."
#define CREATE_TIMEOUT_USEC (120ULL * 1000 * 1000)

struct agentix_manager {
        sd_bus *bus;
        bool user;
};

/* A failed bus call as an agentix_error: agentd's own errors by name, the rest as what they are. */
static int bus_error(agentix_error *e, const sd_bus_error *be, int r, const char *what) {
        if (sd_bus_error_is_set(be) && strneq(be->name, ERROR_PREFIX, STRLEN(ERROR_PREFIX)))
                return error_set_typed(e, AGENTIX_E_SANDBOX, -EREMOTEIO, be->name + STRLEN(ERROR_PREFIX), "%s",
                                       strna(be->message));
        if (sd_bus_error_has_name(be, SD_BUS_ERROR_SERVICE_UNKNOWN) || sd_bus_error_has_name(be, SD_BUS_ERROR_NAME_HAS_NO_OWNER))
                return error_set(e, AGENTIX_E_CONNECTION, -EHOSTDOWN, "%s: agentd is not running (no %s on the bus)", what,
                                 BUS_NAME);
        if (sd_bus_error_has_name(be, SD_BUS_ERROR_ACCESS_DENIED))
                return error_set(e, AGENTIX_E_UNAUTHORIZED, -EACCES,
                                 "%s: the bus refused the call: only root and the group agentix may talk to agentd", what);
        if (sd_bus_error_has_name(be, SD_BUS_ERROR_NO_REPLY) || r == -ETIMEDOUT)
                return error_set(e, AGENTIX_E_TIMEOUT, -ETIMEDOUT, "%s: agentd did not answer in time", what);
        if (sd_bus_error_is_set(be))
                return error_set(e, AGENTIX_E_CONNECTION, r < 0 ? r : -EIO, "%s: %s", what, strna(be->message));
        return error_set(e, AGENTIX_E_CONNECTION, r < 0 ? r : -EIO, "%s: %s", what, strerror(r < 0 ? -r : EIO));
}

AGENTIX_API int agentix_manager_open(bool user, agentix_manager **ret, agentix_error *ret_error) {
        agentix_manager *m = calloc(1, sizeof(*m));
        int r;

        if (!m)
                return error_set(ret_error, AGENTIX_E_OVERFLOW, -ENOMEM, "out of memory");
        m->user = user;
        r = user ? sd_bus_open_user(&m->bus) : sd_bus_open_system(&m->bus);
        if (r < 0) {
                free(m);
                return error_set(ret_error, AGENTIX_E_CONNECTION, r, "cannot connect to the %s bus: %s",
                                 user ? "session" : "system", strerror(-r));
        }
        *ret = m;
        return 0;
}

AGENTIX_API agentix_manager *agentix_manager_free(agentix_manager *m) {
        if (!m)
                return NULL;
        sd_bus_flush_close_unref(m->bus);
        free(m);
        return NULL;
}

static int append_pairs(sd_bus_message *msg, const char *key, const char *const *l) {
        int r;

        if (!l)
                return 0;
        r = sd_bus_message_open_container(msg, 'e', "sv");
        if (r >= 0)
                r = sd_bus_message_append(msg, "s", key);
        if (r >= 0)
                r = sd_bus_message_open_container(msg, 'v', "a{ss}");
        if (r >= 0)
                r = sd_bus_message_open_container(msg, 'a', "{ss}");
        for (const char *const *p = l; r >= 0 && *p; p++) {
                const char *eq = strchr(*p, '=');
                _cleanup_free_ char *k = eq ? strndup(*p, eq - *p) : NULL;

                if (!eq)
                        return -EINVAL;
                if (!k)
                        return -ENOMEM;
                r = sd_bus_message_append(msg, "{ss}", k, eq + 1);
        }
        if (r >= 0)
                r = sd_bus_message_close_container(msg);
        if (r >= 0)
                r = sd_bus_message_close_container(msg);
        if (r >= 0)
                r = sd_bus_message_close_container(msg);
        return r;
}

static int append_list(sd_bus_message *msg, const char *key, const char *const *l) {
        int r;

        r = sd_bus_message_open_container(msg, 'e', "sv");
        if (r >= 0)
                r = sd_bus_message_append(msg, "s", key);
        if (r >= 0)
                r = sd_bus_message_open_container(msg, 'v', "as");
        if (r >= 0)
                r = sd_bus_message_append_strv(msg, (char **) l);
        if (r >= 0)
                r = sd_bus_message_close_container(msg);
        if (r >= 0)
                r = sd_bus_message_close_container(msg);
        return r;
}

static int append_config(sd_bus_message *msg, const agentix_sandbox_config *c) {
        const struct {
                const char *key, *value;
        } strings[] = {
                { "image", c->image },     { "bundle", c->bundle },   { "platform", c->platform },
                { "backend", c->backend }, { "network", c->network }, { "workdir", c->workdir },
                { "setup", c->setup },     { "runtime", c->runtime }, { "user", c->user },
        };
        int r;

        r = sd_bus_message_open_container(msg, 'a', "{sv}");
        for (size_t i = 0; r >= 0 && i < ELEMENTSOF(strings); i++)
                if (strings[i].value)
                        r = sd_bus_message_append(msg, "{sv}", strings[i].key, "s", strings[i].value);
        if (r >= 0 && c->ttl_sec)
                r = sd_bus_message_append(msg, "{sv}", "ttl", "t", c->ttl_sec);
        if (r >= 0 && c->cpus > 0)
                r = sd_bus_message_append(msg, "{sv}", "cpus", "d", c->cpus);
        if (r >= 0 && c->memory)
                r = sd_bus_message_append(msg, "{sv}", "memory", "t", c->memory);
        if (r >= 0 && c->pids)
                r = sd_bus_message_append(msg, "{sv}", "pids", "t", c->pids);
        if (r >= 0 && c->bind_to_caller)
                r = sd_bus_message_append(msg, "{sv}", "bind_to_caller", "b", 1);
        if (r >= 0 && c->read_only)
                r = sd_bus_message_append(msg, "{sv}", "read_only", "b", 1);
        if (r >= 0)
                r = append_pairs(msg, "env", c->env);
        if (r >= 0)
                r = append_pairs(msg, "labels", c->labels);
        if (r >= 0 && c->egress)
                r = append_list(msg, "egress", c->egress);
        if (r >= 0)
                r = sd_bus_message_close_container(msg);
        return r;
}

AGENTIX_API int agentix_sandbox_create(agentix_manager *m, const agentix_sandbox_config *c, char **ret_id,
                                       agentix_error *ret_error) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *msg = NULL, *reply = NULL;
        _cleanup_(sd_bus_error_free) sd_bus_error be = SD_BUS_ERROR_NULL;
        const char *path, *id;
        int r;

        if (!m || !c || !c->image || !c->bundle || !ret_id)
                return error_set(ret_error, AGENTIX_E_INVALID, -EINVAL, "a sandbox needs an image and a bundle");
        r = sd_bus_message_new_method_call(m->bus, &msg, BUS_NAME, MANAGER_PATH, MANAGER_INTERFACE, "CreateSandbox");
        if (r >= 0)
                r = append_config(msg, c);
        if (r == -EINVAL)
                return error_set(ret_error, AGENTIX_E_INVALID, r, "env and labels take NAME=VALUE items");
        if (r < 0)
                return error_set(ret_error, AGENTIX_E_OVERFLOW, r, "cannot build the request: %s", strerror(-r));
        r = sd_bus_call(m->bus, msg, c->timeout_usec ?: CREATE_TIMEOUT_USEC, &be, &reply);
        if (r < 0)
                return bus_error(ret_error, &be, r, "cannot create the sandbox");
        r = sd_bus_message_read(reply, "os", &path, &id);
        if (r < 0)
                return error_set(ret_error, AGENTIX_E_PROTOCOL, r, "agentd answered CreateSandbox oddly");
        *ret_id = strdup(id);
        return *ret_id ? 0 : error_set(ret_error, AGENTIX_E_OVERFLOW, -ENOMEM, "out of memory");
}

AGENTIX_API int agentix_sandbox_delete(agentix_manager *m, const char *id, agentix_error *ret_error) {
        _cleanup_(sd_bus_error_free) sd_bus_error be = SD_BUS_ERROR_NULL;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *msg = NULL;
        int r;

        r = sd_bus_message_new_method_call(m->bus, &msg, BUS_NAME, MANAGER_PATH, MANAGER_INTERFACE, "DeleteSandbox");
        if (r >= 0)
                r = sd_bus_message_append(msg, "s", id);
        if (r >= 0)
                r = sd_bus_call(m->bus, msg, CREATE_TIMEOUT_USEC, &be, NULL);
        return r < 0 ? bus_error(ret_error, &be, r, "cannot delete the sandbox") : 0;
}

#define SNAPSHOT_TIMEOUT_USEC (15ULL * 60 * 1000 * 1000) /* agentd's commit of a large filesystem */

/* Call method on sandbox id's object (args: its arguments, appended by the caller) and keep the
 * reply; an id agentd does not know is NoSuchSandbox. what: for the error message. */
static int call_sandbox(agentix_manager *m, const char *id, sd_bus_message *msg, uint64_t timeout_usec,
                        sd_bus_message **ret_reply, agentix_error *ret_error, const char *what) {
        _cleanup_(sd_bus_error_free) sd_bus_error be = SD_BUS_ERROR_NULL;
        int r;

        r = sd_bus_call(m->bus, msg, timeout_usec, &be, ret_reply);
        if (r < 0 && sd_bus_error_has_name(&be, SD_BUS_ERROR_UNKNOWN_OBJECT))
                return error_set_typed(ret_error, AGENTIX_E_SANDBOX, -ENOENT, "NoSuchSandbox", "No sandbox '%s'.", id);
        return r < 0 ? bus_error(ret_error, &be, r, what) : 0;
}

static int new_sandbox_call(agentix_manager *m, const char *id, const char *method, sd_bus_message **ret) {
        _cleanup_free_ char *path = NULL;
        int r;

        r = sd_bus_path_encode(MANAGER_PATH "/sandbox", id, &path);
        if (r < 0)
                return r;
        return sd_bus_message_new_method_call(m->bus, ret, BUS_NAME, path, SANDBOX_INTERFACE, method);
}

AGENTIX_API int agentix_sandbox_extend(agentix_manager *m, const char *id, uint64_t seconds, agentix_error *ret_error) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *msg = NULL;
        int r;

        r = new_sandbox_call(m, id, "Extend", &msg);
        if (r >= 0)
                r = sd_bus_message_append(msg, "t", seconds);
        if (r < 0)
                return error_set(ret_error, AGENTIX_E_OVERFLOW, r, "cannot build the request: %s", strerror(-r));
        return call_sandbox(m, id, msg, 0, NULL, ret_error, "cannot extend the sandbox");
}

AGENTIX_API int agentix_sandbox_logs(agentix_manager *m, const char *id, uint64_t lines, char **ret_text,
                                     agentix_error *ret_error) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *msg = NULL, *reply = NULL;
        const char *text;
        int r;

        r = new_sandbox_call(m, id, "Logs", &msg);
        if (r >= 0)
                r = sd_bus_message_append(msg, "t", lines);
        if (r < 0)
                return error_set(ret_error, AGENTIX_E_OVERFLOW, r, "cannot build the request: %s", strerror(-r));
        r = call_sandbox(m, id, msg, 0, &reply, ret_error, "cannot read the sandbox's log");
        if (r < 0)
                return r;
        if (sd_bus_message_read(reply, "s", &text) < 0)
                return error_set(ret_error, AGENTIX_E_PROTOCOL, -EBADMSG, "agentd answered Logs oddly");
        *ret_text = strdup(text);
        return *ret_text ? 0 : error_set(ret_error, AGENTIX_E_OVERFLOW, -ENOMEM, "out of memory");
}

AGENTIX_API int agentix_sandbox_stats(agentix_manager *m, const char *id, agentix_stats *ret,
                                      agentix_error *ret_error) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *msg = NULL, *reply = NULL;
        static const struct {
                const char *key;
                size_t offset;
        } fields[] = {
                { "time", offsetof(agentix_stats, time_usec) },
                { "cpu_usec", offsetof(agentix_stats, cpu_usec) },
                { "memory_current", offsetof(agentix_stats, memory_current) },
                { "memory_peak", offsetof(agentix_stats, memory_peak) },
                { "memory_limit", offsetof(agentix_stats, memory_limit) },
                { "pids_current", offsetof(agentix_stats, pids_current) },
                { "pids_limit", offsetof(agentix_stats, pids_limit) },
                { "net_rx_bytes", offsetof(agentix_stats, net_rx_bytes) },
                { "net_tx_bytes", offsetof(agentix_stats, net_tx_bytes) },
                { "io_read_bytes", offsetof(agentix_stats, io_read_bytes) },
                { "io_write_bytes", offsetof(agentix_stats, io_write_bytes) },
        };
        agentix_stats st = { .cpu_percent = 0 };
        int r;

        for (size_t i = 0; i < ELEMENTSOF(fields); i++)
                *(uint64_t *) ((uint8_t *) &st + fields[i].offset) = AGENTIX_STATS_UNKNOWN;
        r = new_sandbox_call(m, id, "GetStats", &msg);
        if (r < 0)
                return error_set(ret_error, AGENTIX_E_OVERFLOW, r, "cannot build the request: %s", strerror(-r));
        r = call_sandbox(m, id, msg, 0, &reply, ret_error, "cannot read the sandbox's usage");
        if (r < 0)
                return r;
        r = sd_bus_message_enter_container(reply, 'a', "{sv}");
        while (r >= 0 && (r = sd_bus_message_enter_container(reply, 'e', "sv")) > 0) {
                const char *key;
                bool known = false;

                r = sd_bus_message_read(reply, "s", &key);
                for (size_t i = 0; r >= 0 && i < ELEMENTSOF(fields) && !known; i++)
                        if (streq(key, fields[i].key)) {
                                r = sd_bus_message_read(reply, "v", "t", (uint64_t *) ((uint8_t *) &st + fields[i].offset));
                                known = true;
                        }
                if (r >= 0 && !known && streq(key, "cpu_percent")) {
                        r = sd_bus_message_read(reply, "v", "d", &st.cpu_percent);
                        known = true;
                }
                if (r >= 0 && !known)
                        r = sd_bus_message_skip(reply, "v"); /* a newer agentd's key */
                if (r >= 0)
                        r = sd_bus_message_exit_container(reply);
        }
        if (r < 0)
                return error_set(ret_error, AGENTIX_E_PROTOCOL, -EBADMSG, "agentd answered GetStats oddly");
        *ret = st;
        return 0;
}

static int pause_or_resume(agentix_manager *m, const char *id, const char *method, agentix_error *ret_error) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *msg = NULL;
        int r;

        r = new_sandbox_call(m, id, method, &msg);
        if (r < 0)
                return error_set(ret_error, AGENTIX_E_OVERFLOW, r, "cannot build the request: %s", strerror(-r));
        return call_sandbox(m, id, msg, CREATE_TIMEOUT_USEC, NULL, ret_error,
                            streq(method, "Pause")     ? "cannot pause the sandbox" :
                            streq(method, "Hibernate") ? "cannot hibernate the sandbox" :
                                                         "cannot resume the sandbox");
}

AGENTIX_API int agentix_sandbox_pause(agentix_manager *m, const char *id, agentix_error *ret_error) {
        return pause_or_resume(m, id, "Pause", ret_error);
}

AGENTIX_API int agentix_sandbox_resume(agentix_manager *m, const char *id, agentix_error *ret_error) {
        return pause_or_resume(m, id, "Resume", ret_error);
}

AGENTIX_API int agentix_sandbox_hibernate(agentix_manager *m, const char *id, agentix_error *ret_error) {
        return pause_or_resume(m, id, "Hibernate", ret_error);
}

AGENTIX_API int agentix_sandbox_snapshot(agentix_manager *m, const char *id, const char *tag, char **ret_image,
                                         agentix_error *ret_error) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *msg = NULL, *reply = NULL;
        const char *image;
        int r;

        r = new_sandbox_call(m, id, "Snapshot", &msg);
        if (r >= 0)
                r = tag ? sd_bus_message_append(msg, "a{sv}", 1, "tag", "s", tag)
                        : sd_bus_message_append(msg, "a{sv}", 0);
        if (r < 0)
                return error_set(ret_error, AGENTIX_E_OVERFLOW, r, "cannot build the request: %s", strerror(-r));
        r = call_sandbox(m, id, msg, SNAPSHOT_TIMEOUT_USEC, &reply, ret_error, "cannot snapshot the sandbox");
        if (r < 0)
                return r;
        if (sd_bus_message_read(reply, "s", &image) < 0)
                return error_set(ret_error, AGENTIX_E_PROTOCOL, -EBADMSG, "agentd answered Snapshot oddly");
        *ret_image = strdup(image);
        return *ret_image ? 0 : error_set(ret_error, AGENTIX_E_OVERFLOW, -ENOMEM, "out of memory");
}

AGENTIX_API void agentix_snapshot_list_free(agentix_snapshot_info *l, size_t n) {
        for (size_t i = 0; l && i < n; i++) {
                free(l[i].image);
                free(l[i].sandbox_id);
        }
        free(l);
}

AGENTIX_API int agentix_snapshot_list(agentix_manager *m, agentix_snapshot_info **ret, size_t *ret_n,
                                      agentix_error *ret_error) {
        _cleanup_(sd_bus_error_free) sd_bus_error be = SD_BUS_ERROR_NULL;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        agentix_snapshot_info *l = NULL;
        const char *image, *sandbox_id;
        uint64_t created, size;
        uint32_t owner;
        size_t n = 0;
        int r;

        r = sd_bus_call_method(m->bus, BUS_NAME, MANAGER_PATH, MANAGER_INTERFACE, "ListSnapshots", &be, &reply, NULL);
        if (r >= 0)
                r = sd_bus_message_enter_container(reply, 'a', "(ssutt)");
        while (r >= 0 && (r = sd_bus_message_read(reply, "(ssutt)", &image, &sandbox_id, &owner, &created, &size)) > 0) {
                agentix_snapshot_info *nl = realloc(l, (n + 1) * sizeof(*l));
                if (!nl) {
                        r = -ENOMEM;
                        break;
                }
                l = nl;
                l[n] = (agentix_snapshot_info) { .image = strdup(image), .sandbox_id = strdup(sandbox_id),
                                                 .owner = owner, .created_at = created, .size = size };
                if (!l[n++].image || !l[n - 1].sandbox_id) {
                        r = -ENOMEM;
                        break;
                }
        }
        if (r >= 0)
                r = sd_bus_message_exit_container(reply);
        if (r < 0) {
                agentix_snapshot_list_free(l, n);
                return bus_error(ret_error, &be, r, "cannot list the snapshots");
        }
        *ret = l;
        *ret_n = n;
        return 0;
}

AGENTIX_API int agentix_snapshot_delete(agentix_manager *m, const char *image, agentix_error *ret_error) {
        _cleanup_(sd_bus_error_free) sd_bus_error be = SD_BUS_ERROR_NULL;
        int r;

        r = sd_bus_call_method(m->bus, BUS_NAME, MANAGER_PATH, MANAGER_INTERFACE, "DeleteSnapshot", &be, NULL, "s",
                               image);
        return r < 0 ? bus_error(ret_error, &be, r, "cannot delete the snapshot") : 0;
}

AGENTIX_API int agentix_sandbox_port_url(agentix_manager *m, const char *id, uint16_t port, char **ret_url,
                                         char **ret_token, agentix_error *ret_error) {
        _cleanup_(sd_bus_error_free) sd_bus_error be = SD_BUS_ERROR_NULL;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        const char *url, *token;
        int r;

        r = sd_bus_call_method(m->bus, BUS_NAME, MANAGER_PATH, MANAGER_INTERFACE, "GetPortUrl", &be, &reply, "sq", id,
                               port);
        if (r < 0)
                return bus_error(ret_error, &be, r, "cannot reach the port");
        r = sd_bus_message_read(reply, "ss", &url, &token);
        if (r < 0)
                return error_set(ret_error, AGENTIX_E_PROTOCOL, r, "agentd answered GetPortUrl oddly");
        *ret_url = strdup(url);
        *ret_token = strdup(token);
        if (!*ret_url || !*ret_token) {
                *ret_url = mfree(*ret_url);
                *ret_token = mfree(*ret_token);
                return error_set(ret_error, AGENTIX_E_OVERFLOW, -ENOMEM, "out of memory");
        }
        return 0;
}

AGENTIX_API int agentix_sandbox_access(agentix_manager *m, const char *id, char **ret_url, char **ret_token,
                                       agentix_error *ret_error) {
        _cleanup_(sd_bus_error_free) sd_bus_error be = SD_BUS_ERROR_NULL;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        const char *url, *token;
        int r;

        r = sd_bus_call_method(m->bus, BUS_NAME, MANAGER_PATH, MANAGER_INTERFACE, "GetRuntimeAccess", &be, &reply, "s", id);
        if (r < 0)
                return bus_error(ret_error, &be, r, "cannot reach the sandbox");
        r = sd_bus_message_read(reply, "ss", &url, &token);
        if (r < 0)
                return error_set(ret_error, AGENTIX_E_PROTOCOL, r, "agentd answered GetRuntimeAccess oddly");
        *ret_url = strdup(url);
        *ret_token = strdup(token);
        if (!*ret_url || !*ret_token) {
                free(*ret_url);
                free(*ret_token);
                return error_set(ret_error, AGENTIX_E_OVERFLOW, -ENOMEM, "out of memory");
        }
        return 0;
}

AGENTIX_API int agentix_manager_runtime_ca(agentix_manager *m, char **ret_pem, agentix_error *ret_error) {
        _cleanup_(sd_bus_error_free) sd_bus_error be = SD_BUS_ERROR_NULL;
        char *pem = NULL;
        int r;

        r = sd_bus_get_property_string(m->bus, BUS_NAME, MANAGER_PATH, MANAGER_INTERFACE, "RuntimeCA", &be, &pem);
        if (r < 0)
                return bus_error(ret_error, &be, r, "cannot read agentd's runtime CA");
        if (strempty(pem)) {
                free(pem);
                return error_set(ret_error, AGENTIX_E_SANDBOX, -ENOKEY, "agentd has no runtime CA (TLS is off)");
        }
        *ret_pem = pem;
        return 0;
}

AGENTIX_API void agentix_sandbox_info_done(agentix_sandbox_info *i) {
        if (!i)
                return;
        free(i->id);
        free(i->backend);
        free(i->image);
        free(i->bundle);
        free(i->platform);
        free(i->state);
        free(i->runtime_url);
        free(i->container_id);
        free(i->path);
        free(i->pool);
        *i = (agentix_sandbox_info) {};
}

AGENTIX_API void agentix_sandbox_list_free(agentix_sandbox_info *l, size_t n) {
        for (size_t i = 0; l && i < n; i++)
                agentix_sandbox_info_done(&l[i]);
        free(l);
}

/* The properties of the sandbox object at path. */
static int read_info(agentix_manager *m, const char *path, agentix_sandbox_info *ret, sd_bus_error *be) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        agentix_sandbox_info i = {};
        int r;

        r = sd_bus_call_method(m->bus, BUS_NAME, path, "org.freedesktop.DBus.Properties", "GetAll", be, &reply, "s",
                               SANDBOX_INTERFACE);
        if (r < 0)
                return r;
        r = sd_bus_message_enter_container(reply, 'a', "{sv}");
        while (r >= 0 && (r = sd_bus_message_enter_container(reply, 'e', "sv")) > 0) {
                static const struct {
                        const char *name;
                        size_t offset;
                } strings[] = {
                        { "Id", offsetof(agentix_sandbox_info, id) },
                        { "Backend", offsetof(agentix_sandbox_info, backend) },
                        { "Image", offsetof(agentix_sandbox_info, image) },
                        { "Bundle", offsetof(agentix_sandbox_info, bundle) },
                        { "Platform", offsetof(agentix_sandbox_info, platform) },
                        { "State", offsetof(agentix_sandbox_info, state) },
                        { "RuntimeUrl", offsetof(agentix_sandbox_info, runtime_url) },
                        { "ContainerId", offsetof(agentix_sandbox_info, container_id) },
                        { "Pool", offsetof(agentix_sandbox_info, pool) },
                };
                const char *name, *s;
                size_t k;

                r = sd_bus_message_read(reply, "s", &name);
                if (r < 0)
                        break;
                for (k = 0; k < ELEMENTSOF(strings) && !streq(strings[k].name, name); k++)
                        ;
                if (k < ELEMENTSOF(strings)) {
                        char **field = (char **) ((uint8_t *) &i + strings[k].offset);
                        r = sd_bus_message_read(reply, "v", "s", &s);
                        if (r >= 0 && !(*field = strdup(s)))
                                r = -ENOMEM;
                } else if (streq(name, "Owner"))
                        r = sd_bus_message_read(reply, "v", "u", &i.owner);
                else if (streq(name, "CreatedAt"))
                        r = sd_bus_message_read(reply, "v", "t", &i.created_at_usec);
                else if (streq(name, "ExpiresAt"))
                        r = sd_bus_message_read(reply, "v", "t", &i.expires_at_usec);
                else
                        r = sd_bus_message_skip(reply, "v");
                if (r >= 0)
                        r = sd_bus_message_exit_container(reply);
        }
        if (r >= 0)
                r = sd_bus_message_exit_container(reply);
        if (r >= 0 && !(i.path = strdup(path)))
                r = -ENOMEM;
        if (r >= 0 && !i.pool && !(i.pool = strdup(""))) /* an agentd before pools */
                r = -ENOMEM;
        if (r < 0) {
                agentix_sandbox_info_done(&i);
                return r;
        }
        *ret = i;
        return 0;
}

AGENTIX_API int agentix_sandbox_get(agentix_manager *m, const char *id, agentix_sandbox_info *ret,
                                    agentix_error *ret_error) {
        _cleanup_(sd_bus_error_free) sd_bus_error be = SD_BUS_ERROR_NULL;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        const char *path;
        int r;

        r = sd_bus_call_method(m->bus, BUS_NAME, MANAGER_PATH, MANAGER_INTERFACE, "GetSandbox", &be, &reply, "s", id);
        if (r >= 0)
                r = sd_bus_message_read(reply, "o", &path);
        if (r >= 0)
                r = read_info(m, path, ret, &be);
        return r < 0 ? bus_error(ret_error, &be, r, "cannot look at the sandbox") : 0;
}

AGENTIX_API int agentix_sandbox_list(agentix_manager *m, agentix_sandbox_info **ret, size_t *ret_n,
                                     agentix_error *ret_error) {
        _cleanup_(sd_bus_error_free) sd_bus_error be = SD_BUS_ERROR_NULL;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        agentix_sandbox_info *l = NULL;
        const char *id, *image, *state, *path;
        size_t n = 0;
        int r;

        r = sd_bus_call_method(m->bus, BUS_NAME, MANAGER_PATH, MANAGER_INTERFACE, "ListSandboxes", &be, &reply, NULL);
        if (r < 0)
                return bus_error(ret_error, &be, r, "cannot list the sandboxes");
        r = sd_bus_message_enter_container(reply, 'a', "(ssso)");
        while (r >= 0 && (r = sd_bus_message_read(reply, "(ssso)", &id, &image, &state, &path)) > 0) {
                agentix_sandbox_info *t = realloc(l, (n + 1) * sizeof(*l));

                if (!t) {
                        r = -ENOMEM;
                        break;
                }
                l = t;
                sd_bus_error_free(&be);
                r = read_info(m, path, &l[n], &be);
                if (r == -ENXIO || sd_bus_error_has_name(&be, SD_BUS_ERROR_UNKNOWN_OBJECT)) {
                        r = 0; /* gone since the list was made */
                        continue;
                }
                if (r < 0)
                        break;
                n++;
        }
        if (r < 0) {
                agentix_sandbox_list_free(l, n);
                return bus_error(ret_error, &be, r, "cannot list the sandboxes");
        }
        *ret = l;
        *ret_n = n;
        return 0;
}

AGENTIX_API void agentix_pool_list_free(agentix_pool_info *l, size_t n) {
        for (size_t i = 0; l && i < n; i++) {
                free(l[i].name);
                free(l[i].error);
        }
        free(l);
}

/* PoolErrors (a{ss}) into the pools it names; an agentd without it has none to say. */
static int read_pool_errors(agentix_manager *m, agentix_pool_info *l, size_t n) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        const char *name, *why;
        int r;

        r = sd_bus_get_property(m->bus, BUS_NAME, MANAGER_PATH, MANAGER_INTERFACE, "PoolErrors", NULL, &reply, "a{ss}");
        if (r < 0)
                return 0;
        r = sd_bus_message_enter_container(reply, 'a', "{ss}");
        while (r >= 0 && (r = sd_bus_message_read(reply, "{ss}", &name, &why)) > 0)
                for (size_t i = 0; i < n; i++)
                        if (streq(l[i].name, name) && !l[i].error && !(l[i].error = strdup(why)))
                                return -ENOMEM;
        return r < 0 ? r : 0;
}

AGENTIX_API int agentix_pool_list(agentix_manager *m, agentix_pool_info **ret, size_t *ret_n,
                                  agentix_error *ret_error) {
        _cleanup_(sd_bus_error_free) sd_bus_error be = SD_BUS_ERROR_NULL;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        agentix_pool_info *l = NULL;
        size_t n = 0;
        const char *name;
        uint32_t ready, size;
        int r;

        r = sd_bus_call_method(m->bus, BUS_NAME, MANAGER_PATH, MANAGER_INTERFACE, "ListPools", &be, &reply, NULL);
        if (r >= 0)
                r = sd_bus_message_enter_container(reply, 'a', "(suu)");
        while (r >= 0 && (r = sd_bus_message_read(reply, "(suu)", &name, &ready, &size)) > 0) {
                agentix_pool_info *nl = realloc(l, (n + 1) * sizeof(*l));
                if (!nl) {
                        r = -ENOMEM;
                        break;
                }
                l = nl;
                l[n] = (agentix_pool_info) { .name = strdup(name), .ready = ready, .size = size };
                if (!l[n++].name) {
                        r = -ENOMEM;
                        break;
                }
        }
        if (r >= 0)
                r = sd_bus_message_exit_container(reply);
        if (r >= 0)
                r = read_pool_errors(m, l, n);
        if (r < 0) {
                agentix_pool_list_free(l, n);
                return bus_error(ret_error, &be, r, "cannot list the pools");
        }
        *ret = l;
        *ret_n = n;
        return 0;
}

AGENTIX_API int agentix_usage_get(agentix_manager *m, int64_t uid, agentix_usage *ret, agentix_error *ret_error) {
        _cleanup_(sd_bus_error_free) sd_bus_error be = SD_BUS_ERROR_NULL;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *msg = NULL, *reply = NULL;
        agentix_usage u = { .snapshots = AGENTIX_STATS_UNKNOWN, .max_sandboxes = AGENTIX_STATS_UNKNOWN,
                            .max_memory = AGENTIX_STATS_UNKNOWN, .max_snapshots = AGENTIX_STATS_UNKNOWN };
        int r;

        if (uid != AGENTIX_CALLER && (uid < 0 || uid >= UINT32_MAX))
                return error_set(ret_error, AGENTIX_E_OVERFLOW, -EINVAL, "uid %lld is no uid", (long long) uid);
        r = sd_bus_message_new_method_call(m->bus, &msg, BUS_NAME, MANAGER_PATH, MANAGER_INTERFACE,
                                           uid == AGENTIX_CALLER ? "GetUsage" : "GetUsageOf");
        if (r >= 0 && uid != AGENTIX_CALLER)
                r = sd_bus_message_append(msg, "u", (uint32_t) uid);
        if (r < 0)
                return error_set(ret_error, AGENTIX_E_OVERFLOW, r, "cannot build the request: %s", strerror(-r));
        r = sd_bus_call(m->bus, msg, 0, &be, &reply);
        if (r < 0)
                return bus_error(ret_error, &be, r, "cannot read the usage");
        r = sd_bus_message_enter_container(reply, 'a', "{sv}");
        while (r >= 0 && (r = sd_bus_message_enter_container(reply, 'e', "sv")) > 0) {
                const char *key;

                r = sd_bus_message_read(reply, "s", &key);
                if (r < 0)
                        break;
                if (streq(key, "uid"))
                        r = sd_bus_message_read(reply, "v", "u", &u.uid);
                else if (streq(key, "cpus") || streq(key, "max_cpus"))
                        r = sd_bus_message_read(reply, "v", "d", streq(key, "cpus") ? &u.cpus : &u.max_cpus);
                else if (streq(key, "sandboxes") || streq(key, "memory") || streq(key, "snapshots") ||
                         streq(key, "max_sandboxes") || streq(key, "max_memory") || streq(key, "max_snapshots"))
                        r = sd_bus_message_read(reply, "v", "t",
                                                streq(key, "sandboxes")       ? &u.sandboxes
                                                : streq(key, "memory")        ? &u.memory
                                                : streq(key, "snapshots")     ? &u.snapshots
                                                : streq(key, "max_sandboxes") ? &u.max_sandboxes
                                                : streq(key, "max_memory")    ? &u.max_memory
                                                                              : &u.max_snapshots);
                else
                        r = sd_bus_message_skip(reply, "v"); /* a newer agentd's key */
                if (r >= 0)
                        r = sd_bus_message_exit_container(reply);
        }
        if (r < 0)
                return error_set(ret_error, AGENTIX_E_PROTOCOL, -EBADMSG, "agentd answered GetUsage oddly");
        *ret = u;
        return 0;
}

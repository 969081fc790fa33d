/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "macro.h"
#include "sandbox-info.h"

void sandbox_info_done(SandboxInfo *i) {
        free(i->id);
        free(i->state);
        free(i->runtime);
        free(i->template_id);
        json_decref(i->metadata);
        *i = (SandboxInfo) {};
}

static int read_labels(sd_bus_message *m, SandboxInfo *i, char **template_label, bool *ret_closed) {
        const char *k, *v;
        int r;

        r = sd_bus_message_enter_container(m, 'a', "{ss}");
        if (r < 0)
                return r;
        while ((r = sd_bus_message_read(m, "{ss}", &k, &v)) > 0) {
                if (streq(k, E2B_TEMPLATE_LABEL)) {
                        free(*template_label);
                        *template_label = strdup(v);
                        if (!*template_label)
                                return -ENOMEM;
                } else if (streq(k, E2B_PUBLIC_LABEL))
                        *ret_closed = streq(v, "no");
                else if (startswith(k, E2B_LABEL_PREFIX))
                        continue; /* the gateway's, not E2B's metadata */
                else if (json_object_set_new(i->metadata, k, json_string(v)) < 0)
                        return -ENOMEM;
        }
        if (r < 0)
                return r;
        return sd_bus_message_exit_container(m);
}

int sandbox_info_read(sd_bus_message *reply, const char *id, SandboxInfo *ret) {
        _cleanup_free_ char *pool = NULL, *image = NULL, *template_label = NULL;
        SandboxInfo i = { .metadata = json_object() };
        bool closed = false;
        int r;

        if (!i.metadata || !(i.id = strdup(id))) {
                sandbox_info_done(&i);
                return -ENOMEM;
        }
        r = sd_bus_message_enter_container(reply, 'a', "{sv}");
        while (r >= 0) {
                const char *name, *contents, *s;
                char type;

                r = sd_bus_message_enter_container(reply, 'e', "sv");
                if (r <= 0)
                        break;
                r = sd_bus_message_read(reply, "s", &name);
                if (r >= 0)
                        r = sd_bus_message_peek_type(reply, &type, &contents);
                if (r >= 0)
                        r = sd_bus_message_enter_container(reply, 'v', contents);
                if (r < 0)
                        break;
                if (streq(contents, "s") && (streq(name, "State") || streq(name, "Pool") || streq(name, "Image") ||
                                             streq(name, "Runtime"))) {
                        char **field = streq(name, "State") ? &i.state :
                                       streq(name, "Pool")  ? &pool :
                                       streq(name, "Image") ? &image :
                                                              &i.runtime;

                        r = sd_bus_message_read(reply, "s", &s);
                        if (r >= 0 && !(*field = strdup(s)))
                                r = -ENOMEM;
                } else if (streq(contents, "t") && streq(name, "CreatedAt"))
                        r = sd_bus_message_read(reply, "t", &i.created_at);
                else if (streq(contents, "t") && streq(name, "ExpiresAt"))
                        r = sd_bus_message_read(reply, "t", &i.expires_at);
                else if (streq(contents, "t") && streq(name, "Memory"))
                        r = sd_bus_message_read(reply, "t", &i.memory);
                else if (streq(contents, "d") && streq(name, "CPUs"))
                        r = sd_bus_message_read(reply, "d", &i.cpus);
                else if (streq(contents, "u") && streq(name, "Owner"))
                        r = sd_bus_message_read(reply, "u", &i.owner);
                else if (streq(contents, "a{ss}") && streq(name, "Labels"))
                        r = read_labels(reply, &i, &template_label, &closed);
                else
                        r = sd_bus_message_skip(reply, contents);
                if (r >= 0)
                        r = sd_bus_message_exit_container(reply);
                if (r >= 0)
                        r = sd_bus_message_exit_container(reply);
        }
        if (r >= 0)
                r = sd_bus_message_exit_container(reply);
        if (r >= 0 && !i.state)
                r = -EBADMSG;
        if (r >= 0) {
                i.e2b = template_label != NULL;
                i.public_traffic = !closed;
        }
        if (r >= 0) {
                const char *t = template_label && *template_label ? template_label :
                                pool && *pool                      ? pool :
                                                                     image ?: "";
                if (!(i.template_id = strdup(t)))
                        r = -ENOMEM;
        }
        if (r < 0) {
                sandbox_info_done(&i);
                return r;
        }
        *ret = i;
        return 0;
}

const char *sandbox_info_e2b_state(const SandboxInfo *i) {
        if (streq(i->state, "running"))
                return "running";
        if (streq(i->state, "paused") || streq(i->state, "hibernated"))
                return "paused";
        return NULL;
}

void rfc3339_usec(uint64_t usec, char ret[static 32]) {
        time_t t = (time_t) (usec / 1000000);
        struct tm tm;

        if (!gmtime_r(&t, &tm) || strftime(ret, 21, "%Y-%m-%dT%H:%M:%S", &tm) == 0) {
                strcpy(ret, "1970-01-01T00:00:00.000Z");
                return;
        }
        snprintf(ret + 19, 13, ".%03uZ", (unsigned) (usec / 1000 % 1000));
}

json_t *sandbox_info_json(const SandboxInfo *i) {
        char started[32], end[32];

        rfc3339_usec(i->created_at, started);
        rfc3339_usec(i->expires_at, end);
        return json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:I, s:I, s:I, s:O, s:s, s:s}", "templateID", i->template_id,
                         "alias", i->template_id, "sandboxID", i->id, "clientID", "agentix", "startedAt", started, "endAt",
                         end, "cpuCount", (json_int_t) ceil(i->cpus), "memoryMB", (json_int_t) (i->memory >> 20),
                         "diskSizeMB", (json_int_t) 0, "metadata", i->metadata, "state",
                         sandbox_info_e2b_state(i) ?: "running", "envdVersion", E2B_ENVD_VERSION);
}

json_t *sandbox_metrics_json(const SandboxInfo *i, sd_bus_message *stats) {
        uint64_t time = 0, memory_current = 0, memory_limit = i->memory;
        double cpu_percent = 0, cpus = i->cpus > 0 ? i->cpus : 1;
        char when[32];
        int r;

        r = sd_bus_message_enter_container(stats, 'a', "{sv}");
        while (r >= 0 && (r = sd_bus_message_enter_container(stats, 'e', "sv")) > 0) {
                const char *key;

                r = sd_bus_message_read(stats, "s", &key);
                if (r < 0)
                        break;
                if (streq(key, "cpu_percent"))
                        r = sd_bus_message_read(stats, "v", "d", &cpu_percent);
                else if (streq(key, "time") || streq(key, "memory_current") || streq(key, "memory_limit"))
                        r = sd_bus_message_read(stats, "v", "t",
                                                streq(key, "time") ? &time
                                                : streq(key, "memory_current") ? &memory_current
                                                                               : &memory_limit);
                else
                        r = sd_bus_message_skip(stats, "v");
                if (r >= 0)
                        r = sd_bus_message_exit_container(stats);
        }
        if (r < 0)
                return NULL;
        rfc3339_usec(time, when);
        /* agentd's cpu_percent is of one CPU; E2B's cpuUsedPct of the sandbox's. */
        return json_pack("[{s:s, s:I, s:f, s:I, s:I, s:I, s:I, s:I}]", "timestamp", when, "cpuCount",
                         (json_int_t) ceil(cpus), "cpuUsedPct", cpu_percent / ceil(cpus), "memUsed",
                         (json_int_t) memory_current, "memTotal", (json_int_t) memory_limit, "memCache", (json_int_t) 0,
                         "diskUsed", (json_int_t) 0, "diskTotal", (json_int_t) 0);
}

/* SPDX-License-Identifier: MIT */
#include <time.h>

#include "agentd-errors.h"
#include "docker-backend.h"
#include "lifecycle.h"
#include "log.h"
#include "sandbox-setup.h"

/* ---- signals ----------------------------------------------------------------------------- */

static void emit_new(Manager *m, Sandbox *s) {
        (void) sd_bus_emit_signal(m->bus, MANAGER_PATH, MANAGER_INTERFACE, "SandboxNew", "so", s->id, s->path);
}

static void set_state(Manager *m, Sandbox *s, SandboxState state) {
        if (s->state == state)
                return;
        log_info("Sandbox %s: %s -> %s.", s->id, sandbox_state_to_string(s->state), sandbox_state_to_string(state));
        s->state = state;
        (void) sd_bus_emit_properties_changed(m->bus, s->path, SANDBOX_INTERFACE, "State", "RuntimeUrl", "ContainerId",
                                              NULL);
}

/* Stop making s (the backend's job, its setup command), if that is still going on. */
static void stop_making(Sandbox *s) {
        create_job_cancel(s->create_job);
        s->create_job = NULL;
        s->setup = sandbox_setup_free(s->setup);
}

/* The sandbox is gone: unregister it, say so, free it. */
static void drop(Manager *m, Sandbox *s) {
        stop_making(s);
        manager_remove_sandbox(m, s);
        (void) sd_bus_emit_signal(m->bus, MANAGER_PATH, MANAGER_INTERFACE, "SandboxRemoved", "so", s->id, s->path);
        sandbox_free(s);
}

/* ---- expiry ------------------------------------------------------------------------------ */

static uint64_t now_realtime_usec(void) {
        struct timespec ts;

        clock_gettime(CLOCK_REALTIME, &ts);
        return (uint64_t) ts.tv_sec * 1000000ULL + (uint64_t) ts.tv_nsec / 1000ULL;
}

static void schedule_reaper(Manager *m);

static int on_reaper(sd_event_source *es, uint64_t usec, void *userdata) {
        Manager *m = userdata;
        uint64_t now = now_realtime_usec();
        bool again = true;

        /* Deleting may change the map: start over after each one. */
        while (again) {
                size_t state = 0;
                Sandbox *s;

                again = false;
                while ((s = strmap_iterate(m->sandboxes, &state)))
                        if (s->expires_at <= now && s->state != SANDBOX_REMOVING) {
                                char id[32];

                                log_info("Sandbox %s expired: deleting it.", s->id);
                                snprintf(id, sizeof(id), "%s", s->id);
                                (void) lifecycle_delete(m, s, NULL);
                                s = manager_get_sandbox(m, id);
                                if (s && s->state != SANDBOX_REMOVING)
                                        /* Docker would not remove it now: try again in a minute. */
                                        s->expires_at = now + 60 * 1000000ULL;
                                again = true;
                                break;
                        }
        }
        schedule_reaper(m);
        return 0;
}

static void schedule_reaper(Manager *m) {
        uint64_t next = UINT64_MAX;
        size_t state = 0;
        Sandbox *s;

        while ((s = strmap_iterate(m->sandboxes, &state)))
                if (s->state != SANDBOX_REMOVING && s->expires_at < next)
                        next = s->expires_at;
        if (next == UINT64_MAX) {
                if (m->reaper)
                        (void) sd_event_source_set_enabled(m->reaper, SD_EVENT_OFF);
                return;
        }
        if (!m->reaper) {
                if (sd_event_add_time(m->event, &m->reaper, CLOCK_REALTIME, next, 100 * 1000, on_reaper, m) < 0)
                        log_warning("Cannot arm the reaper of expired sandboxes.");
                return;
        }
        (void) sd_event_source_set_time(m->reaper, next);
        (void) sd_event_source_set_enabled(m->reaper, SD_EVENT_ONESHOT);
}

int lifecycle_extend(Manager *m, Sandbox *s, uint64_t seconds, sd_bus_error *error) {
        uint64_t max = m->config->max_ttl_sec, now = now_realtime_usec();

        if (max != AGENTD_UNLIMITED && s->expires_at + seconds * 1000000ULL > now + max * 1000000ULL)
                return sd_bus_error_setf(error, AGENTD_ERROR_INVALID_CONFIG,
                                         "Extend(%llu) would set the expiry %llu s from now; this host allows at most "
                                         "%llu s (MaxTTL= in agentd.conf).", (unsigned long long) seconds,
                                         (unsigned long long) ((s->expires_at > now ? s->expires_at - now : 0) / 1000000 +
                                                               seconds), (unsigned long long) max);
        s->expires_at += seconds * 1000000ULL;
        (void) sd_bus_emit_properties_changed(m->bus, s->path, SANDBOX_INTERFACE, "ExpiresAt", NULL);
        schedule_reaper(m);
        return 0;
}

/* ---- create ------------------------------------------------------------------------------ */

static void create_done(Sandbox *s, const char *error_name, const char *message, void *userdata);

/* The container of a failed create is gone: answer with the failure. */
static void on_failed_removed(Sandbox *s, const char *error_name, const char *message, void *userdata) {
        sd_bus_message *call = TAKE_PTR(s->create_call);

        if (call)
                (void) sd_bus_reply_method_errorf(call, s->failure_name, "%s", s->failure_message);
        sd_bus_message_unref(call);
        drop(userdata, s);
}

static void on_setup_done(SandboxSetup *setup, const char *error, void *userdata) {
        Manager *m = userdata;
        Sandbox *s = NULL;
        size_t state = 0;

        /* Find the sandbox whose setup this is. */
        while ((s = strmap_iterate(m->sandboxes, &state)) && s->setup != setup)
                ;
        if (!s)
                return;
        s->setup = sandbox_setup_free(s->setup);
        s->setup_done = true;
        if (!error) {
                create_done(s, NULL, NULL, m);
                return;
        }
        log_warning("Sandbox %s: %s", s->id, error);
        s->failure_name = strdup(AGENTD_ERROR_START_FAILED);
        s->failure_message = strdup(error);
        set_state(m, s, SANDBOX_REMOVING);
        if (!s->failure_name || !s->failure_message ||
            docker_backend_remove(m->docker, s, on_failed_removed, m) < 0)
                create_done(s, AGENTD_ERROR_START_FAILED, error, m);
}

static void create_done(Sandbox *s, const char *error_name, const char *message, void *userdata) {
        Manager *m = userdata;
        sd_bus_message *call;

        s->create_job = NULL;
        if (!error_name && s->config->setup && !s->setup_done) {
                /* Ready: run the setup command before the caller hears of it. */
                if (sandbox_setup_run(m->event, s->runtime_url, s->token, s->config->setup, on_setup_done, m,
                                      &s->setup) >= 0)
                        return;
                error_name = AGENTD_ERROR_START_FAILED;
                message = "Cannot start the setup command";
        }
        call = TAKE_PTR(s->create_call);
        if (error_name) {
                log_warning("Sandbox %s: create failed: %s", s->id, message);
                if (call)
                        (void) sd_bus_reply_method_errorf(call, error_name, "%s", message);
                sd_bus_message_unref(call);
                drop(m, s);
                return;
        }
        set_state(m, s, SANDBOX_RUNNING);
        schedule_reaper(m);
        if (call)
                (void) sd_bus_reply_method_return(call, "os", s->path, s->id);
        sd_bus_message_unref(call);
}

static int on_caller_gone(sd_bus_track *track, void *userdata) {
        Manager *m = userdata;
        size_t state = 0;
        Sandbox *s;

        while ((s = strmap_iterate(m->sandboxes, &state)) && s->track != track)
                ;
        if (!s)
                return 0;
        log_info("Sandbox %s: its creator left the bus (bind_to_caller): deleting it.", s->id);
        s->track = sd_bus_track_unref(s->track);
        (void) lifecycle_delete(m, s, NULL);
        return 0;
}

int lifecycle_create(Manager *m, SandboxConfig *config, uid_t owner, sd_bus_message *call, sd_bus_error *error) {
        Sandbox *s;
        int r;

        if (strmap_size(m->sandboxes) >= m->config->max_sandboxes) {
                sandbox_config_free(config);
                return sd_bus_error_setf(error, AGENTD_ERROR_TOO_MANY_SANDBOXES,
                                         "agentd runs %llu sandboxes, the most it may (MaxSandboxes= in agentd.conf): "
                                         "delete one first.", (unsigned long long) m->config->max_sandboxes);
        }
        if (manager_count_sandboxes_of(m, owner) >= m->config->max_sandboxes_per_user) {
                sandbox_config_free(config);
                return sd_bus_error_setf(error, AGENTD_ERROR_TOO_MANY_SANDBOXES,
                                         "uid %u has %llu sandboxes, the most one user may have (MaxSandboxesPerUser= in "
                                         "agentd.conf): delete one first.", (unsigned) owner,
                                         (unsigned long long) m->config->max_sandboxes_per_user);
        }
        r = sandbox_new(config, owner, m->config->default_ttl_sec, &s);
        if (r < 0) {
                sandbox_config_free(config);
                return r;
        }
        while ((r = manager_add_sandbox(m, s)) == -EEXIST) {
                /* 64 random bits met a live id: draw again (keeping the config). */
                s->config = NULL;
                sandbox_free(s);
                r = sandbox_new(config, owner, m->config->default_ttl_sec, &s);
                if (r < 0) {
                        sandbox_config_free(config);
                        return r;
                }
        }
        if (r < 0) {
                sandbox_free(s);
                return r;
        }
        if (config->bind_to_caller) {
                r = sd_bus_track_new(m->bus, &s->track, on_caller_gone, m);
                if (r >= 0)
                        r = sd_bus_track_add_sender(s->track, call);
                if (r < 0) {
                        manager_remove_sandbox(m, s);
                        sandbox_free(s);
                        return r;
                }
        }
        log_info("Sandbox %s: creating for uid %u (image %s, bundle %s).", s->id, (unsigned) owner, config->image,
                 config->bundle);
        emit_new(m, s);
        /* Answered by create_done(), which may run before this returns (and free s). */
        s->create_call = sd_bus_message_ref(call);
        r = docker_backend_create(m->docker, s, create_done, m);
        if (r < 0) {
                s->create_call = sd_bus_message_unref(s->create_call); /* the caller gets r */
                drop(m, s);
                return r;
        }
        return 0;
}

/* ---- delete ------------------------------------------------------------------------------ */

static void on_removed(Sandbox *s, const char *error_name, const char *message, void *userdata);

static bool bundle_in_use(const char *bundle_id, void *userdata) {
        Manager *m = userdata;
        size_t state = 0;
        Sandbox *s;

        while ((s = strmap_iterate(m->sandboxes, &state)))
                if (s->bundle_id && streq(s->bundle_id, bundle_id) && s->state != SANDBOX_REMOVING)
                        return true;
        return false;
}

static void on_removed(Sandbox *s, const char *error_name, const char *message, void *userdata) {
        Manager *m = userdata;

        if (error_name) {
                log_warning("Sandbox %s: removing its container failed: %s", s->id, message);
                for (size_t i = 0; i < s->n_delete_calls; i++) {
                        (void) sd_bus_reply_method_errorf(s->delete_calls[i], error_name, "%s", message);
                        sd_bus_message_unref(s->delete_calls[i]);
                }
                s->n_delete_calls = 0;
                set_state(m, s, SANDBOX_FAILED);
                return;
        }
        drop(m, s);
        /* A carrier whose bundle was rebuilt (its image has no tag left) and that no sandbox
         * uses any more goes too. */
        docker_backend_prune_carriers(m->docker, bundle_in_use, m);
}

int lifecycle_delete(Manager *m, Sandbox *s, sd_bus_message *call) {
        bool first = s->state != SANDBOX_REMOVING;

        if (call) {
                sd_bus_message **l = realloc(s->delete_calls, (s->n_delete_calls + 1) * sizeof(*l));
                if (!l)
                        return -ENOMEM;
                s->delete_calls = l;
                s->delete_calls[s->n_delete_calls++] = sd_bus_message_ref(call);
        }
        if (!first)
                return 0; /* already on its way: answered with the others */
        if (s->create_job || s->setup) {
                /* Still being made: stop that, and remove whatever it made. */
                stop_making(s);
                if (s->create_call) {
                        (void) sd_bus_reply_method_errorf(s->create_call, AGENTD_ERROR_START_FAILED,
                                                          "Sandbox %s was deleted while it was being created.", s->id);
                        s->create_call = sd_bus_message_unref(s->create_call);
                }
        }
        set_state(m, s, SANDBOX_REMOVING);
        if (docker_backend_remove(m->docker, s, on_removed, m) < 0)
                on_removed(s, AGENTD_ERROR_BACKEND_UNAVAILABLE, "Cannot reach the Docker backend to remove the sandbox.", m);
        return 0;
}

/* ---- Docker's events --------------------------------------------------------------------- */

/* A sandbox's container changed outside agentd's own calls. */
static void on_docker_event(const char *id, const char *action, void *userdata) {
        Manager *m = userdata;
        Sandbox *s = manager_get_sandbox(m, id);

        if (!s || s->state == SANDBOX_CREATING || s->state == SANDBOX_REMOVING)
                return; /* not ours, or our own doing */
        if (streq(action, "die"))
                set_state(m, s, SANDBOX_EXITED);
        else if (streq(action, "start"))
                set_state(m, s, SANDBOX_RUNNING);
        else if (streq(action, "oom"))
                log_warning("Sandbox %s ran out of memory (its limit is %llu bytes).", s->id,
                            (unsigned long long) s->config->limits.memory);
        else if (streq(action, "destroy")) {
                log_info("Sandbox %s: its container was removed outside agentd.", s->id);
                drop(m, s);
        }
}

/* ---- adoption ---------------------------------------------------------------------------- */

static uint64_t label_u64(json_t *labels, const char *key, bool *ok) {
        const char *v = json_string_value(json_object_get(labels, key));
        char *end;
        unsigned long long n;

        if (!v) {
                *ok = false;
                return 0;
        }
        errno = 0;
        n = strtoull(v, &end, 10);
        if (errno || end == v || *end)
                *ok = false;
        return n;
}

/* A sandbox container an earlier agentd made. */
static void on_found(json_t *inspect, void *userdata) {
        Manager *m = userdata;
        json_t *config = json_object_get(inspect, "Config"), *labels = json_object_get(config, "Labels"),
               *host = json_object_get(inspect, "HostConfig"), *st = json_object_get(inspect, "State");
        const char *cid = json_string_value(json_object_get(inspect, "Id")),
                   *id = json_string_value(json_object_get(labels, "org.agentix.sandbox")),
                   *status = json_string_value(json_object_get(st, "Status")), *token = NULL, *port;
        bool ok = true;
        uint64_t owner = label_u64(labels, "org.agentix.owner", &ok), created = label_u64(labels, "org.agentix.created", &ok),
                 expires = label_u64(labels, "org.agentix.expires", &ok);
        SandboxConfig *c;
        Sandbox *s;
        size_t i;
        json_t *e;

        if (!cid || !id || manager_get_sandbox(m, id))
                return;
        json_array_foreach(json_object_get(config, "Env"), i, e)
                if (json_string_value(e) && strneq(json_string_value(e), "AGENTIX_TOKEN=", 14))
                        token = json_string_value(e) + 14;
        /* Half-made (a create that never started it), expired, or without what a sandbox needs. */
        if (!ok || !token || !status || streq(status, "created") || expires * 1000000ULL <= now_realtime_usec()) {
                log_info("Removing container %.12s (sandbox %s): %s.", cid, id,
                         !ok || !token ? "its labels are incomplete" : status && streq(status, "created") ?
                         "its create never finished" : "expired");
                docker_backend_remove_container(m->docker, cid);
                return;
        }
        c = calloc(1, sizeof(*c));
        if (!c)
                return;
        c->image = strdup(json_string_value(json_object_get(labels, "org.agentix.image")) ?: "");
        c->bundle = strdup(json_string_value(json_object_get(labels, "org.agentix.bundle")) ?: "");
        c->backend = strdup("docker");
        c->limits = (SandboxLimits) { .cpus = json_integer_value(json_object_get(host, "NanoCpus")) / 1e9,
                                      .memory = json_integer_value(json_object_get(host, "Memory")),
                                      .pids = json_integer_value(json_object_get(host, "PidsLimit")) };
        if (!c->image || !c->bundle || !c->backend ||
            sandbox_restore(c, (uid_t) owner, id, token, created * 1000000ULL, expires * 1000000ULL, &s) < 0) {
                sandbox_config_free(c);
                return;
        }
        s->container_id = strdup(cid);
        s->bundle_id = strdup(json_string_value(json_object_get(labels, "org.agentix.bundle.id")) ?: "");
        port = json_string_value(json_object_get(json_array_get(json_object_get(json_object_get(
                json_object_get(inspect, "NetworkSettings"), "Ports"), "8000/tcp"), 0), "HostPort"));
        if (port && asprintf(&s->runtime_url, "http://127.0.0.1:%s", port) < 0)
                s->runtime_url = NULL;
        s->state = streq(status, "running") ? SANDBOX_RUNNING : SANDBOX_EXITED;
        if (manager_add_sandbox(m, s) < 0) {
                sandbox_free(s);
                return;
        }
        log_info("Sandbox %s of uid %u adopted (%s).", s->id, (unsigned) s->owner, sandbox_state_to_string(s->state));
        emit_new(m, s);
}

static void on_adopted(void *userdata) {
        Manager *m = userdata;

        schedule_reaper(m);
        docker_backend_prune_carriers(m->docker, bundle_in_use, m);
}

int lifecycle_start(Manager *m) {
        int r = docker_backend_adopt(m->docker, on_found, on_adopted, m);

        if (r < 0)
                return r;
        return docker_backend_watch(m->docker, on_docker_event, m);
}

void lifecycle_stop(Manager *m) {
        size_t state = 0;
        Sandbox *s;

        while ((s = strmap_iterate(m->sandboxes, &state)))
                stop_making(s);
}

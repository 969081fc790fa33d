/* SPDX-License-Identifier: MIT */
#include <sys/random.h>
#include <time.h>

#include "agentd-errors.h"
#include "docker-backend.h"
#include "log.h"
#include "manager.h"
#include "sandbox-dbus.h"
#include "sandbox-setup.h"
#include "sandbox.h"

static const char *const state_names[_SANDBOX_STATE_MAX] = {
        [SANDBOX_CREATING] = "creating",
        [SANDBOX_RUNNING] = "running",
        [SANDBOX_EXITED] = "exited",
        [SANDBOX_FAILED] = "failed",
        [SANDBOX_REMOVING] = "removing",
};

const char *sandbox_state_to_string(SandboxState s) {
        return s >= 0 && s < _SANDBOX_STATE_MAX ? state_names[s] : NULL;
}

static uint64_t now_realtime_usec(void) {
        struct timespec ts;

        clock_gettime(CLOCK_REALTIME, &ts);
        return (uint64_t) ts.tv_sec * 1000000ULL + (uint64_t) ts.tv_nsec / 1000ULL;
}

static int random_hex(size_t n_bytes, char **ret) {
        uint8_t buf[32];
        char *s;

        if (n_bytes > sizeof(buf) || getrandom(buf, n_bytes, 0) != (ssize_t) n_bytes)
                return -EIO;
        s = malloc(2 * n_bytes + 1);
        if (!s)
                return -ENOMEM;
        for (size_t i = 0; i < n_bytes; i++)
                sprintf(s + 2 * i, "%02x", buf[i]);
        *ret = s;
        return 0;
}

int sandbox_new(Manager *m, SandboxConfig *config, uid_t owner, Sandbox **ret) {
        Sandbox *s = calloc(1, sizeof(*s));
        int r;

        if (!s)
                return -ENOMEM;
        s->manager = m;
        s->owner = owner;
        s->state = SANDBOX_CREATING;
        s->created_at = now_realtime_usec();
        s->expires_at = s->created_at + (config->ttl_sec ?: m->default_ttl_sec) * 1000000ULL;
        do {
                free(s->id);
                s->id = NULL;
                r = random_hex(8, &s->id);
                /* A letter first: the object path then spells the id as it is (no escaped digit). */
                if (r >= 0 && s->id[0] <= '9')
                        s->id[0] = 'a' + (s->id[0] - '0') % 6;
        } while (r >= 0 && manager_get_sandbox(m, s->id));
        if (r >= 0)
                r = random_hex(32, &s->token);
        if (r >= 0)
                r = sd_bus_path_encode(SANDBOX_PATH_PREFIX, s->id, &s->path);
        if (r >= 0)
                r = manager_add_sandbox(m, s);
        if (r < 0) {
                free(s->id);
                free(s->token);
                free(s->path);
                free(s);
                return r;
        }
        s->config = config;
        *ret = s;
        return 0;
}

Sandbox *sandbox_free(Sandbox *s) {
        if (!s)
                return NULL;
        if (s->create_job)
                create_job_cancel(s->create_job);
        sandbox_setup_free(s->setup);
        sd_bus_track_unref(s->track);
        manager_remove_sandbox(s->manager, s);
        if (s->create_call) {
                (void) sd_bus_reply_method_errorf(s->create_call, AGENTD_ERROR_START_FAILED,
                                                  "Sandbox %s was removed while it was being created.", s->id);
                sd_bus_message_unref(s->create_call);
        }
        for (size_t i = 0; i < s->n_delete_calls; i++) {
                (void) sd_bus_reply_method_return(s->delete_calls[i], NULL);
                sd_bus_message_unref(s->delete_calls[i]);
        }
        free(s->delete_calls);
        sandbox_config_free(s->config);
        free(s->id);
        free(s->path);
        free(s->container_id);
        free(s->bundle_id);
        free(s->runtime_url);
        free(s->failure_name);
        free(s->failure_message);
        if (s->token)
                explicit_bzero(s->token, strlen(s->token));
        free(s->token);
        free(s);
        return NULL;
}

void sandbox_set_state(Sandbox *s, SandboxState state) {
        if (s->state == state)
                return;
        log_info("Sandbox %s: %s -> %s.", s->id, sandbox_state_to_string(s->state), sandbox_state_to_string(state));
        s->state = state;
        sandbox_dbus_state_changed(s);
}

/* The container of a failed create is gone: answer with the failure. */
static void on_failed_removed(Sandbox *s, const char *error_name, const char *message) {
        sd_bus_message *call = TAKE_PTR(s->create_call);

        if (call)
                (void) sd_bus_reply_method_errorf(call, s->failure_name, "%s", s->failure_message);
        sd_bus_message_unref(call);
        sandbox_dbus_removed(s);
        sandbox_free(s);
}

static void on_setup_done(SandboxSetup *setup, const char *error, void *userdata) {
        Sandbox *s = userdata;

        s->setup = sandbox_setup_free(s->setup);
        s->setup_done = true;
        if (!error) {
                sandbox_create_done(s, NULL, NULL);
                return;
        }
        log_warning("Sandbox %s: %s", s->id, error);
        s->failure_name = strdup(AGENTD_ERROR_START_FAILED);
        s->failure_message = strdup(error);
        sandbox_set_state(s, SANDBOX_REMOVING);
        if (!s->failure_name || !s->failure_message ||
            docker_backend_remove(s->manager->docker, s, on_failed_removed) < 0) {
                free(s->failure_name);
                s->failure_name = NULL;
                sandbox_create_done(s, AGENTD_ERROR_START_FAILED, error);
        }
}

void sandbox_create_done(Sandbox *s, const char *error_name, const char *message) {
        sd_bus_message *call;

        s->create_job = NULL;
        if (!error_name && s->config->setup && !s->setup_done) {
                /* Ready: run the setup command before the caller hears of it. */
                if (sandbox_setup_run(s->manager->event, s->runtime_url, s->token, s->config->setup, on_setup_done, s,
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
                sandbox_dbus_removed(s);
                sandbox_free(s);
                return;
        }
        sandbox_set_state(s, SANDBOX_RUNNING);
        manager_schedule_reaper(s->manager);
        if (call)
                (void) sd_bus_reply_method_return(call, "os", s->path, s->id);
        sd_bus_message_unref(call);
}

static bool bundle_in_use(const char *bundle_id, void *userdata) {
        Manager *m = userdata;
        size_t state = 0;
        Sandbox *s;

        while ((s = strmap_iterate(m->sandboxes, &state)))
                if (s->bundle_id && streq(s->bundle_id, bundle_id) && s->state != SANDBOX_REMOVING)
                        return true;
        return false;
}

static void on_removed(Sandbox *s, const char *error_name, const char *message) {
        if (error_name) {
                log_warning("Sandbox %s: removing its container failed: %s", s->id, message);
                for (size_t i = 0; i < s->n_delete_calls; i++) {
                        (void) sd_bus_reply_method_errorf(s->delete_calls[i], error_name, "%s", message);
                        sd_bus_message_unref(s->delete_calls[i]);
                }
                s->n_delete_calls = 0;
                sandbox_set_state(s, SANDBOX_FAILED);
                return;
        }
        Manager *m = s->manager;
        sandbox_dbus_removed(s);
        sandbox_free(s);
        /* A carrier whose bundle was rebuilt (its image has no tag left) and that no sandbox
         * uses any more goes too. */
        docker_backend_prune_carriers(m->docker, bundle_in_use, m);
}

static int on_caller_gone(sd_bus_track *track, void *userdata) {
        Sandbox *s = userdata;

        log_info("Sandbox %s: its creator left the bus (bind_to_caller): deleting it.", s->id);
        s->track = sd_bus_track_unref(s->track);
        (void) sandbox_delete(s, NULL);
        return 0;
}

int sandbox_bind_to_caller(Sandbox *s, sd_bus_message *m) {
        int r;

        r = sd_bus_track_new(s->manager->bus, &s->track, on_caller_gone, s);
        if (r < 0)
                return r;
        return sd_bus_track_add_sender(s->track, m);
}

int sandbox_delete(Sandbox *s, sd_bus_message *call) {
        bool first = s->state != SANDBOX_REMOVING;
        int r;

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
                create_job_cancel(s->create_job);
                s->create_job = NULL;
                s->setup = sandbox_setup_free(s->setup);
                if (s->create_call) {
                        (void) sd_bus_reply_method_errorf(s->create_call, AGENTD_ERROR_START_FAILED,
                                                          "Sandbox %s was deleted while it was being created.", s->id);
                        s->create_call = sd_bus_message_unref(s->create_call);
                }
        }
        sandbox_set_state(s, SANDBOX_REMOVING);
        r = docker_backend_remove(s->manager->docker, s, on_removed);
        if (r < 0) {
                on_removed(s, AGENTD_ERROR_BACKEND_UNAVAILABLE, "Cannot reach the Docker backend to remove the sandbox.");
                return 0;
        }
        return 0;
}

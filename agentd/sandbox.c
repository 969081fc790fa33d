/* SPDX-License-Identifier: MIT */
#include <stdarg.h>
#include <sys/random.h>
#include <time.h>

#include "agentd-bus.h"
#include "agentd-errors.h"
#include "backend.h"
#include "macro.h"
#include "runtime-stats.h"
#include "sandbox-claim.h"
#include "runtime-tls.h"
#include "sandbox.h"

/* A backend's reading on its way, with where to turn when the backend cannot read. */
typedef struct StatsAsk StatsAsk;
struct StatsAsk {
        Sandbox *sandbox; /* NULL once it is gone */
        sd_event *event;
        agentd_stats_t done;
        void *userdata;
        StatsAsk *next;
};

static const char *const state_names[_SANDBOX_STATE_MAX] = {
        [SANDBOX_CREATING] = "creating",
        [SANDBOX_RUNNING] = "running",
        [SANDBOX_EXITED] = "exited",
        [SANDBOX_FAILED] = "failed",
        [SANDBOX_REMOVING] = "removing",
        [SANDBOX_PAUSED] = "paused",
        [SANDBOX_HIBERNATED] = "hibernated",
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

int sandbox_new_token(char **ret) {
        return random_hex(32, ret);
}

int sandbox_restore(SandboxConfig *config, uid_t owner, const char *id, const char *token, uint64_t created_at,
                    uint64_t expires_at, Sandbox **ret) {
        Sandbox *s = calloc(1, sizeof(*s));
        int r = 0;

        if (!s)
                return -ENOMEM;
        *s = (Sandbox) { .owner = owner, .state = SANDBOX_RUNNING, .created_at = created_at, .expires_at = expires_at };
        s->id = strdup(id);
        s->token = strdup(token);
        if (!s->id || !s->token)
                r = -ENOMEM;
        if (r >= 0)
                r = sd_bus_path_encode(SANDBOX_PATH_PREFIX, s->id, &s->path);
        if (r < 0) {
                sandbox_free(s);
                return r;
        }
        s->config = config;
        *ret = s;
        return 0;
}

int sandbox_new(SandboxConfig *config, uid_t owner, uint64_t default_ttl_sec, Sandbox **ret) {
        _cleanup_free_ char *id = NULL, *token = NULL;
        uint64_t now = now_realtime_usec();
        int r;

        r = random_hex(8, &id);
        if (r < 0)
                return r;
        /* A letter first: the object path then spells the id as it is (no escaped digit). */
        if (id[0] <= '9')
                id[0] = 'a' + (id[0] - '0') % 6;
        r = random_hex(32, &token);
        if (r >= 0)
                r = sandbox_restore(config, owner, id, token, now, now + (config->ttl_sec ?: default_ttl_sec) * 1000000ULL,
                                    ret);
        if (token)
                explicit_bzero(token, strlen(token));
        if (r < 0)
                return r;
        (*ret)->state = SANDBOX_CREATING;
        return 0;
}

void sandbox_fill_spec(Sandbox *s) {
        const SandboxConfig *c = s->config;

        s->spec = (AgentdSandboxSpec) {
                .tls = s->backend && s->backend->tls,
                .id = s->id,
                .token = s->token,
                .owner = s->owner,
                .created_at = s->created_at / 1000000,
                .expires_at = s->expires_at / 1000000,
                .image = c->image,
                .bundle = c->bundle,
                .platform = c->platform,
                .network = c->network,
                .workdir = c->workdir,
                .bound_to = s->bound_to,
                .env = (const char *const *) c->env,
                .labels = (const char *const *) c->labels,
                .cpus = c->limits.cpus,
                .memory = c->limits.memory,
                .pids = c->limits.pids,
                .runtime = c->runtime,
                .read_only = c->read_only,
                .user = c->user,
                .egress = (const char *const *) c->egress,
                .pool = s->pool_name,
        };
        s->spec.checkpointable = sandbox_spec_checkpointable(&s->spec) && s->backend && s->backend->ops->hibernate;
}

bool sandbox_spec_checkpointable(const AgentdSandboxSpec *spec) {
        /* gVisor saves what runs on its own network stack only, and that stack's packets pass no
         * rules of the host's: not for an egress list, nor for the host's network namespace.
         * TLS runtimes are not held for a checkpoint yet. */
        return streq_ptr(spec->runtime, "runsc") && !spec->egress && !spec->tls && !streq_ptr(spec->network, "host");
}

static int set_copy(char **field, const char *v) {
        char *copy = NULL;

        if (v && !(copy = strdup(v)))
                return -ENOMEM;
        free(*field);
        *field = copy;
        return 0;
}

int sandbox_set_place(Sandbox *s, const AgentdSandboxPlace *place) {
        if (set_copy(&s->runtime_url, place->runtime_url) < 0 || set_copy(&s->container_id, place->container_id) < 0 ||
            set_copy(&s->bundle_id, place->bundle_id) < 0)
                return -ENOMEM;
        if (place->token) {
                if (s->token)
                        explicit_bzero(s->token, strlen(s->token));
                if (set_copy(&s->token, place->token) < 0)
                        return -ENOMEM;
                s->spec.token = s->token;
        }
        return 0;
}

Sandbox *sandbox_free(Sandbox *s) {
        if (!s)
                return NULL;
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
        sd_bus_track_unref(s->track);
        sd_bus_slot_unref(s->owner_check);
        free(s->bound_to);
        sandbox_config_free(s->config);
        free(s->id);
        free(s->path);
        free(s->container_id);
        free(s->bundle_id);
        free(s->runtime_url);
        free(s->failure_name);
        free(s->failure_message);
        free(s->pool_name);
        sandbox_claim_free(s->claim);
        runtime_stats_free(s->runtime_stats);
        for (StatsAsk *a = s->stats_asks; a; a = a->next)
                a->sandbox = NULL; /* their answers still go to their askers, without a fallback */
        runtime_tls_free(s->tls_handover);
        sd_event_source_disable_unref(s->tls_renew);
        if (s->token)
                explicit_bzero(s->token, strlen(s->token));
        free(s->token);
        free(s);
        return NULL;
}

int sender_uid(sd_bus_message *m, uid_t *ret) {
        _cleanup_(sd_bus_creds_unrefp) sd_bus_creds *creds = NULL;
        int r;

        r = sd_bus_query_sender_creds(m, SD_BUS_CREDS_EUID, &creds);
        return r < 0 ? r : sd_bus_creds_get_euid(creds, ret);
}

int sandbox_check_caller(Sandbox *s, sd_bus_message *m, sd_bus_error *error) {
        uid_t uid;
        int r;

        r = sender_uid(m, &uid);
        if (r < 0)
                return r;
        if (!sandbox_visible_to(s, uid))
                /* Name no one: who owns a sandbox is its owner's business. */
                return sd_bus_error_setf(error, AGENTD_ERROR_NOT_OWNER, "Sandbox %s is not yours.", s->id);
        return 0;
}

int sandbox_log_internal(const char *id, uid_t owner, const char *backend, int level, int error, const char *file,
                         int line, const char *fmt, ...) {
        char id_field[64], owner_field[32], backend_field[64];
        const char *fields[4] = { id_field, owner_field };
        va_list ap;
        int r;

        snprintf(id_field, sizeof(id_field), "SANDBOX_ID=%s", id);
        snprintf(owner_field, sizeof(owner_field), "OWNER_UID=%u", (unsigned) owner);
        if (backend) {
                snprintf(backend_field, sizeof(backend_field), "BACKEND=%s", backend);
                fields[2] = backend_field;
        }
        va_start(ap, fmt);
        r = log_internalv_fields(level, error, file, line, fields, fmt, ap);
        va_end(ap);
        return r;
}

static void stats_ask_unlink(StatsAsk *a) {
        if (!a->sandbox)
                return;
        for (StatsAsk **p = &a->sandbox->stats_asks; *p; p = &(*p)->next)
                if (*p == a) {
                        *p = a->next;
                        break;
                }
}

/* A backend that cannot read a running sandbox's usage (dockerd's processes out of agentd's
 * sight, say: agentd in a container of its own) leaves it to the runtime, which reads its own
 * cgroup from inside, as for a backend without stats(). */
static void on_backend_stats(void *userdata, const AgentdSandboxStats *stats, const char *error_name,
                             const char *message) {
        _cleanup_free_ StatsAsk *a = userdata;
        Sandbox *s = a->sandbox;

        stats_ask_unlink(a);
        if (error_name && streq(error_name, AGENTD_ERROR_BACKEND_UNAVAILABLE) && s && s->state == SANDBOX_RUNNING &&
            s->runtime_url &&
            runtime_stats_ask(a->event, s->runtime_url, s->id, s->token, s->backend->runtime_ca_pem, &s->runtime_stats,
                              a->done, a->userdata) >= 0)
                return;
        a->done(a->userdata, stats, error_name, message);
}

int sandbox_read_stats(sd_event *event, Sandbox *s, agentd_stats_t done, void *userdata) {
        StatsAsk *a;
        int r;

        if (s->state != SANDBOX_RUNNING && s->state != SANDBOX_PAUSED)
                return -ENOTCONN;
        if (s->backend->ops->stats) {
                a = calloc(1, sizeof(*a));
                if (!a)
                        return -ENOMEM;
                *a = (StatsAsk) { .sandbox = s, .event = event, .done = done, .userdata = userdata,
                                  .next = s->stats_asks };
                s->stats_asks = a;
                r = s->backend->ops->stats(s->backend->state, s->id, on_backend_stats, a);
                if (r < 0) {
                        stats_ask_unlink(a);
                        free(a);
                }
                return r;
        }
        if (s->state == SANDBOX_PAUSED)
                return -EAGAIN; /* its runtime is frozen with it */
        return runtime_stats_ask(event, s->runtime_url, s->id, s->token, s->backend->runtime_ca_pem,
                                 &s->runtime_stats, done, userdata);
}

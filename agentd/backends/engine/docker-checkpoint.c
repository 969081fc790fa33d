/* SPDX-License-Identifier: MIT */
/* Hibernating a sandbox: Docker's checkpoints (dockerd with experimental features, the runsc
 * runtime: agentix-runsc(8)). POST /containers/NAME/checkpoints {CheckpointID, Exit: true}
 * saves the container's processes and memory under Docker's own directory for it
 * (/var/lib/docker/containers/ID/checkpoints/; Docker refuses any other at start) and stops it;
 * POST /containers/NAME/start?checkpoint= runs it from there.
 *
 * Two things Docker does not do for us: it answers the checkpoint before it has seen the
 * container stop (a start then finds it "running"), so the stop is waited for; and containerd
 * may still hold the old task a moment after (a start fails "already in use" or "already
 * exists"), so a start is tried again, bounded. After a restore the runtime holds still as it
 * was when saved: SIGUSR2 tells it to listen again (agentix-server(8)). */
#include "docker-backend.h"
#include "docker-client.h"
#include "health-probe.h"
#include "log.h"

#define CHECKPOINT_TIMEOUT_USEC (600ULL * 1000000)  /* saving many GiB takes a while */
#define START_TIMEOUT_USEC (600ULL * 1000000)
#define POLL_USEC (50ULL * 1000)
#define STOP_POLLS_MAX 400                           /* 20 s for Docker to see the stop */
#define START_TRIES_MAX 50                           /* 10 s of "already in use" */
#define START_RETRY_USEC (200ULL * 1000)
#define HEALTH_TIMEOUT_USEC (60ULL * 1000000)
#define HEALTH_INTERVAL_USEC (20ULL * 1000)
#define SIGNAL_EVERY 25                              /* probes between SIGUSR2s and looks at the container */

typedef enum LiveStep {
        STEP_DROP_OLD,       /* DELETE a checkpoint left from before */
        STEP_CHECKPOINT,
        STEP_WAIT_STOPPED,
        STEP_LOOK,           /* wake without a checkpoint: running already? */
        STEP_START,
        STEP_SIGNAL,
        STEP_INSPECT,        /* where its runtime is now */
        STEP_HEALTH,
        STEP_HEALTH_LOOK,    /* still running while /health is waited for? */
        STEP_DROP_USED,      /* DELETE the checkpoint it ran from */
} LiveStep;

typedef struct LiveJob {
        DockerBackend *backend;
        char *id;
        LiveStep step;
        bool waking;
        bool from_checkpoint;
        bool signal_needed;  /* its runtime was holding still */
        bool started;        /* a wake has it running: a failure from then on stops it again */
        agentd_done_t done;  /* hibernate */
        agentd_made_t made;  /* wake */
        void *userdata;
        DockerRequest *request;
        sd_event_source *timer;
        HealthProbe *probe;
        unsigned polls;
        unsigned tries;
        uint64_t deadline;
        char *runtime_url, *container_id, *bundle_id;
} LiveJob;

static LiveJob *job_free(LiveJob *j) {
        if (!j)
                return NULL;
        docker_request_cancel(j->request);
        sd_event_source_disable_unref(j->timer);
        health_probe_free(j->probe);
        free(j->runtime_url);
        free(j->container_id);
        free(j->bundle_id);
        free(j->id);
        return mfree(j);
}

/* The caller hears error_name (NULL: done) once; the job goes. */
static void job_end(LiveJob *j, const char *error_name, const char *fmt, ...) _printf_(3, 4);
static void on_stopped(DockerClient *d, int status, json_t *body, const char *error, void *userdata) {
}

static void job_end(LiveJob *j, const char *error_name, const char *fmt, ...) {
        _cleanup_free_ char *message = NULL;
        va_list ap;

        /* A wake that failed once it ran leaves it stopped, as agentd then says it is (still
         * hibernated, or exited), not running unseen. */
        if (j->waking && error_name && j->started) {
                char path[128];

                snprintf(path, sizeof(path), "/containers/agentix-%s/kill", j->id);
                (void) docker_request(j->backend->docker, "POST", path, NULL, 0, on_stopped, NULL, NULL);
        }

        if (fmt) {
                va_start(ap, fmt);
                if (vasprintf(&message, fmt, ap) < 0)
                        message = NULL;
                va_end(ap);
        }
        if (j->waking) {
                const AgentdSandboxPlace place = { .runtime_url = j->runtime_url, .container_id = j->container_id,
                                                   .bundle_id = j->bundle_id };
                j->made(j->userdata, error_name ? NULL : &place, error_name, error_name ? message ?: "out of memory" : NULL);
        } else
                j->done(j->userdata, error_name, error_name ? message ?: "out of memory" : NULL);
        job_free(j);
}

static void on_reply(DockerClient *d, int status, json_t *body, const char *error, void *userdata);
static void step_run(LiveJob *j);

static void send_step(LiveJob *j, LiveStep step, const char *method, const char *what, json_t *body,
                      uint64_t timeout_usec) {
        char path[256];

        j->step = step;
        snprintf(path, sizeof(path), "/containers/agentix-%s%s", j->id, what);
        if (docker_request(j->backend->docker, method, path, body, timeout_usec, on_reply, j, &j->request) < 0)
                job_end(j, AGENTD_ERROR_BACKEND_UNAVAILABLE, "Cannot send a request to %s", j->backend->service);
}

static int on_timer(sd_event_source *es, uint64_t usec, void *userdata) {
        LiveJob *j = userdata;

        j->timer = sd_event_source_disable_unref(j->timer);
        step_run(j);
        return 0;
}

static void later(LiveJob *j, LiveStep step, uint64_t usec) {
        j->step = step;
        if (sd_event_add_time_relative(j->backend->event, &j->timer, CLOCK_MONOTONIC, usec, 1000, on_timer, j) < 0)
                job_end(j, AGENTD_ERROR_BACKEND_UNAVAILABLE, "Out of memory");
}

static void on_probe_done(void *userdata, bool healthy) {
        LiveJob *j = userdata;
        uint64_t now = 0;

        if (healthy) {
                if (j->from_checkpoint)
                        send_step(j, STEP_DROP_USED, "DELETE", "/checkpoints/" DOCKER_CHECKPOINT_NAME, NULL, 0);
                else
                        job_end(j, NULL, NULL);
                return;
        }
        (void) sd_event_now(j->backend->event, CLOCK_MONOTONIC, &now);
        if (now >= j->deadline) {
                job_end(j, AGENTD_ERROR_START_FAILED, "Its runtime did not answer /health within %llu s of its "
                        "start (see the logs of container agentix-%s)", HEALTH_TIMEOUT_USEC / 1000000, j->id);
                return;
        }
        if (++j->polls % SIGNAL_EVERY == 0)
                send_step(j, STEP_HEALTH_LOOK, "GET", "/json", NULL, 0);
        else
                later(j, STEP_HEALTH, HEALTH_INTERVAL_USEC);
}

static void step_run(LiveJob *j) {
        switch (j->step) {
        case STEP_DROP_OLD:
                send_step(j, STEP_DROP_OLD, "DELETE", "/checkpoints/" DOCKER_CHECKPOINT_NAME, NULL, 0);
                return;
        case STEP_CHECKPOINT: {
                _cleanup_(json_decrefp) json_t *body = json_pack("{s:s, s:b}", "CheckpointID", DOCKER_CHECKPOINT_NAME, "Exit", 1);
                if (!body) {
                        job_end(j, AGENTD_ERROR_BACKEND_UNAVAILABLE, "Out of memory");
                        return;
                }
                send_step(j, STEP_CHECKPOINT, "POST", "/checkpoints", body, CHECKPOINT_TIMEOUT_USEC);
                return;
        }
        case STEP_WAIT_STOPPED:
        case STEP_LOOK:
                send_step(j, j->step, "GET", "/json", NULL, 0);
                return;
        case STEP_START:
                send_step(j, STEP_START, "POST", j->from_checkpoint ? "/start?checkpoint=" DOCKER_CHECKPOINT_NAME : "/start",
                          NULL, START_TIMEOUT_USEC);
                return;
        case STEP_SIGNAL:
                send_step(j, STEP_SIGNAL, "POST", "/kill?signal=SIGUSR2", NULL, 0);
                return;
        case STEP_INSPECT:
                send_step(j, STEP_INSPECT, "GET", "/json", NULL, 0);
                return;
        case STEP_HEALTH:
                if (!j->probe && health_probe_new(j->backend->probes, j->runtime_url, on_probe_done, j, &j->probe) < 0) {
                        job_end(j, AGENTD_ERROR_START_FAILED, "Cannot probe its runtime: out of memory");
                        return;
                }
                if (health_probe_start(j->probe) < 0)
                        job_end(j, AGENTD_ERROR_START_FAILED, "Cannot probe its runtime");
                return;
        case STEP_HEALTH_LOOK:
        case STEP_DROP_USED:
                break;
        }
        job_end(j, AGENTD_ERROR_BACKEND_UNAVAILABLE, "Lost its way (step %d)", (int) j->step);
}

static bool running(json_t *inspect) {
        return json_is_true(json_object_get(json_object_get(inspect, "State"), "Running"));
}

static bool says(json_t *body, const char *error, const char *what) {
        const char *message = json_string_value(json_object_get(body, "message"));

        return (message && strstr(message, what)) || (error && strstr(error, what));
}

/* Where its runtime is, from its inspect, for the place made() reports. */
static int take_place(LiveJob *j, json_t *inspect) {
        const char *id = json_string_value(json_object_get(inspect, "Id")),
                   *bundle = json_string_value(json_object_get(
                           json_object_get(json_object_get(inspect, "Config"), "Labels"), "org.agentix.bundle.id"));
        int r;

        free(j->runtime_url);
        j->runtime_url = NULL;
        r = docker_runtime_url(inspect, &j->runtime_url);
        if (r < 0)
                return r;
        if ((id && !(j->container_id = strdup(id))) || (bundle && !(j->bundle_id = strdup(bundle))))
                return -ENOMEM;
        return 0;
}

static void on_reply(DockerClient *d, int status, json_t *body, const char *error, void *userdata) {
        LiveJob *j = userdata;
        char buf[512];

        j->request = NULL;
        if (status == 404 && j->step != STEP_DROP_OLD && j->step != STEP_DROP_USED) {
                job_end(j, AGENTD_ERROR_NO_SUCH_SANDBOX, "Its container is gone.");
                return;
        }
        switch (j->step) {
        case STEP_DROP_OLD:
                step_run((j->step = STEP_CHECKPOINT, j));
                return;
        case STEP_CHECKPOINT:
                if (status == 201 || status == 200 || status == 204) {
                        later(j, STEP_WAIT_STOPPED, 0);
                        return;
                }
                if (says(body, error, "experimental") || says(body, error, "not supported"))
                        job_end(j, AGENTD_ERROR_NOT_SUPPORTED, "%s cannot checkpoint it: %s", j->backend->service,
                                docker_error_message(status, body, error, buf, sizeof(buf)));
                else
                        job_end(j, AGENTD_ERROR_CHECKPOINT_FAILED, "%s", docker_error_message(status, body, error, buf,
                                                                                            sizeof(buf)));
                return;
        case STEP_WAIT_STOPPED:
                if (status == 200 && running(body)) {
                        if (++j->polls > STOP_POLLS_MAX) {
                                job_end(j, AGENTD_ERROR_CHECKPOINT_FAILED, "%s took its checkpoint but did not stop "
                                        "it within %llu s", j->backend->service, STOP_POLLS_MAX * POLL_USEC / 1000000);
                                return;
                        }
                        later(j, STEP_WAIT_STOPPED, POLL_USEC);
                        return;
                }
                if (status != 200)
                        break;
                job_end(j, NULL, NULL);
                return;
        case STEP_LOOK:
                if (status != 200)
                        break;
                if (running(body)) {
                        j->started = true;
                        j->signal_needed = true; /* held, not stopped: it listens again */
                        step_run((j->step = STEP_SIGNAL, j));
                } else
                        step_run((j->step = STEP_START, j));
                return;
        case STEP_START:
                if (status == 204 || status == 304) {
                        j->started = true;
                        step_run((j->step = j->signal_needed ? STEP_SIGNAL : STEP_INSPECT, j));
                        return;
                }
                /* containerd has not let go of the task it ran (or Docker not seen the stop). */
                if ((says(body, error, "already in use") || says(body, error, "already exists") ||
                     says(body, error, "is already running")) && ++j->tries < START_TRIES_MAX) {
                        later(j, STEP_START, START_RETRY_USEC);
                        return;
                }
                job_end(j, AGENTD_ERROR_START_FAILED, "%s could not start it%s: %s", j->backend->service,
                        j->from_checkpoint ? " from its checkpoint" : "",
                        docker_error_message(status, body, error, buf, sizeof(buf)));
                return;
        case STEP_SIGNAL:
                /* 409: not running (any more): the look that follows says so. */
                if (status != 204 && status != 409)
                        break;
                if (j->runtime_url) /* again, while /health is waited for */
                        later(j, STEP_HEALTH, HEALTH_INTERVAL_USEC);
                else
                        step_run((j->step = STEP_INSPECT, j));
                return;
        case STEP_INSPECT:
        case STEP_HEALTH_LOOK:
                if (status != 200)
                        break;
                if (!running(body)) {
                        job_end(j, AGENTD_ERROR_START_FAILED, "It stopped right after its start%s (exit status %lld; "
                                "see the logs of container agentix-%s)", j->from_checkpoint ? " from its checkpoint" : "",
                                (long long) json_integer_value(json_object_get(json_object_get(body, "State"), "ExitCode")),
                                j->id);
                        return;
                }
                if (j->step == STEP_HEALTH_LOOK) {
                        step_run((j->step = j->signal_needed ? STEP_SIGNAL : STEP_HEALTH, j));
                        return;
                }
                if (take_place(j, body) < 0) {
                        job_end(j, AGENTD_ERROR_START_FAILED, "%s gave its runtime neither a published port nor an "
                                "address", j->backend->service);
                        return;
                }
                (void) sd_event_now(j->backend->event, CLOCK_MONOTONIC, &j->deadline);
                j->deadline += HEALTH_TIMEOUT_USEC;
                j->polls = 0;
                step_run((j->step = STEP_HEALTH, j));
                return;
        case STEP_DROP_USED:
                /* Kept on disk if it cannot go: the sandbox runs either way, and the next
                 * hibernate removes it first. */
                if (status != 204 && status != 404)
                        log_warning("Sandbox %s: cannot remove the checkpoint it ran from (%s).", j->id,
                                    docker_error_message(status, body, error, buf, sizeof(buf)));
                job_end(j, NULL, NULL);
                return;
        case STEP_HEALTH:
                break;
        }
        job_end(j, j->waking ? AGENTD_ERROR_START_FAILED : AGENTD_ERROR_CHECKPOINT_FAILED, "%s",
                docker_error_message(status, body, error, buf, sizeof(buf)));
}

static int job_new(DockerBackend *b, const char *sandbox_id, void *userdata, LiveJob **ret) {
        LiveJob *j = calloc(1, sizeof(*j));

        if (!j || !(j->id = strdup(sandbox_id))) {
                free(j);
                return -ENOMEM;
        }
        j->backend = b;
        j->userdata = userdata;
        *ret = j;
        return 0;
}

int docker_backend_hibernate(DockerBackend *b, const char *sandbox_id, agentd_done_t done, void *userdata) {
        LiveJob *j;
        int r;

        r = job_new(b, sandbox_id, userdata, &j);
        if (r < 0)
                return r;
        j->done = done;
        later(j, STEP_DROP_OLD, 0);
        return 0;
}

int docker_backend_wake(DockerBackend *b, const char *sandbox_id, bool from_checkpoint, agentd_made_t made,
                        void *userdata) {
        LiveJob *j;
        int r;

        r = job_new(b, sandbox_id, userdata, &j);
        if (r < 0)
                return r;
        j->made = made;
        j->waking = true;
        j->from_checkpoint = from_checkpoint;
        j->signal_needed = from_checkpoint;
        later(j, from_checkpoint ? STEP_START : STEP_LOOK, 0);
        return 0;
}

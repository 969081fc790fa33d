/* SPDX-License-Identifier: MIT */
#pragma once

/* Sandboxes as Docker containers: one carrier per bundle image (created, never started: its
 * /nix volume is what task containers take with VolumesFrom), and one task container per
 * sandbox, named agentix-<id>, with agentix-server from the bundle as its entrypoint, port 8000
 * published on 127.0.0.1 only, labels, and cpu/memory/pids limits. A create is ready when the
 * runtime answers /health; any failure on the way removes what it made. */

#include <systemd/sd-event.h>

#include "curl-event.h"
#include "docker-client.h"
#include "sandbox.h"

typedef struct DockerBackend DockerBackend;

/* error_name: NULL on success, else an org.agentix.Agentd1 error with its message. */
typedef void (*sandbox_done_t)(Sandbox *s, const char *error_name, const char *message, void *userdata);

int docker_backend_new(sd_event *event, const char *socket, DockerBackend **ret);
DockerBackend *docker_backend_free(DockerBackend *b);

/* Start making s's container (s->create_job is the job); done is called once it answers /health
 * or failed (what it made removed by then), possibly before this returns. */
int docker_backend_create(DockerBackend *b, Sandbox *s, sandbox_done_t done, void *userdata);
/* Stop a create (its reply is never given); what it made is left for the remove that follows. */
void create_job_cancel(CreateJob *j);

/* Force-remove s's container (by name: also one a cancelled create made) with its volumes. */
int docker_backend_remove(DockerBackend *b, Sandbox *s, sandbox_done_t done, void *userdata);

/* Follow Docker's event stream for agentd's containers: action ("start", "die", "oom",
 * "destroy", …) of the sandbox with this id. Reconnects (from where it left off) when the
 * stream ends, so that a Docker restart is followed too. */
typedef void (*docker_event_t)(const char *sandbox_id, const char *action, void *userdata);
int docker_backend_watch(DockerBackend *b, docker_event_t on_event, void *userdata);

/* The backend's state, shared by its files: docker-backend.c (sandboxes), docker-events.c (the
 * event stream), docker-carriers.c (old carriers). */
struct DockerBackend {
        sd_event *event;
        DockerClient *docker;
        CurlEvent *probes;
        /* the event stream */
        docker_event_t on_event;
        void *event_userdata;
        DockerRequest *events;
        sd_event_source *events_retry;
        long long events_since;   /* unix time of the last event seen */
};

/* Look at every sandbox container agentd made (label org.agentix.sandbox): found() gets each
 * one's inspect data (borrowed), then done() once all were seen. */
typedef void (*docker_found_t)(json_t *inspect, void *userdata);
int docker_backend_adopt(DockerBackend *b, docker_found_t found, void (*done)(void *userdata), void *userdata);

/* Force-remove a container (by id or name) with its volumes, in the background. */
void docker_backend_remove_container(DockerBackend *b, const char *id);

/* A string escaped for a URL's query or path (malloc'ed). */
char *docker_escape(const char *s);

/* Requests that take longer than this fail (default 30 s). */
void docker_backend_set_timeout(DockerBackend *b, uint64_t usec);

/* Remove the carriers whose bundle image lost its last tag (it was rebuilt: creates use the new
 * one) and that no sandbox uses (in_use(bundle_id)). In the background; failures are logged. */
void docker_backend_prune_carriers(DockerBackend *b, bool (*in_use)(const char *bundle_id, void *userdata),
                                   void *userdata);


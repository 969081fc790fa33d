/* SPDX-License-Identifier: MIT */
#pragma once

/* What the Docker backend's files (docker-backend.c: sandboxes, docker-events.c: the event
 * stream, docker-carriers.c: old carriers) share. */

#include "curl-event.h"
#include "docker-backend.h"
#include "docker-client.h"

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

/* A string escaped for a URL's query or path (malloc'ed). */
char *docker_escape(const char *s);

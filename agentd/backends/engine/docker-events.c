/* SPDX-License-Identifier: MIT */
#include <time.h>

#include "docker-backend.h"
#include "log.h"
#include "macro.h"

#define EVENTS_RETRY_USEC (1000ULL * 1000)

static int events_connect(DockerBackend *b);
static int on_events_retry(sd_event_source *s, uint64_t usec, void *userdata);

static void on_event_line(DockerClient *d, json_t *line, void *userdata) {
        DockerBackend *b = userdata;
        json_t *attrs = json_object_get(json_object_get(line, "Actor"), "Attributes");
        const char *id = json_string_value(json_object_get(attrs, "org.agentix.sandbox")),
                   *name = json_string_value(json_object_get(attrs, "name"));
        const char *action = json_string_value(json_object_get(line, "Action")) ?:
                             json_string_value(json_object_get(line, "status"));
        json_int_t t = json_integer_value(json_object_get(line, "time"));

        if (t > b->events_since)
                b->events_since = t;
        if (action && streq(action, "remove"))
                action = "destroy"; /* Podman's word for it */
        /* The labels alone do not make a sandbox: a container run from an image committed of
         * one (docker commit) carries them too. Its own are named agentix-<id>, and carry this
         * agentd's instance (another agentd's on the same service are that one's). */
        if (id && action && name && startswith(name, "agentix-") && streq(name + STRLEN("agentix-"), id) &&
            docker_labels_instance_is(attrs, b->instance))
                b->on_event(b->event_userdata, id, action);
}

static void events_retry_later(DockerBackend *b) {
        if (sd_event_add_time_relative(b->event, &b->events_retry, CLOCK_MONOTONIC, EVENTS_RETRY_USEC, 0,
                                       on_events_retry, b) < 0)
                log_warning("Cannot follow %s's events any more: out of memory.", b->service);
}

/* The service answers again: follow its events, and have agentd look at what it missed. */
static void on_version(DockerClient *d, int status, json_t *body, const char *error, void *userdata) {
        DockerBackend *b = userdata;

        b->events_probe = NULL;
        if (status != 200 || events_connect(b) < 0) {
                events_retry_later(b);
                return;
        }
        log_info("%s answers again: following its events, and looking at its containers.", b->service);
        b->events_lost = false;
        if (b->isolated)
                network_shards_forget(b->isolated); /* a new Docker may have lost them: look again */
        if (b->egress)
                network_shards_forget(b->egress);
        json_decref(b->runtimes);                  /* and may have other runtimes */
        b->runtimes = NULL;
        docker_backend_ask_runtimes(b);
        b->on_event(b->event_userdata, NULL, "resync");
}

static int on_events_retry(sd_event_source *s, uint64_t usec, void *userdata) {
        DockerBackend *b = userdata;

        b->events_retry = sd_event_source_disable_unref(b->events_retry);
        if (docker_request(b->docker, "GET", "/version", NULL, 0, on_version, b, &b->events_probe) < 0)
                events_retry_later(b);
        return 0;
}

static void on_events_end(DockerClient *d, int status, json_t *body, const char *error, void *userdata) {
        DockerBackend *b = userdata;

        b->events = NULL;
        if (!b->events_lost)
                log_warning("%s's event stream ended (%s); following it again once %s answers.", b->service,
                            error ?: (status == 200 ? "closed" : "refused"), b->service);
        b->events_lost = true;
        events_retry_later(b);
}

static int events_connect(DockerBackend *b) {
        _cleanup_free_ char *path = NULL;
        /* Containers agentd made; since the last event seen, so that none is missed in between. */
        _cleanup_free_ char *filters = docker_escape("{\"type\":[\"container\"],\"label\":[\"org.agentix.managed=1\"]}");

        if (!filters || asprintf(&path, "/events?filters=%s&since=%lld", filters, b->events_since) < 0)
                return -ENOMEM;
        return docker_stream(b->docker, path, on_event_line, on_events_end, b, &b->events);
}

int docker_backend_watch(DockerBackend *b, agentd_event_t on_event, void *userdata) {
        b->on_event = on_event;
        b->event_userdata = userdata;
        b->events_since = (long long) time(NULL);
        docker_backend_ask_runtimes(b);
        return events_connect(b);
}


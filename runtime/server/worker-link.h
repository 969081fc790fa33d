/* SPDX-License-Identifier: MIT */
#pragma once

/* The server's end of the worker: spawning agentix-worker on a socketpair, framed
 * I/O without ever blocking the event loop, and noticing its death (exit status or signal). */

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include <systemd/sd-event.h>

#include "frame.h"

typedef struct WorkerLink WorkerLink;

typedef struct WorkerLinkCallbacks {
        void (*ready)(WorkerLink *w, void *userdata);
        /* One frame from the worker; payload valid during the call, unless kept with
         * frame_reader_take(reader, …). */
        void (*frame)(WorkerLink *w, uint8_t kind, const uint8_t *payload, size_t size, FrameReader *reader,
                      void *userdata);
        /* The worker is gone. returncode: exit status, or -signal (like Python's returncode). */
        void (*died)(WorkerLink *w, int returncode, void *userdata);
} WorkerLinkCallbacks;

typedef struct WorkerLinkConfig {
        const char *executable;   /* agentix-worker */
        char **extra_args;        /* NULL-terminated, appended to the worker's argv */
        size_t max_frame;
        /* Called with each new worker's pid before it gets any work; <0 kills it (a bound
         * that cannot be applied is not silently skipped). */
        int (*on_spawn)(pid_t pid, void *userdata);
        void *on_spawn_userdata;
} WorkerLinkConfig;

int worker_link_new(sd_event *event, const WorkerLinkConfig *config, const WorkerLinkCallbacks *callbacks,
                    void *userdata, WorkerLink **ret);
WorkerLink *worker_link_free(WorkerLink *w);

/* Spawn a worker (no-op if one is running). */
int worker_link_start(WorkerLink *w);
bool worker_link_running(const WorkerLink *w);
bool worker_link_ready(const WorkerLink *w);
pid_t worker_link_pid(const WorkerLink *w);

/* Queue one frame; it goes out as the socket takes it. */
int worker_link_send(WorkerLink *w, uint8_t kind, const void *payload, size_t size);

/* The server reaps every child (as PID 1 of a container it inherits orphans too) and hands
 * each exit here; returns true when it was the worker's. */
bool worker_link_child_exited(WorkerLink *w, pid_t pid, int status);

/* Ask the worker to exit (SHUTDOWN frame), SIGKILL it if it is still there after `timeout_usec`. */
void worker_link_stop(WorkerLink *w, uint64_t timeout_usec);

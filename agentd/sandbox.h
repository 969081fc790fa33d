/* SPDX-License-Identifier: MIT */
#pragma once

/* A sandbox: one task container with a bundle's runtime, created for one caller. Its D-Bus face
 * is sandbox-dbus.c; the backend that makes and removes its container is docker-backend.c. */

#include <stdint.h>
#include <sys/types.h>
#include <systemd/sd-bus.h>

#include "sandbox-config.h"

typedef struct Manager Manager;
typedef struct CreateJob CreateJob;

typedef enum SandboxState {
        SANDBOX_CREATING,
        SANDBOX_RUNNING,
        SANDBOX_EXITED,
        SANDBOX_FAILED,
        SANDBOX_REMOVING,
        _SANDBOX_STATE_MAX,
} SandboxState;

typedef struct Sandbox {
        Manager *manager;
        char *id;                 /* 16 hex digits */
        char *path;               /* /org/agentix/Agentd1/sandbox/<id> */
        SandboxConfig *config;
        uid_t owner;
        uint64_t created_at;      /* CLOCK_REALTIME, µs */
        uint64_t expires_at;
        SandboxState state;
        char *container_id;
        char *bundle_id;          /* the bundle image's id (sha256:…): which carrier it uses */
        char *runtime_url;        /* http://127.0.0.1:PORT once running */
        char *token;
        CreateJob *create_job;    /* while creating */
        sd_bus_message *create_call; /* CreateSandbox, answered when the runtime answers /health */
        sd_bus_message **delete_calls; /* Delete()/DeleteSandbox() waiting for the container to go */
        size_t n_delete_calls;
        struct SandboxSetup *setup;   /* the setup command, while it runs */
        bool setup_done;
        char *failure_name, *failure_message; /* a create that failed after the container started */
        sd_bus_track *track;      /* bind_to_caller: the creator on the bus */
} Sandbox;

const char *sandbox_state_to_string(SandboxState s);

/* A new sandbox in state creating, registered with the manager. */
int sandbox_new(Manager *m, SandboxConfig *config, uid_t owner, Sandbox **ret);
/* Unregister and free (the container is the backend's business). */
Sandbox *sandbox_free(Sandbox *s);

void sandbox_set_state(Sandbox *s, SandboxState state);

/* The create finished: answer the pending CreateSandbox. On failure (error_name set) the sandbox
 * is freed. */
void sandbox_create_done(Sandbox *s, const char *error_name, const char *message);

/* Delete the sandbox when the bus peer that sent `m` leaves the bus (bind_to_caller). */
int sandbox_bind_to_caller(Sandbox *s, sd_bus_message *m);

/* Remove the sandbox's container, then the sandbox; `call` (may be NULL) is answered then. */
int sandbox_delete(Sandbox *s, sd_bus_message *call);

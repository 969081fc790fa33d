/* SPDX-License-Identifier: MIT */
#pragma once

/* A sandbox's `setup` command: run once through its own runtime (sandbox::exec over
 * libagentix, on agentd's event loop) after it answered /health and before CreateSandbox is
 * answered, so that it runs exactly as the caller's later commands will (the bundle's
 * environment, the task image's shell). */

#include <systemd/sd-event.h>

typedef struct SandboxSetup SandboxSetup;

/* error: NULL when the command ran and exited 0, else one line for a person. */
typedef void (*sandbox_setup_done_t)(SandboxSetup *setup, const char *error, void *userdata);

#define SANDBOX_SETUP_TIMEOUT_SEC 600

int sandbox_setup_run(sd_event *event, const char *url, const char *id, const char *ca_pem, const char *token, const char *command,
                      sandbox_setup_done_t done, void *userdata, SandboxSetup **ret);
/* Stop (the done callback is not called). */
SandboxSetup *sandbox_setup_free(SandboxSetup *setup);

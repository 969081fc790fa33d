/* SPDX-License-Identifier: MIT */
#pragma once

/* agentixctl shell --session=NAME: persistent shell sessions (shell::) from the command line. */

#include "agentix.h"

typedef struct ShellAttachOptions {
        const char *cwd;       /* where a session opened now starts */
        char **env;            /* KEY=VALUE or KEY (unset), NULL-terminated; for a session opened now */
} ShellAttachOptions;

/* Attach to session `name`, opening it when it is not open. Returns an exit status. */
int shell_attach(agentix_client *client, const char *name, const ShellAttachOptions *o);
/* End session `name`. Returns an exit status. */
int shell_close(agentix_client *client, const char *name);

/* SPDX-License-Identifier: MIT */
#pragma once

/* Where a cp operand lives, docker-cp style: `:PATH` is a path in the sandbox the global
 * options name (direct mode, --url), `ID:PATH` a path in sandbox ID (through agentd, for the
 * D-Bus commands to come), anything else a local path. An operand is remote when it has a ':'
 * before its first '/'; a local name with such a colon is written `./a:b`. */

#include <stdbool.h>

typedef struct RemotePath {
        bool remote;
        char *sandbox;     /* the ID before ':', NULL for `:PATH` (direct mode) or a local path */
        const char *path;  /* points into the operand */
} RemotePath;

/* -EINVAL for a malformed sandbox ID; the operand must outlive the result. */
int remote_path_parse(const char *operand, RemotePath *ret);
void remote_path_done(RemotePath *p);

/* SPDX-License-Identifier: MIT */
#pragma once

/* The environment of a bundle (/nix/runtime/etc/environment), which agentix-server applies
 * before it runs anything: the bundle's programs first on PATH, and where relocated programs
 * find the data they would look for at build-time paths. */

#include "closure.h"

/* From the named store paths of c, then `extra` (the manifest's [Environment]) in order. */
int runtime_environment(Closure *c, char *const *extra, char ***ret);

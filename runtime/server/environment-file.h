/* SPDX-License-Identifier: MIT */
#pragma once

/* A bundle's environment (/nix/runtime/etc/environment, written by agentixctl build): lines
 * NAME=VALUE, blank lines and '#' comments; in VALUE, ${NAME} is the variable's value at that
 * point (empty when unset), so "PATH=/nix/runtime/bin:${PATH}" puts the bundle first. No
 * quoting: everything after the first '=' is the value. agentix-server applies it to its own
 * environment at start, so the worker and every command it runs have it. */

#include <stddef.h>

typedef int (*environment_assign_t)(const char *name, const char *value, void *userdata);
typedef const char *(*environment_lookup_t)(const char *name, void *userdata);

/* Parse text (n bytes, need not be NUL-terminated), expanding with lookup and calling assign for
 * each line in order. -EBADMSG with *ret_line set on a malformed line, -E2BIG on one whose value,
 * expanded, is longer than 128 KiB. */
int environment_parse(const char *text, size_t n, environment_lookup_t lookup, environment_assign_t assign,
                      void *userdata, unsigned *ret_line);

/* Read path and setenv() each assignment. -ENOENT when the file is missing. */
int environment_file_apply(const char *path);

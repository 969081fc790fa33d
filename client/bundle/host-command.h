/* SPDX-License-Identifier: MIT */
#pragma once

/* Running the build host's tools (dpkg-query, patchelf, cc, pkg-config): argv[0] is looked up
 * on PATH, stdin is /dev/null. */

#include <stddef.h>

/* Run and wait. The output (stdout, and stderr when ret_output is given) is collected into
 * *ret_output (malloc'ed, NUL-terminated; may be NULL when not wanted, then stderr is left
 * alone and stdout is discarded). Returns the exit status (>= 0, 128+N for a signal), or a
 * negative errno when the program could not be started (-ENOENT: not installed). */
int spawn_capture(char *const argv[], char **ret_output, size_t *ret_size);

/* Same, but only stdout is collected; stderr goes to ours. */
int spawn_stdout(char *const argv[], char **ret_output, size_t *ret_size);

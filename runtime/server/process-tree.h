/* SPDX-License-Identifier: MIT */
#pragma once

/* The processes below agentix-server. Commands run by sandbox::exec may leave jobs running in
 * the background; as a child subreaper the server inherits them when their parents exit, so
 * every one of them stays a descendant and can be found (and ended) from /proc. */

#include <stddef.h>
#include <sys/types.h>

/* Every descendant of `root` (not root itself), from /proc. *ret is malloc()ed. */
int process_tree_list(pid_t root, pid_t **ret, size_t *ret_n);

/* End every descendant of `root` except `spare` (0 for none): stop them all first, so none can
 * fork past us, until a pass finds no new one (at most `max_rounds`), then SIGKILL them.
 * Returns how many were killed. */
int process_tree_kill(pid_t root, pid_t spare, unsigned max_rounds);

/* SPDX-License-Identifier: MIT */
#pragma once

/* The files of a configuration directory (agentd.conf.d: NAME.conf; pools.d: NAME.pool; users:
 * NAME.conf), as agentd.conf(5) says: names ending in suffix, hidden ones left out, in
 * alphabetical order, at most max of them. */

/* *ret_paths: "DIR/NAME" each, NULL-terminated (empty when dir does not exist); *ret_n their
 * count. A negative errno with *ret_error (one line naming dir) when it cannot be read or holds
 * more than max. */
int config_dir_list(const char *dir, const char *suffix, int max, char ***ret_paths, int *ret_n, char **ret_error);

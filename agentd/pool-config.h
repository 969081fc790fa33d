/* SPDX-License-Identifier: MIT */
#pragma once

/* A warm pool's file: pools.d/NAME.pool beside agentd.conf, one [Pool] section naming how many
 * sandboxes to keep ready (Size=) and the configuration they are made with (Image=, Bundle=,
 * and CPUs=, Memory=, Pids=, Runtime=, Network=, Platform= as a create would name them), and
 * for E2B templates DefaultUser=.
 * agentd.conf(5) documents them; a bad file is one line naming the file, the line and the key,
 * as for agentd.conf. */

#include <stdint.h>
#include <stdio.h>

#include "sandbox-config.h"

#define POOL_MAX_SIZE 1000
#define POOL_MAX_FILES 64

typedef struct PoolConfig {
        char *name;              /* NAME of pools.d/NAME.pool */
        uint64_t size;           /* sandboxes kept ready (0: none, the pool is kept but empty) */
        SandboxConfig *sandbox;  /* image, bundle, platform, limits, runtime, network; the rest unset */
        bool limits_set[3];      /* CPUs=, Memory=, Pids= given (else agentd.conf's defaults) */
        char *default_user;      /* DefaultUser=: the account E2B requests naming none are for, as
                                  * the sandbox's $AGENTIX_DEFAULT_USER (agentix-server(8)) */
} PoolConfig;

#define POOL_DEFAULT_USER_ENV "AGENTIX_DEFAULT_USER"

PoolConfig *pool_config_free(PoolConfig *p);
void pool_configs_free(PoolConfig **l, size_t n);

/* Parse one file; name is the pool's (the file name without .pool), path what errors call it.
 * On a bad file *ret_error says "PATH:LINE: what" and -EINVAL is returned. */
int pool_config_parse_file(FILE *f, const char *name, const char *path, PoolConfig **ret, char **ret_error);
/* Every dir/ *.pool in name order (a missing dir: none). */
int pool_configs_load_dir(const char *dir, PoolConfig ***ret, size_t *ret_n, char **ret_error);

/* What a pool's file says, as a pool file. */
void pool_config_format(const PoolConfig *p, FILE *out);

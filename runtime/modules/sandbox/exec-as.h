/* SPDX-License-Identifier: MIT */
#pragma once

/* Commands for another account than the worker's: the account as /etc/passwd and /etc/group of
 * the sandbox name it, and the helper program (agentix-exec-as, exec-as-main.c) that takes it
 * between posix_spawn() and the command. */

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#define EXEC_ACCOUNT_GROUPS_MAX 64
#define EXEC_AS_HELPER "agentix-exec-as"

typedef struct ExecAccount {
        uid_t uid;
        gid_t gid;
        gid_t groups[EXEC_ACCOUNT_GROUPS_MAX]; /* supplementary, the primary one included */
        size_t n_groups;
        char name[64];
        char home[256];
        char shell[256];
} ExecAccount;

/* An account by name, or by number when name is all digits (an id without a passwd entry gets
 * its own group, no others, and home /). -ENOENT when the name is unknown, -EINVAL when it is
 * empty or too long. */
int exec_account_lookup(const char *name, ExecAccount *ret);

/* Is it the account this process runs as (uid and gid)? Then the command needs no helper. */
bool exec_account_is_own(const ExecAccount *a);

/* The helper's path: $AGENTIX_EXEC_AS, else agentix-exec-as beside this process's own program,
 * else in AGENTIX_LIBEXECDIR. NULL when none is executable. Looked up once. */
const char *exec_as_helper(void);

/* argv for running path with argv as the account: {helper, UID, GID, GROUPS, path, argv...};
 * the numbers are written into buf (at least EXEC_AS_ARGS_SIZE bytes). The result is
 * malloc()ed (the strings are borrowed); free() it. NULL: out of memory. */
#define EXEC_AS_ARGS_SIZE (3 * 16 + EXEC_ACCOUNT_GROUPS_MAX * 11 + 8)
char **exec_as_argv(const char *helper, const ExecAccount *a, const char *path, char *const *argv, char *buf);

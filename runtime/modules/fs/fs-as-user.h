/* SPDX-License-Identifier: MIT */
#pragma once

/* File operations made for an account (E2B's envd writes, reads, moves and removes "as user
 * X") run with that account's credentials, on the thread that runs them, for their whole
 * duration: every path the kernel resolves meanwhile, every open, rename and unlink, is checked
 * as that account, so a symbolic link the account planted (or swaps in while the call runs)
 * reaches nothing the account could not reach itself. The worker's own root credentials would
 * follow it anywhere. */

#include <stdbool.h>
#include <sys/types.h>

#define FS_AS_USER_GROUPS_MAX 256

typedef struct FsAsUser {
        bool switched;          /* this thread runs as the account: fs_as_user_end() takes it back */
        uid_t own_uid;
        gid_t own_gid;
        gid_t own_groups[FS_AS_USER_GROUPS_MAX];
        int n_own_groups;
} FsAsUser;

#define FS_AS_USER_NULL ((FsAsUser) { .switched = false })

/* This thread takes uid's supplementary groups (as the account database names them; an id
 * without an entry gets gid alone), gid as its effective group and uid as its effective user
 * (raw system calls: glibc's wrappers would change every thread of the worker). uid (gid)
 * (uid_t) -1: the worker's own. Nothing changes when both are the worker's own. Returns 0, or a
 * negative errno when the worker may not become the account (-EPERM: it is not root); then
 * this thread's credentials are its own. */
int fs_as_user_begin(uid_t uid, gid_t gid, FsAsUser *ret);

/* This thread's credentials are the worker's own again. A failure to take them back aborts the
 * worker (it is respawned): it must never run another call as the account. */
void fs_as_user_end(FsAsUser *s);

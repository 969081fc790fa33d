/* SPDX-License-Identifier: MIT */
#pragma once

/* Paths as the fs module accepts them: absolute, non-empty, NUL-free, shorter than
 * PATH_MAX; plus the few path manipulations the operations share. */

#include <stddef.h>
#include <sys/types.h>

#include "fs-error.h"

/* Check a caller-supplied path of `len` bytes (it may contain NUL bytes, which makes it
 * invalid). Returns 1 when it is usable, 0 when it is not (status set to invalid_path),
 * or -ENOMEM. */
int fs_path_check(const char *path, size_t len, FsStatus *status);

/* "/a/b" + "c" → "/a/b/c"; "/" + "c" → "/c"; a trailing '/' on dir is not doubled. NULL on OOM. */
char *fs_path_join(const char *dir, const char *name);

/* Split an absolute path at its last '/': "/a/b" → "/a", "b"; "/b" → "/", "b";
 * "/a/" → "/a", "" (an empty base: the path names a directory). */
int fs_path_split(const char *path, char **ret_dir, char **ret_base);

/* Follow symbolic links in the last component of `path` (up to 40), so that a write
 * replaces the file a link points to rather than the link. The result may not exist
 * (a dangling link resolves to where its target would be). */
int fs_path_resolve_last_symlink(const char *path, char **ret);

/* The account that new files and directories are given: E2B's envd writes for the account a
 * request names, and what it makes is that account's. Set by fs.c around one operation on the
 * thread that runs it (calls run on a thread pool: a global would leak into other calls);
 * FS_OWNER_NONE, the default, leaves them the worker's. Files that are replaced keep their
 * owner either way. */
typedef struct FsOwner {
        uid_t uid;
        gid_t gid;
} FsOwner;
#define FS_OWNER_NONE ((FsOwner) { (uid_t) -1, (gid_t) -1 })
extern _Thread_local FsOwner fs_new_owner;

/* Give fd, a file this operation just made, to fs_new_owner (when set). 0 or negative errno. */
int fs_own_new_fd(int fd);

/* mkdir -p: create `dir` and its missing parents (mode 0777 minus umask), each one made owned
 * by fs_new_owner when set. -ENOTDIR when a component exists and is not a directory. */
int fs_mkdir_parents(const char *dir);

/* True if `path` equals `root` or lies below it (both absolute, no trailing slash needed). */
int fs_path_is_below(const char *path, const char *root);

/* Open a caller-supplied regular file for reading (O_NONBLOCK, so a FIFO cannot hang the
 * call). Returns 0 with the status set: FS_OK and *ret_fd and *ret_st filled, or
 * file_not_found, permission_denied, is_directory, not_a_file, …; or -ENOMEM. */
struct stat;
int fs_open_regular(const char *path, int *ret_fd, struct stat *ret_st, FsStatus *status);

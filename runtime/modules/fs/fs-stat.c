/* SPDX-License-Identifier: MIT */
/* fs.stat, fs.move, fs.remove: what a file manager (and E2B's envd Filesystem service) asks of
 * single paths, every failure a status. */
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fs-ops.h"
#include "fs-path.h"

void fs_stat_result_done(FsStatResult *r) {
        if (!r)
                return;
        fs_status_done(&r->status);
        free(r->symlink_target);
        *r = (FsStatResult) {};
}

int fs_stat(const char *path, FsStatResult *ret) {
        FsStatResult res = {};
        struct stat st;
        int r;

        r = fs_path_check(path, strlen(path), &res.status);
        if (r < 0)
                return r;
        if (r > 0 && lstat(path, &st) < 0)
                r = fs_status_from_errno(&res.status, -errno, path, FS_SUBJECT_FILE);
        else if (r > 0) {
                res.type = S_ISREG(st.st_mode)   ? FS_TYPE_FILE
                         : S_ISDIR(st.st_mode)   ? FS_TYPE_DIRECTORY
                         : S_ISLNK(st.st_mode)   ? FS_TYPE_SYMLINK
                                                 : FS_TYPE_OTHER;
                res.mode = st.st_mode & 07777;
                res.uid = st.st_uid;
                res.gid = st.st_gid;
                res.size = (uint64_t) st.st_size;
                res.mtime = st.st_mtim;
                if (S_ISLNK(st.st_mode)) {
                        size_t size = (size_t) st.st_size + 1;
                        ssize_t n;

                        res.symlink_target = malloc(size ?: 1);
                        if (!res.symlink_target) {
                                fs_stat_result_done(&res);
                                return -ENOMEM;
                        }
                        n = readlink(path, res.symlink_target, size);
                        if (n < 0 || (size_t) n >= size)
                                n = 0; /* changed under us: say nothing rather than half */
                        res.symlink_target[n] = 0;
                }
                r = 0;
        }
        if (r < 0) {
                fs_stat_result_done(&res);
                return r;
        }
        *ret = res;
        return 0;
}

int fs_move(const char *source, const char *destination, FsStatus *ret) {
        _cleanup_(fs_status_done) FsStatus status = FS_STATUS_NULL;
        _cleanup_free_ char *dir = NULL, *base = NULL;
        struct stat st;
        int r;

        r = fs_path_check(source, strlen(source), &status);
        if (r > 0)
                r = fs_path_check(destination, strlen(destination), &status);
        if (r > 0 && lstat(source, &st) < 0)
                r = fs_status_from_errno(&status, -errno, source, FS_SUBJECT_FILE);
        else if (r > 0) {
                /* The destination's directory is made as a write makes it. */
                r = fs_path_split(destination, &dir, &base);
                if (r >= 0 && fs_mkdir_parents(dir) == -ENOTDIR)
                        r = fs_status_set(&status, FS_ERROR_NOT_A_DIRECTORY,
                                          "Error: Cannot move to '%s': a parent is not a directory", destination);
                else if (r >= 0 && rename(source, destination) < 0) {
                        if (errno == EXDEV)
                                r = fs_status_set(&status, FS_ERROR_IO,
                                                  "Error: Cannot move '%s' to '%s': they are on different filesystems",
                                                  source, destination);
                        else if (errno == ENOTEMPTY || errno == EEXIST)
                                r = fs_status_set(&status, FS_ERROR_ALREADY_EXISTS,
                                                  "Error: Cannot move to '%s': a directory that is not empty is there",
                                                  destination);
                        else if (errno == EINVAL)
                                r = fs_status_set(&status, FS_ERROR_INVALID_PATH,
                                                  "Error: Cannot move '%s' into itself", source);
                        else
                                r = fs_status_from_errno(&status, -errno, destination, FS_SUBJECT_FILE);
                } else if (r >= 0)
                        r = 0;
        }
        if (r < 0)
                return r;
        *ret = status;
        status = FS_STATUS_NULL;
        return 0;
}

/* nftw() takes no userdata: the first failure of this thread's walk. */
static _Thread_local int remove_errno;
static _Thread_local char *remove_failed_path;

static int remove_one(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
        if ((flag == FTW_DP ? rmdir(path) : unlink(path)) == 0 || errno == ENOENT)
                return 0;
        remove_errno = -errno;
        remove_failed_path = strdup(path);
        return 1; /* stop */
}

/* "/", "//", "/tmp/..": a directory that is the root however it is written. */
static bool is_root(const char *path) {
        _cleanup_free_ char *canon = realpath(path, NULL);

        return canon && streq(canon, "/");
}

int fs_remove(const char *path, FsStatus *ret) {
        _cleanup_(fs_status_done) FsStatus status = FS_STATUS_NULL;
        struct stat st;
        int r;

        r = fs_path_check(path, strlen(path), &status);
        if (r > 0 && lstat(path, &st) < 0)
                r = fs_status_from_errno(&status, -errno, path, FS_SUBJECT_FILE);
        else if (r > 0 && S_ISDIR(st.st_mode) && is_root(path))
                r = fs_status_set(&status, FS_ERROR_INVALID_PATH, "Error: Will not remove '/' ('%s')", path);
        else if (r > 0) {
                remove_errno = 0;
                remove_failed_path = NULL;
                /* Depth first, links not followed, staying on this filesystem. */
                if (nftw(path, remove_one, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT) < 0 && remove_errno == 0)
                        remove_errno = -errno;
                r = remove_errno == 0 ? 0
                  : fs_status_from_errno(&status, remove_errno, remove_failed_path ?: path, FS_SUBJECT_FILE);
                free(remove_failed_path);
                remove_failed_path = NULL;
        }
        if (r < 0)
                return r;
        *ret = status;
        status = FS_STATUS_NULL;
        return 0;
}

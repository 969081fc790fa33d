/* SPDX-License-Identifier: MIT */
/* fs.mkdir: mkdir -p, one path at a time, every failure a status. */
#include <sys/stat.h>

#include "fs-ops.h"
#include "fs-path.h"

static int mkdir_impl(const char *path, FsStatus *status) {
        struct stat st;
        int r;

        r = fs_path_check(path, strlen(path), status);
        if (r <= 0)
                return r;

        r = fs_mkdir_parents(path);
        if (r == -ENOMEM)
                return r;
        if (r == -ENOTDIR) {
                /* Say which: the path itself, or something on the way to it. */
                if (stat(path, &st) >= 0 && !S_ISDIR(st.st_mode))
                        return fs_status_set(status, FS_ERROR_NOT_A_DIRECTORY,
                                             "Error: '%s' exists and is not a directory", path);
                return fs_status_set(status, FS_ERROR_NOT_A_DIRECTORY,
                                     "Error: Cannot create '%s': a parent is not a directory", path);
        }
        if (r < 0)
                return fs_status_from_errno(status, r, path, FS_SUBJECT_DIRECTORY);
        return 0;
}

int fs_mkdir(const char *path, FsStatus *ret) {
        _cleanup_(fs_status_done) FsStatus status = FS_STATUS_NULL;
        int r;

        r = mkdir_impl(path, &status);
        if (r < 0)
                return r;
        *ret = status;
        status = FS_STATUS_NULL;
        return 0;
}

/* SPDX-License-Identifier: MIT */
/* fs.download and fs.read_stream: opening files to stream. */
#include <sys/stat.h>

#include "fs-ops.h"
#include "fs-path.h"
#include "macro.h"

int fs_download_open(const char *path, int *ret_fd, uint64_t *ret_size, unsigned *ret_mode, FsStatus *ret) {
        _cleanup_(fs_status_done) FsStatus status = FS_STATUS_NULL;
        _cleanup_close_ int fd = -EBADF;
        struct stat st;
        int r;

        r = fs_open_regular(path, &fd, &st, &status);
        if (r < 0)
                return r;
        if (fs_status_ok(&status)) {
                *ret_fd = TAKE_FD(fd);
                *ret_size = (uint64_t) st.st_size;
                if (ret_mode)
                        *ret_mode = st.st_mode & 07777;
        }
        *ret = status;
        status = FS_STATUS_NULL;
        return 0;
}

/* SPDX-License-Identifier: MIT */
/* fs.download: opening files to stream, and copying exactly the announced length. */
#include <sys/stat.h>

#include "fs-ops.h"
#include "fs-path.h"
#include "macro.h"

int fs_download_open(const char *path, int *ret_fd, uint64_t *ret_size, FsStatus *ret) {
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
        }
        *ret = status;
        status = FS_STATUS_NULL;
        return 0;
}

int fs_copy_exact(int fd, uint64_t size, FsSink sink, void *userdata) {
        uint8_t buf[64 * 1024];
        uint64_t done = 0;
        int r, result = 0;

        while (done < size) {
                size_t want = (size_t) MIN((uint64_t) sizeof(buf), size - done);
                ssize_t k = read(fd, buf, want);

                if (k < 0 && errno == EINTR)
                        continue;
                if (k <= 0) {
                        /* Shrunk or unreadable: keep the promised length, report the damage. */
                        result = k < 0 ? negative_errno() : -EIO;
                        memset(buf, 0, sizeof(buf));
                        while (done < size) {
                                size_t n = (size_t) MIN((uint64_t) sizeof(buf), size - done);
                                r = sink(buf, n, userdata);
                                if (r < 0)
                                        return r;
                                done += n;
                        }
                        break;
                }
                r = sink(buf, (size_t) k, userdata);
                if (r < 0)
                        return r;
                done += (size_t) k;
        }
        return result;
}

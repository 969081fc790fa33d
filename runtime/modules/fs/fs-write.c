/* SPDX-License-Identifier: MIT */
/* fs.write and fs.upload: atomic replacement of a file (temp file in the same directory,
 * fsync, rename), keeping the mode and owner of the file being replaced. */
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <sys/random.h>
#include <sys/stat.h>

#include "fs-ops.h"
#include "fs-path.h"
#include "macro.h"

#define IN_SET(x, a, b, c) ((x) == (a) || (x) == (b) || (x) == (c))

#ifndef RENAME_NOREPLACE
#define RENAME_NOREPLACE (1 << 0)
#endif

/* A temporary file that is unlinked unless it was renamed into place. */
typedef struct TempFile {
        int dir_fd;     /* not owned */
        char *name;
        int fd;
} TempFile;

static void temp_file_done(TempFile *t) {
        t->fd = safe_close(t->fd);
        if (t->name) {
                (void) unlinkat(t->dir_fd, t->name, 0);
                free(t->name);
                t->name = NULL;
        }
}

/* ".#<base>.<random>" next to the target, like systemd's tempfn_random(); the base is
 * shortened so the name stays within NAME_MAX. */
static int temp_file_create(int dir_fd, const char *base, mode_t mode, TempFile *ret) {
        for (unsigned attempt = 0; attempt < 16; attempt++) {
                uint64_t rnd;
                char *name;
                int fd;

                if (getrandom(&rnd, sizeof(rnd), GRND_NONBLOCK) != sizeof(rnd))
                        rnd = (uint64_t) now_usec() ^ ((uint64_t) getpid() << 32) ^ attempt;
                if (asprintf(&name, ".#%.200s.%016" PRIx64, base, rnd) < 0)
                        return -ENOMEM;
                fd = openat(dir_fd, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY, mode);
                if (fd >= 0) {
                        *ret = (TempFile) { .dir_fd = dir_fd, .name = name, .fd = fd };
                        return 0;
                }
                int r = negative_errno();
                free(name);
                if (r != -EEXIST)
                        return r;
        }
        return -EEXIST;
}

static int rename_noreplace(int dir_fd, const char *from, const char *to) {
        if (renameat2(dir_fd, from, dir_fd, to, RENAME_NOREPLACE) >= 0)
                return 0;
        if (!IN_SET(errno, EINVAL, ENOSYS, ENOTSUP))
                return negative_errno();

        /* File systems without RENAME_NOREPLACE: link() fails on an existing name too. */
        if (linkat(dir_fd, from, dir_fd, to, 0) < 0)
                return negative_errno();
        (void) unlinkat(dir_fd, from, 0);
        return 0;
}

/* Rewrite a file in place: for targets that cannot be renamed over (bind-mounted files
 * such as a container's /etc/hosts fail with EBUSY). Not atomic, but the only way. */
static int write_in_place(int dir_fd, const char *base, FsContentWriter writer, void *userdata) {
        _cleanup_close_ int fd = -EBADF;
        int r;

        fd = openat(dir_fd, base, O_WRONLY | O_TRUNC | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY);
        if (fd < 0)
                return negative_errno();
        r = writer(fd, userdata);
        if (r < 0)
                return r;
        if (fsync(fd) < 0)
                return negative_errno();
        return 0;
}

/* For a write, a path through a regular file is a parent that is not a directory. */
static int write_error(FsStatus *status, int r, const char *path) {
        if (r == -ENOTDIR)
                return fs_status_set(status, FS_ERROR_NOT_A_DIRECTORY,
                                     "Error: Cannot create '%s': a parent is not a directory", path);
        return fs_status_from_errno(status, r, path, FS_SUBJECT_FILE);
}

static int write_atomic_impl(const char *path, bool overwrite, FsContentWriter writer, void *userdata,
                             FsStatus *status) {
        _cleanup_free_ char *target = NULL, *dir = NULL, *base = NULL;
        _cleanup_close_ int dir_fd = -EBADF; /* declared first: closed after tmp is removed */
        _cleanup_(temp_file_done) TempFile tmp = { .fd = -EBADF };
        bool exists = false;
        struct stat st;
        int r;

        r = fs_path_check(path, strlen(path), status);
        if (r <= 0)
                return r;

        r = fs_path_resolve_last_symlink(path, &target);
        if (r == -ENOMEM)
                return r;
        if (r < 0)
                return write_error(status, r, path);

        r = fs_path_split(target, &dir, &base);
        if (r < 0)
                return r;
        if (strempty(base) || streq(base, ".") || streq(base, ".."))
                return fs_status_set(status, FS_ERROR_IS_DIRECTORY, "Error: '%s' is a directory", path);

        dir_fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dir_fd < 0 && errno == ENOENT) {
                r = fs_mkdir_parents(dir);
                if (r == -ENOMEM)
                        return r;
                if (r < 0)
                        return write_error(status, r, path);
                dir_fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        }
        if (dir_fd < 0)
                return write_error(status, -errno, path);

        if (fstatat(dir_fd, base, &st, AT_SYMLINK_NOFOLLOW) >= 0) {
                if (S_ISDIR(st.st_mode))
                        return fs_status_set(status, FS_ERROR_IS_DIRECTORY, "Error: '%s' is a directory", path);
                if (!S_ISREG(st.st_mode))
                        return fs_status_set(status, FS_ERROR_NOT_A_FILE, "Error: '%s' is not a regular file", path);
                if (!overwrite)
                        return fs_status_set(status, FS_ERROR_ALREADY_EXISTS, "Error: File '%s' already exists", path);
                exists = true;
        } else if (errno != ENOENT)
                return write_error(status, -errno, path);

        /* A replacement stays private while it is incomplete and gets the old file's mode
         * at the end; a new file gets 0666 minus the umask, as open() would give it. */
        r = temp_file_create(dir_fd, base, exists ? 0600 : 0666, &tmp);
        if (r == -ENOMEM)
                return r;
        if (r < 0)
                return write_error(status, r, path);

        r = writer(tmp.fd, userdata);
        if (r == -ENOMEM)
                return r;
        if (r < 0)
                return write_error(status, r, path);

        if (exists) {
                /* Owner first: chown() clears set-id bits, the chmod puts back the exact mode.
                 * An unprivileged writer cannot give files away; the file then becomes its
                 * own, as with any editor. */
                if (st.st_uid != geteuid() || st.st_gid != getegid())
                        (void) fchown(tmp.fd, st.st_uid, st.st_gid);
                if (fchmod(tmp.fd, st.st_mode & 07777) < 0)
                        return write_error(status, -errno, path);
        }
        if (fsync(tmp.fd) < 0)
                return write_error(status, -errno, path);
        r = close(tmp.fd);
        tmp.fd = -EBADF;
        if (r < 0 && errno != EINTR)
                return write_error(status, -errno, path);

        if (overwrite)
                r = renameat(dir_fd, tmp.name, dir_fd, base) < 0 ? negative_errno() : 0;
        else
                r = rename_noreplace(dir_fd, tmp.name, base);
        if (r == -EEXIST)
                return fs_status_set(status, FS_ERROR_ALREADY_EXISTS, "Error: File '%s' already exists", path);
        if (r == -EBUSY && exists) {
                /* The temporary file stays behind for the cleanup to remove. */
                r = write_in_place(dir_fd, base, writer, userdata);
                if (r == -ENOMEM)
                        return r;
        } else if (r == 0) {
                /* Renamed into place: nothing left to clean up. */
                free(tmp.name);
                tmp.name = NULL;
        }
        if (r < 0)
                return write_error(status, r, path);

        /* Make the rename itself durable. */
        (void) fsync(dir_fd);
        return 0;
}

int fs_write_atomic(const char *path, bool overwrite, FsContentWriter writer, void *userdata, FsStatus *ret) {
        _cleanup_(fs_status_done) FsStatus status = FS_STATUS_NULL;
        int r;

        r = write_atomic_impl(path, overwrite, writer, userdata, &status);
        if (r < 0)
                return r;
        *ret = status;
        status = FS_STATUS_NULL;
        return 0;
}

typedef struct MemoryContent {
        const void *data;
        size_t size;
} MemoryContent;

static int write_memory(int fd, void *userdata) {
        const MemoryContent *c = userdata;

        return loop_write(fd, c->data, c->size);
}

int fs_write(const char *path, const void *data, size_t size, bool overwrite, FsStatus *ret) {
        MemoryContent c = { .data = data, .size = size };

        return fs_write_atomic(path, overwrite, write_memory, &c, ret);
}

/* SPDX-License-Identifier: MIT */
/* fs.write, fs.upload and fs.write_stream: atomic replacement of a file (temp file in the same
 * directory, fsync, rename), keeping the owner of the file being replaced and its mode (unless
 * the caller gives one). */
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
                fd = openat(dir_fd, name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY, mode);
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

/* Rewrite a file in place from the finished temporary file: for targets that cannot be renamed
 * over (bind-mounted files such as a container's /etc/hosts fail with EBUSY). Not atomic, but
 * the only way. */
static int copy_in_place(int dir_fd, const char *base, int src_fd) {
        _cleanup_close_ int fd = -EBADF;
        uint8_t buf[64 * 1024];
        off_t off = 0;
        int r;

        fd = openat(dir_fd, base, O_WRONLY | O_TRUNC | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY);
        if (fd < 0)
                return negative_errno();
        for (;;) {
                ssize_t n = pread(src_fd, buf, sizeof(buf), off);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return negative_errno();
                if (n == 0)
                        break;
                r = loop_write(fd, buf, (size_t) n);
                if (r < 0)
                        return r;
                off += n;
        }
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

struct FsAtomicFile {
        char *path;             /* as the caller gave it, for messages */
        char *base;             /* the target's name in dir_fd */
        int dir_fd;             /* declared before tmp: closed after it is removed */
        TempFile tmp;
        bool overwrite;
        bool exists;            /* a file is being replaced: st describes it */
        struct stat st;
        int mode;               /* FS_MODE_DEFAULT or permission bits */
};

FsAtomicFile *fs_atomic_file_free(FsAtomicFile *f) {
        if (!f)
                return NULL;
        temp_file_done(&f->tmp);
        safe_close(f->dir_fd);
        free(f->path);
        free(f->base);
        free(f);
        return NULL;
}

int fs_atomic_file_fd(FsAtomicFile *f) {
        return f->tmp.fd;
}

static int atomic_file_open_impl(FsAtomicFile *f, const char *path, FsStatus *status) {
        _cleanup_free_ char *target = NULL, *dir = NULL;
        int r;

        r = fs_path_check(path, strlen(path), status);
        if (r <= 0)
                return r;

        r = fs_path_resolve_last_symlink(path, &target);
        if (r == -ENOMEM)
                return r;
        if (r < 0)
                return write_error(status, r, path);

        r = fs_path_split(target, &dir, &f->base);
        if (r < 0)
                return r;
        if (strempty(f->base) || streq(f->base, ".") || streq(f->base, ".."))
                return fs_status_set(status, FS_ERROR_IS_DIRECTORY, "Error: '%s' is a directory", path);

        f->dir_fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (f->dir_fd < 0 && errno == ENOENT) {
                r = fs_mkdir_parents(dir);
                if (r == -ENOMEM)
                        return r;
                if (r < 0)
                        return write_error(status, r, path);
                f->dir_fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        }
        if (f->dir_fd < 0)
                return write_error(status, -errno, path);

        if (fstatat(f->dir_fd, f->base, &f->st, AT_SYMLINK_NOFOLLOW) >= 0) {
                if (S_ISDIR(f->st.st_mode))
                        return fs_status_set(status, FS_ERROR_IS_DIRECTORY, "Error: '%s' is a directory", path);
                if (!S_ISREG(f->st.st_mode))
                        return fs_status_set(status, FS_ERROR_NOT_A_FILE, "Error: '%s' is not a regular file", path);
                if (!f->overwrite)
                        return fs_status_set(status, FS_ERROR_ALREADY_EXISTS, "Error: File '%s' already exists", path);
                f->exists = true;
        } else if (errno != ENOENT)
                return write_error(status, -errno, path);

        /* A replacement, and any file with a mode of its own, stays private while it is
         * incomplete and gets its mode at the end; a new file gets 0666 minus the umask, as
         * open() would give it. */
        r = temp_file_create(f->dir_fd, f->base, f->exists || f->mode != FS_MODE_DEFAULT ? 0600 : 0666, &f->tmp);
        if (r == -ENOMEM)
                return r;
        if (r < 0)
                return write_error(status, r, path);
        return 0;
}

int fs_atomic_file_open(const char *path, bool overwrite, int mode, FsAtomicFile **ret, FsStatus *ret_status) {
        _cleanup_(fs_status_done) FsStatus status = FS_STATUS_NULL;
        _cleanup_(fs_atomic_file_freep) FsAtomicFile *f = NULL;
        int r;

        f = calloc(1, sizeof(FsAtomicFile));
        if (!f)
                return -ENOMEM;
        f->dir_fd = -EBADF;
        f->tmp.fd = -EBADF;
        f->overwrite = overwrite;
        f->mode = mode < 0 ? FS_MODE_DEFAULT : mode & FS_MODE_MASK;
        f->path = strdup(path);
        if (!f->path)
                return -ENOMEM;

        r = atomic_file_open_impl(f, path, &status);
        if (r < 0)
                return r;
        if (fs_status_ok(&status))
                *ret = TAKE_PTR(f);
        *ret_status = status;
        status = FS_STATUS_NULL;
        return 0;
}

static int atomic_file_commit_impl(FsAtomicFile *f, FsStatus *status) {
        const char *path = f->path;
        int r;

        if (f->exists) {
                /* Owner first: chown() clears set-id bits, the chmod puts back the exact mode.
                 * An unprivileged writer cannot give files away; the file then becomes its
                 * own, as with any editor. */
                if (f->st.st_uid != geteuid() || f->st.st_gid != getegid())
                        (void) fchown(f->tmp.fd, f->st.st_uid, f->st.st_gid);
        } else {
                r = fs_own_new_fd(f->tmp.fd);
                if (r < 0)
                        return write_error(status, r, path);
        }
        if (f->mode != FS_MODE_DEFAULT || f->exists)
                if (fchmod(f->tmp.fd, f->mode != FS_MODE_DEFAULT ? (mode_t) f->mode : f->st.st_mode & 07777) < 0)
                        return write_error(status, -errno, path);
        if (fsync(f->tmp.fd) < 0)
                return write_error(status, -errno, path);

        if (f->overwrite)
                r = renameat(f->dir_fd, f->tmp.name, f->dir_fd, f->base) < 0 ? negative_errno() : 0;
        else
                r = rename_noreplace(f->dir_fd, f->tmp.name, f->base);
        if (r == -EEXIST)
                return fs_status_set(status, FS_ERROR_ALREADY_EXISTS, "Error: File '%s' already exists", path);
        if (r == -EBUSY && f->exists) {
                /* The temporary file stays behind for the cleanup to remove. */
                r = copy_in_place(f->dir_fd, f->base, f->tmp.fd);
                if (r >= 0 && f->mode != FS_MODE_DEFAULT)
                        (void) fchmodat(f->dir_fd, f->base, (mode_t) f->mode, 0);
        } else if (r == 0) {
                /* Renamed into place: nothing left to clean up. */
                free(f->tmp.name);
                f->tmp.name = NULL;
        }
        if (r == -ENOMEM)
                return r;
        if (r < 0)
                return write_error(status, r, path);

        r = close(f->tmp.fd);
        f->tmp.fd = -EBADF;
        if (r < 0 && errno != EINTR)
                return write_error(status, -errno, path);

        /* Make the rename itself durable. */
        (void) fsync(f->dir_fd);
        return 0;
}

int fs_atomic_file_commit(FsAtomicFile *f, FsStatus *ret_status) {
        _cleanup_(fs_status_done) FsStatus status = FS_STATUS_NULL;
        int r;

        r = atomic_file_commit_impl(f, &status);
        if (r < 0)
                return r;
        *ret_status = status;
        status = FS_STATUS_NULL;
        return 0;
}

int fs_write_atomic_mode(const char *path, bool overwrite, int mode, FsContentWriter writer, void *userdata,
                         FsStatus *ret) {
        _cleanup_(fs_atomic_file_freep) FsAtomicFile *f = NULL;
        int r;

        r = fs_atomic_file_open(path, overwrite, mode, &f, ret);
        if (r < 0 || !f)
                return r;

        r = writer(fs_atomic_file_fd(f), userdata);
        if (r == -ENOMEM)
                return r;
        if (r < 0)
                return write_error(ret, r, path);

        fs_status_done(ret);
        return fs_atomic_file_commit(f, ret);
}

int fs_write_atomic(const char *path, bool overwrite, FsContentWriter writer, void *userdata, FsStatus *ret) {
        return fs_write_atomic_mode(path, overwrite, FS_MODE_DEFAULT, writer, userdata, ret);
}

typedef struct MemoryContent {
        const void *data;
        size_t size;
} MemoryContent;

static int write_memory(int fd, void *userdata) {
        const MemoryContent *c = userdata;

        return loop_write(fd, c->data, c->size);
}

int fs_write_mode(const char *path, const void *data, size_t size, bool overwrite, int mode, FsStatus *ret) {
        MemoryContent c = { .data = data, .size = size };

        return fs_write_atomic_mode(path, overwrite, mode, write_memory, &c, ret);
}

int fs_write(const char *path, const void *data, size_t size, bool overwrite, FsStatus *ret) {
        return fs_write_mode(path, data, size, overwrite, FS_MODE_DEFAULT, ret);
}

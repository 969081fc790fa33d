/* SPDX-License-Identifier: MIT */
#include <limits.h>
#include <fcntl.h>
#include <sys/stat.h>

#include "fs-path.h"
#include "macro.h"

int fs_path_check(const char *path, size_t len, FsStatus *status) {
        int r;

        if (!path || len == 0)
                r = fs_status_set(status, FS_ERROR_INVALID_PATH, "Error: Path is empty");
        else if (memchr(path, 0, len))
                r = fs_status_set(status, FS_ERROR_INVALID_PATH, "Error: Path contains a NUL byte");
        else if (len >= PATH_MAX)
                r = fs_status_set(status, FS_ERROR_INVALID_PATH, "Error: Path is longer than %d bytes", PATH_MAX - 1);
        else if (path[0] != '/')
                r = fs_status_set(status, FS_ERROR_INVALID_PATH, "Error: Path must be absolute: '%.*s'",
                                  (int) len, path);
        else
                return 1;

        return r < 0 ? r : 0;
}

char *fs_path_join(const char *dir, const char *name) {
        size_t n = strlen(dir);
        char *p;

        if (n > 0 && dir[n - 1] == '/')
                return asprintf(&p, "%s%s", dir, name) < 0 ? NULL : p;
        return asprintf(&p, "%s/%s", dir, name) < 0 ? NULL : p;
}

int fs_path_split(const char *path, char **ret_dir, char **ret_base) {
        const char *slash = strrchr(path, '/');
        _cleanup_free_ char *dir = NULL, *base = NULL;

        if (!slash)
                return -EINVAL;

        /* Drop repeated slashes before the base ("/a//b" → "/a"), keep "/" for the root. */
        const char *end = slash;
        while (end > path && end[-1] == '/')
                end--;
        dir = end == path ? strdup("/") : strndup(path, (size_t) (end - path));
        base = strdup(slash + 1);
        if (!dir || !base)
                return -ENOMEM;

        *ret_dir = TAKE_PTR(dir);
        *ret_base = TAKE_PTR(base);
        return 0;
}

int fs_path_resolve_last_symlink(const char *path, char **ret) {
        _cleanup_free_ char *cur = strdup(path);

        if (!cur)
                return -ENOMEM;

        for (unsigned hop = 0; hop < 40; hop++) {
                char target[PATH_MAX];
                struct stat st;
                ssize_t k;

                if (lstat(cur, &st) < 0) {
                        if (errno == ENOENT)
                                break; /* a new file, or a dangling link's target */
                        return negative_errno();
                }
                if (!S_ISLNK(st.st_mode))
                        break;

                k = readlink(cur, target, sizeof(target) - 1);
                if (k < 0)
                        return negative_errno();
                target[k] = 0;

                char *next;
                if (target[0] == '/')
                        next = strdup(target);
                else {
                        _cleanup_free_ char *dir = NULL, *base = NULL;
                        int r = fs_path_split(cur, &dir, &base);
                        if (r < 0)
                                return r;
                        next = fs_path_join(dir, target);
                }
                if (!next)
                        return -ENOMEM;
                free(cur);
                cur = next;
                if (strlen(cur) >= PATH_MAX)
                        return -ENAMETOOLONG;
                if (hop == 39)
                        return -ELOOP;
        }

        *ret = TAKE_PTR(cur);
        return 0;
}

_Thread_local FsOwner fs_new_owner = FS_OWNER_NONE;

int fs_own_new_fd(int fd) {
        if (fs_new_owner.uid == (uid_t) -1 && fs_new_owner.gid == (gid_t) -1)
                return 0;
        return fchown(fd, fs_new_owner.uid, fs_new_owner.gid) < 0 ? negative_errno() : 0;
}

int fs_mkdir_parents(const char *dir) {
        _cleanup_free_ char *p = strdup(dir);
        struct stat st;

        if (!p)
                return -ENOMEM;

        /* Fast path: it is already there. */
        if (stat(p, &st) == 0)
                return S_ISDIR(st.st_mode) ? 0 : -ENOTDIR;

        for (char *s = p + 1;; s++) {
                bool last = *s == 0;

                if (*s != '/' && !last)
                        continue;
                *s = 0;
                if (s[-1] != '/' && mkdir(p, 0777) < 0) {
                        int r = negative_errno();
                        /* mkdir reports EEXIST before EACCES etc.; a missing parent we could not
                         * create surfaces as the error of the deepest component. */
                        if (r != -EEXIST)
                                return r;
                } else if (s[-1] != '/' && fs_new_owner.uid != (uid_t) -1 &&
                           lchown(p, fs_new_owner.uid, fs_new_owner.gid) < 0)
                        return negative_errno();
                if (s[-1] != '/') {
                        if (stat(p, &st) < 0)
                                return negative_errno();
                        if (!S_ISDIR(st.st_mode))
                                return -ENOTDIR;
                }
                if (last)
                        break;
                *s = '/';
        }
        return 0;
}

int fs_path_is_below(const char *path, const char *root) {
        size_t n = strlen(root);

        while (n > 1 && root[n - 1] == '/')
                n--;
        if (n == 1 && root[0] == '/')
                return path[0] == '/';
        return strneq(path, root, n) && (path[n] == 0 || path[n] == '/');
}

int fs_open_regular(const char *path, int *ret_fd, struct stat *ret_st, FsStatus *status) {
        _cleanup_close_ int fd = -EBADF;
        struct stat st;
        int r;

        r = fs_path_check(path, strlen(path), status);
        if (r <= 0)
                return r;

        fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
        if (fd < 0)
                return fs_status_from_errno(status, -errno, path, FS_SUBJECT_FILE);
        if (fstat(fd, &st) < 0)
                return fs_status_from_errno(status, -errno, path, FS_SUBJECT_FILE);
        if (S_ISDIR(st.st_mode))
                return fs_status_set(status, FS_ERROR_IS_DIRECTORY, "Error: '%s' is a directory", path);
        if (!S_ISREG(st.st_mode))
                return fs_status_set(status, FS_ERROR_NOT_A_FILE, "Error: '%s' is not a regular file", path);

        *ret_fd = TAKE_FD(fd);
        *ret_st = st;
        return 0;
}

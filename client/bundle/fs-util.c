/* SPDX-License-Identifier: MIT */
#define _XOPEN_SOURCE 700
#include <fcntl.h>
#include <stdint.h>
#include <ftw.h>
#include <limits.h>
#include <sys/sendfile.h>
#include <sys/stat.h>

#include "fs-util.h"
#include "macro.h"

int mkdir_parents(const char *path) {
        char buf[PATH_MAX];

        if (snprintf(buf, sizeof(buf), "%s", path) >= (int) sizeof(buf))
                return -ENAMETOOLONG;
        for (char *p = buf + 1; *p; p++) {
                if (*p != '/')
                        continue;
                *p = 0;
                if (mkdir(buf, 0755) < 0 && errno != EEXIST)
                        return negative_errno();
                *p = '/';
        }
        if (mkdir(buf, 0755) < 0 && errno != EEXIST)
                return negative_errno();
        return 0;
}

static int remove_one(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
        if (flag == FTW_DP)
                return rmdir(path) < 0 ? -1 : 0;
        return unlink(path) < 0 ? -1 : 0;
}

int remove_tree(const char *path) {
        struct stat st;

        if (lstat(path, &st) < 0)
                return errno == ENOENT ? 0 : negative_errno();
        if (!S_ISDIR(st.st_mode))
                return unlink(path) < 0 ? negative_errno() : 0;
        /* Directories of a store path may be read-only: make them writable on the way down. */
        if (nftw(path, remove_one, 64, FTW_DEPTH | FTW_PHYS) < 0)
                return negative_errno();
        return 0;
}

int copy_file(const char *from, const char *to, mode_t mode) {
        _cleanup_close_ int in = -EBADF, out = -EBADF;
        struct stat st;

        in = open(from, O_RDONLY | O_CLOEXEC);
        if (in < 0)
                return negative_errno();
        if (fstat(in, &st) < 0)
                return negative_errno();
        out = open(to, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
        if (out < 0)
                return negative_errno();
        for (off_t left = st.st_size; left > 0;) {
                ssize_t n = copy_file_range(in, NULL, out, NULL, left, 0);
                if (n < 0 && (errno == EXDEV || errno == ENOSYS || errno == EINVAL))
                        n = sendfile(out, in, NULL, left);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return negative_errno();
                }
                if (n == 0)
                        return -EIO; /* the file shrank under us */
                left -= n;
        }
        return 0;
}

/* Length of the next component at s, and where the one after it starts. */
static size_t component(const char *s, const char **next) {
        size_t n = strcspn(s, "/");

        *next = s + n + (s[n] == '/');
        return n;
}

int read_file_chunks(const char *path, int (*consume)(const void *buf, size_t n, void *userdata), void *userdata) {
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        _cleanup_free_ uint8_t *buf = malloc(256 * 1024);
        ssize_t n;

        if (fd < 0)
                return negative_errno();
        if (!buf)
                return -ENOMEM;
        while ((n = read(fd, buf, 256 * 1024)) != 0) {
                int r;

                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return negative_errno();
                }
                r = consume(buf, n, userdata);
                if (r < 0)
                        return r;
        }
        return 0;
}

char *relative_path(const char *from_dir, const char *to) {
        const char *a = from_dir, *b = to, *na, *nb;
        size_t ups = 0;
        char *out, *p;

        /* Skip the components both share. */
        for (;;) {
                size_t la = component(a, &na), lb = component(b, &nb);
                if (la == 0 || la != lb || !strneq(a, b, la))
                        break;
                a = na;
                b = nb;
        }
        while (component(a, &na) > 0) {
                ups++;
                a = na;
        }
        out = malloc(ups * 3 + strlen(b) + 2);
        if (!out)
                return NULL;
        p = out;
        for (size_t i = 0; i < ups; i++)
                p = stpcpy(p, "../");
        p = stpcpy(p, b);
        if (p == out)
                strcpy(out, ".");
        else if (p[-1] == '/' && *b == 0)
                p[-1] = 0;
        return out;
}

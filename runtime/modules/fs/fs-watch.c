/* SPDX-License-Identifier: MIT */
/* fs::watch: inotify on a path, and (recursive) on every directory below it, new ones as they
 * appear. Each inotify watch descriptor maps to the directory path it watches, so an event's
 * path is that directory and the event's name.
 *
 * What inotify cannot say is an error, never a silent gap: a full queue (IN_Q_OVERFLOW) and
 * the watch limit (ENOSPC, fs.inotify.max_user_watches) end the call with io_error. A
 * directory created or moved in is walked once it is watched, and what is already in it is
 * reported as created: files made between its creation and its watch are not missed. A
 * directory moved out loses its watches (their paths would be wrong). */
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fs-ops.h"
#include "fs-path.h"

#define WATCH_MASK \
        (IN_CREATE | IN_MODIFY | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_DELETE_SELF | IN_MOVE_SELF | IN_EXCL_UNLINK)

DEFINE_TRIVIAL_CLEANUP_FUNC(DIR *, closedir);

struct FsWatch {
        int fd;
        bool recursive;
        char *root;
        char **paths;           /* by watch descriptor: the directory (or file) it watches, or NULL */
        size_t n_paths;
        bool root_gone;
};

FsWatch *fs_watch_free(FsWatch *w) {
        if (!w)
                return NULL;
        safe_close(w->fd);
        for (size_t i = 0; i < w->n_paths; i++)
                free(w->paths[i]);
        free(w->paths);
        free(w->root);
        return mfree(w);
}

int fs_watch_fd(const FsWatch *w) {
        return w->fd;
}

static int set_path(FsWatch *w, int wd, const char *path) {
        char *copy;

        if (wd < 0)
                return -EINVAL;
        if ((size_t) wd >= w->n_paths) {
                size_t n = MAX((size_t) wd + 1, w->n_paths * 2);
                char **p = realloc(w->paths, n * sizeof(char *));
                if (!p)
                        return -ENOMEM;
                memset(p + w->n_paths, 0, (n - w->n_paths) * sizeof(char *));
                w->paths = p;
                w->n_paths = n;
        }
        copy = strdup(path);
        if (!copy)
                return -ENOMEM;
        free(w->paths[wd]);
        w->paths[wd] = copy;
        return 0;
}

static int limit_status(FsStatus *status, const char *path) {
        return fs_status_set(status, FS_ERROR_IO,
                             "Error: cannot watch '%s': the inotify watch limit is reached "
                             "(fs.inotify.max_user_watches); watch a smaller tree",
                             path);
}

/* Linux's inotify_add_watch() asks for read permission on what it watches; gVisor's (20221219)
 * does not, so a watch made as an account (fs-as-user.c) through a link it planted would show
 * the names in a directory it may not read. Opening it for reading first makes the kernel's own
 * check, as this thread's account, under every runtime. Directories and regular files only:
 * opening anything else may do something. */
static int add_watch(int inotify_fd, const char *path) {
        struct stat st;
        int fd;

        if (stat(path, &st) < 0)
                return -1;
        if (S_ISDIR(st.st_mode) || S_ISREG(st.st_mode)) {
                fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
                if (fd < 0)
                        return -1;
                close(fd);
        }
        return inotify_add_watch(inotify_fd, path, WATCH_MASK);
}

/* Watch one directory; 0, or a status for a limit, or < 0. A directory gone meanwhile is
 * skipped (1: not watched). */
static int watch_one(FsWatch *w, const char *path, FsStatus *status) {
        int wd = add_watch(w->fd, path);

        if (wd < 0) {
                if (errno == ENOSPC)
                        return limit_status(status, path);
                if (errno == ENOENT || errno == ENOTDIR || errno == EACCES)
                        return 1;
                return -errno;
        }
        return set_path(w, wd, path);
}

/* Watch dir and every directory below it; with emit, report what is in them as created. */
static int watch_tree(FsWatch *w, const char *dir, FsWatchEmit emit, void *userdata, FsStatus *status) {
        _cleanup_(closedirp) DIR *d = NULL;
        struct dirent *de;
        int r;

        r = watch_one(w, dir, status);
        if (r != 0 || !fs_status_ok(status))
                return r < 0 ? r : 0;
        d = opendir(dir);
        if (!d)
                return 0; /* gone, or not readable: nothing below to watch */
        while ((de = readdir(d))) {
                _cleanup_free_ char *p = NULL;

                if (streq(de->d_name, ".") || streq(de->d_name, ".."))
                        continue;
                p = fs_path_join(dir, de->d_name);
                if (!p)
                        return -ENOMEM;
                if (emit) {
                        r = emit(userdata, p, "created");
                        if (r < 0)
                                return r;
                }
                if (de->d_type == DT_DIR || de->d_type == DT_UNKNOWN) {
                        struct stat st;
                        if (de->d_type == DT_UNKNOWN && (lstat(p, &st) < 0 || !S_ISDIR(st.st_mode)))
                                continue;
                        r = watch_tree(w, p, emit, userdata, status);
                        if (r < 0 || !fs_status_ok(status))
                                return r;
                }
        }
        return 0;
}

int fs_watch_new(const char *path, bool recursive, FsWatch **ret, FsStatus *status) {
        _cleanup_(fs_watch_freep) FsWatch *w = calloc(1, sizeof(*w));
        struct stat st;
        int r;

        if (!w)
                return -ENOMEM;
        w->fd = -EBADF;
        if (stat(path, &st) < 0)
                return fs_status_from_errno(status, -errno, path, FS_SUBJECT_FILE);
        w->recursive = recursive && S_ISDIR(st.st_mode);
        w->root = strdup(path);
        if (!w->root)
                return -ENOMEM;
        w->fd = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
        if (w->fd < 0)
                return errno == EMFILE ? fs_status_set(status, FS_ERROR_IO,
                                                       "Error: cannot watch '%s': the inotify instance limit is "
                                                       "reached (fs.inotify.max_user_instances)", path)
                                       : -errno;
        if (w->recursive)
                r = watch_tree(w, path, NULL, NULL, status);
        else {
                int wd = add_watch(w->fd, path);
                if (wd < 0)
                        return errno == ENOSPC ? limit_status(status, path)
                                               : fs_status_from_errno(status, -errno, path, FS_SUBJECT_FILE);
                r = set_path(w, wd, path);
        }
        if (r < 0 || !fs_status_ok(status))
                return r;
        *ret = TAKE_PTR(w);
        return 0;
}

/* Stop watching every directory at or below prefix (moved out of sight). */
static void unwatch_below(FsWatch *w, const char *prefix) {
        size_t n = strlen(prefix);

        for (size_t i = 0; i < w->n_paths; i++) {
                const char *p = w->paths[i];
                if (p && strneq(p, prefix, n) && (p[n] == '/' || p[n] == 0)) {
                        (void) inotify_rm_watch(w->fd, (int) i);
                        w->paths[i] = mfree(w->paths[i]);
                }
        }
}

static int handle(FsWatch *w, const struct inotify_event *ev, FsWatchEmit emit, void *userdata, FsStatus *status) {
        const char *dir = (size_t) ev->wd < w->n_paths && ev->wd >= 0 ? w->paths[ev->wd] : NULL;
        _cleanup_free_ char *path = NULL;
        bool is_dir = ev->mask & IN_ISDIR;
        int r;

        if (ev->mask & IN_Q_OVERFLOW)
                return fs_status_set(status, FS_ERROR_IO,
                                     "Error: events were lost: the inotify queue overflowed "
                                     "(fs.inotify.max_queued_events); watch again");
        if (ev->mask & IN_IGNORED) {
                if (dir)
                        w->paths[ev->wd] = mfree(w->paths[ev->wd]);
                return 0;
        }
        if (!dir)
                return 0; /* a watch removed a moment ago */
        if (ev->mask & (IN_DELETE_SELF | IN_MOVE_SELF)) {
                /* The root itself went: say so, and the stream ends. Below it, the parent's
                 * event said it already. */
                if (streq(dir, w->root)) {
                        w->root_gone = true;
                        return emit(userdata, dir, ev->mask & IN_DELETE_SELF ? "deleted" : "moved_from");
                }
                return 0;
        }
        path = ev->len > 0 ? fs_path_join(dir, ev->name) : strdup(dir);
        if (!path)
                return -ENOMEM;
        if (ev->mask & IN_CREATE) {
                r = emit(userdata, path, "created");
                if (r >= 0 && is_dir && w->recursive)
                        r = watch_tree(w, path, emit, userdata, status);
                return r;
        }
        if (ev->mask & IN_MODIFY)
                return emit(userdata, path, "modified");
        if (ev->mask & IN_DELETE)
                return emit(userdata, path, "deleted");
        if (ev->mask & IN_MOVED_FROM) {
                if (is_dir && w->recursive)
                        unwatch_below(w, path);
                return emit(userdata, path, "moved_from");
        }
        if (ev->mask & IN_MOVED_TO) {
                r = emit(userdata, path, "moved_to");
                if (r >= 0 && is_dir && w->recursive)
                        r = watch_tree(w, path, emit, userdata, status);
                return r;
        }
        return 0;
}

int fs_watch_read(FsWatch *w, FsWatchEmit emit, void *userdata, FsStatus *status) {
        char buf[64 * 1024] __attribute__((aligned(__alignof__(struct inotify_event))));

        for (;;) {
                ssize_t n = read(w->fd, buf, sizeof(buf));

                if (n < 0)
                        return errno == EAGAIN ? 0 : errno == EINTR ? 0 : -errno;
                for (char *p = buf; p < buf + n;) {
                        const struct inotify_event *ev = (const struct inotify_event *) p;
                        int r = handle(w, ev, emit, userdata, status);

                        if (r < 0 || !fs_status_ok(status))
                                return r;
                        p += sizeof(struct inotify_event) + ev->len;
                }
        }
}

bool fs_watch_root_gone(const FsWatch *w) {
        return w->root_gone;
}

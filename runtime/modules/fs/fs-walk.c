/* SPDX-License-Identifier: MIT */
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>

#include "fs-walk.h"
#include "macro.h"

typedef struct DirEntry {
        char *name;
        unsigned char type;
} DirEntry;

static int dir_entry_compare(const void *a, const void *b) {
        return strcmp(((const DirEntry *) a)->name, ((const DirEntry *) b)->name);
}

static void dir_entries_free(DirEntry *e, size_t n) {
        for (size_t i = 0; i < n; i++)
                free(e[i].name);
        free(e);
}

bool fs_walk_should_stop(FsWalk *w) {
        if (w->stopped)
                return true;
        if ((w->deadline_usec > 0 && now_usec() >= w->deadline_usec) ||
            (w->cancelled && w->cancelled(w->userdata)))
                fs_walk_stop(w);
        return w->stopped;
}

/* Set path to <dir path> + "/" + name, NUL-terminated. */
static int path_push(FsWalk *w, size_t dir_len, const char *name) {
        int r;

        w->path.len = dir_len;
        r = buffer_append_byte(&w->path, '/');
        if (r >= 0)
                r = buffer_append(&w->path, name, strlen(name) + 1);
        if (r < 0)
                return r;
        w->path.len--; /* keep the NUL out of the length */
        return 0;
}

/* Read a directory's entries, sorted by name, bounded. */
static int read_entries(FsWalk *w, int dir_fd, DirEntry **ret, size_t *ret_n) {
        DirEntry *entries = NULL;
        size_t n = 0, cap = 0;
        int fd, r = 0;
        DIR *d;

        fd = fcntl(dir_fd, F_DUPFD_CLOEXEC, 3);
        if (fd < 0)
                return negative_errno();
        d = fdopendir(fd);
        if (!d) {
                r = negative_errno();
                safe_close(fd);
                return r;
        }

        for (;;) {
                struct dirent *de;

                errno = 0;
                de = readdir(d);
                if (!de) {
                        if (errno != 0)
                                w->incomplete = true;
                        break;
                }
                if (streq(de->d_name, ".") || streq(de->d_name, ".."))
                        continue;
                if (n >= FS_WALK_MAX_DIR_ENTRIES) {
                        w->incomplete = true;
                        break;
                }
                if (n == cap) {
                        size_t ncap = MAX(cap * 2, (size_t) 32);
                        DirEntry *e = reallocarray(entries, ncap, sizeof(DirEntry));
                        if (!e) {
                                r = -ENOMEM;
                                break;
                        }
                        entries = e;
                        cap = ncap;
                }
                entries[n].name = strdup(de->d_name);
                if (!entries[n].name) {
                        r = -ENOMEM;
                        break;
                }
                entries[n++].type = de->d_type;
        }
        closedir(d);

        if (r < 0) {
                dir_entries_free(entries, n);
                return r;
        }
        if (n > 0)
                qsort(entries, n, sizeof(DirEntry), dir_entry_compare);
        *ret = entries;
        *ret_n = n;
        return 0;
}

static int walk_dir(FsWalk *w, int dir_fd, void *ctx, unsigned depth) {
        DirEntry *entries = NULL;
        size_t n = 0, dir_len = w->path.len;
        int r;

        r = read_entries(w, dir_fd, &entries, &n);
        if (r == -ENOMEM)
                return r;
        if (r < 0) {
                w->incomplete = true;
                return 0;
        }

        for (size_t i = 0; i < n && !fs_walk_should_stop(w); i++) {
                const char *name = entries[i].name;
                unsigned char type = entries[i].type;

                r = path_push(w, dir_len, name);
                if (r < 0)
                        break;

                if (type == DT_UNKNOWN) {
                        struct stat st;
                        if (fstatat(dir_fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                                continue; /* vanished */
                        type = S_ISDIR(st.st_mode) ? DT_DIR : S_ISREG(st.st_mode) ? DT_REG :
                               S_ISLNK(st.st_mode) ? DT_LNK : DT_UNKNOWN;
                }

                if (type == DT_REG || type == DT_LNK) {
                        r = w->on_file(w, dir_fd, name, type, ctx);
                        if (r < 0)
                                break;
                        continue;
                }
                if (type != DT_DIR)
                        continue; /* devices, FIFOs, sockets: never read */

                void *child_ctx = NULL;
                r = w->on_directory(w, dir_fd, name, ctx, &child_ctx);
                if (r < 0)
                        break;
                if (r == 0)
                        continue;

                if (depth + 1 >= FS_WALK_MAX_DEPTH) {
                        w->incomplete = true;
                } else {
                        int fd = openat(dir_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                        if (fd < 0)
                                w->incomplete = true;
                        else {
                                r = walk_dir(w, fd, child_ctx, depth + 1);
                                safe_close(fd);
                        }
                }
                if (w->free_ctx)
                        w->free_ctx(child_ctx);
                if (r < 0)
                        break;
                r = 0;
        }

        w->path.len = dir_len;
        dir_entries_free(entries, n);
        return r < 0 ? r : 0;
}

int fs_walk_run(FsWalk *w, const char *root_path, int root_fd, void *root_ctx) {
        size_t n = strlen(root_path);
        int r;

        /* "/a/b/" → "/a/b"; "/" → "" so that children become "/x". */
        while (n > 0 && root_path[n - 1] == '/')
                n--;
        buffer_clear(&w->path);
        r = buffer_append(&w->path, root_path, n);
        if (r >= 0)
                r = buffer_append_byte(&w->path, 0);
        if (r < 0)
                return r;
        w->path.len = n;
        w->root_len = n;

        return walk_dir(w, root_fd, root_ctx, 0);
}

void fs_walk_done(FsWalk *w) {
        buffer_done(&w->path);
}

/* SPDX-License-Identifier: MIT */
/* fs.ls: one directory's entries with their metadata (deepagents 0.7: errors instead of a
 * silently empty list, #3105). */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>

#include "fs-ops.h"
#include "fs-path.h"
#include "macro.h"

void fs_format_timestamp(const struct timespec *ts, char buf[static FS_TIMESTAMP_MAX]) {
        struct tm tm;
        time_t t = ts->tv_sec;

        if (!gmtime_r(&t, &tm)) {
                t = 0;
                gmtime_r(&t, &tm);
        }
        snprintf(buf, FS_TIMESTAMP_MAX, "%04d-%02d-%02dT%02d:%02d:%02d.%06ld+00:00", tm.tm_year + 1900,
                 tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (long) (ts->tv_nsec / 1000));
}

void fs_ls_result_done(FsLsResult *r) {
        fs_status_done(&r->status);
        for (size_t i = 0; i < r->n_entries; i++)
                free(r->entries[i].path);
        free(r->entries);
        *r = (FsLsResult) {};
}

static int entry_compare(const void *a, const void *b) {
        return strcmp(((const FsEntry *) a)->path, ((const FsEntry *) b)->path);
}

static int ls_impl(const char *path, size_t max_entries, FsLsResult *res) {
        _cleanup_close_ int fd = -EBADF;
        DIR *d;
        int r;

        r = fs_path_check(path, strlen(path), &res->status);
        if (r <= 0)
                return r;

        fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return fs_status_from_errno(&res->status, -errno, path, FS_SUBJECT_DIRECTORY);

        d = fdopendir(fd);
        if (!d)
                return fs_status_from_errno(&res->status, -errno, path, FS_SUBJECT_DIRECTORY);
        fd = -EBADF; /* owned by d now */

        size_t cap = 0;
        for (;;) {
                struct dirent *de;
                struct stat st;

                errno = 0;
                de = readdir(d);
                if (!de) {
                        if (errno != 0) {
                                r = fs_status_from_errno(&res->status, -errno, path, FS_SUBJECT_DIRECTORY);
                                goto finish;
                        }
                        break;
                }
                if (streq(de->d_name, ".") || streq(de->d_name, ".."))
                        continue;
                if (res->n_entries >= max_entries) {
                        res->truncated = true;
                        break;
                }
                if (res->n_entries == cap) {
                        size_t ncap = MAX(cap * 2, (size_t) 64);
                        FsEntry *n = reallocarray(res->entries, ncap, sizeof(FsEntry));
                        if (!n) {
                                r = -ENOMEM;
                                goto finish;
                        }
                        res->entries = n;
                        cap = ncap;
                }

                FsEntry *e = &res->entries[res->n_entries];
                *e = (FsEntry) { .mode = -1 };
                if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) >= 0) {
                        e->is_dir = S_ISDIR(st.st_mode);
                        e->mode = (int) (st.st_mode & 07777);
                        e->size = (uint64_t) st.st_size;
                        e->mtime = st.st_mtim;
                } else if (errno == ENOENT)
                        continue; /* removed meanwhile */
                else
                        e->is_dir = de->d_type == DT_DIR; /* listable but not searchable */

                /* The name for now; made absolute after sorting (cheaper comparisons). */
                e->path = strdup(de->d_name);
                if (!e->path) {
                        r = -ENOMEM;
                        goto finish;
                }
                res->n_entries++;
        }

        if (res->n_entries > 0)
                qsort(res->entries, res->n_entries, sizeof(FsEntry), entry_compare);
        for (size_t i = 0; i < res->n_entries; i++) {
                char *full = fs_path_join(path, res->entries[i].path);
                if (!full) {
                        r = -ENOMEM;
                        goto finish;
                }
                free(res->entries[i].path);
                res->entries[i].path = full;
        }
        r = 0;

finish:
        closedir(d);
        return r;
}

int fs_ls(const char *path, size_t max_entries, FsLsResult *ret) {
        _cleanup_(fs_ls_result_done) FsLsResult res = {};
        int r;

        r = ls_impl(path, max_entries ?: FS_LS_MAX_ENTRIES, &res);
        if (r < 0)
                return r;
        if (!fs_status_ok(&res.status)) {
                /* An error result carries no partial listing. */
                for (size_t i = 0; i < res.n_entries; i++)
                        free(res.entries[i].path);
                free(res.entries);
                res.entries = NULL;
                res.n_entries = 0;
        }
        *ret = res;
        res = (FsLsResult) {};
        return 0;
}

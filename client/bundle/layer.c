/* SPDX-License-Identifier: MIT */
#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <openssl/evp.h>
#include <sys/stat.h>

#include "fs-util.h"
#include "layer.h"
#include "macro.h"

#define LAYER_MTIME 1 /* as Nix: 0 is read as "no time" by some tools */

typedef struct Writer {
        int fd;
        EVP_MD_CTX *sha;
        uint64_t size;
        struct archive *a;
} Writer;

void digest_to_hex(const uint8_t d[32], char out[DIGEST_HEX_LEN + 1]) {
        for (size_t i = 0; i < 32; i++)
                sprintf(out + 2 * i, "%02x", d[i]);
}

static la_ssize_t on_write(struct archive *a, void *userdata, const void *buf, size_t n) {
        Writer *w = userdata;

        if (loop_write(w->fd, buf, n) < 0) {
                archive_set_error(a, errno, "write failed");
                return -1;
        }
        EVP_DigestUpdate(w->sha, buf, n);
        w->size += n;
        return n;
}

int archive_write_entry(struct archive *a, const char *name, mode_t mode, int64_t size, const char *link) {
        struct archive_entry *e = archive_entry_new();
        int r;

        if (!e)
                return -ENOMEM;
        archive_entry_set_pathname(e, name);
        archive_entry_set_mode(e, mode);
        archive_entry_set_uid(e, 0);
        archive_entry_set_gid(e, 0);
        archive_entry_set_mtime(e, LAYER_MTIME, 0);
        archive_entry_set_size(e, S_ISREG(mode) ? size : 0);
        if (link)
                archive_entry_set_symlink(e, link);
        r = archive_write_header(a, e);
        archive_entry_free(e);
        return r == ARCHIVE_OK ? 0 : -EIO;
}

static int archive_data(const void *buf, size_t n, void *a) {
        return archive_write_data(a, buf, n) == (la_ssize_t) n ? 0 : -EIO;
}

int archive_write_file_data(struct archive *a, const char *path) {
        return read_file_chunks(path, archive_data, a);
}

static int compare_names(const struct dirent **a, const struct dirent **b) {
        return strcmp((*a)->d_name, (*b)->d_name);
}

static int skip_dots(const struct dirent *d) {
        return !streq(d->d_name, ".") && !streq(d->d_name, "..");
}

/* path on disk, name in the archive. */
static int write_tree(Writer *w, const char *path, const char *name) {
        struct dirent **entries = NULL;
        struct stat st;
        int n, r = 0;

        if (lstat(path, &st) < 0)
                return negative_errno();
        if (S_ISLNK(st.st_mode)) {
                char target[PATH_MAX];
                ssize_t len = readlink(path, target, sizeof(target) - 1);
                if (len < 0)
                        return negative_errno();
                target[len] = 0;
                return archive_write_entry(w->a, name, S_IFLNK | 0777, 0, target);
        }
        if (S_ISREG(st.st_mode)) {
                r = archive_write_entry(w->a, name, S_IFREG | (st.st_mode & 0777), st.st_size, NULL);
                return r < 0 ? r : archive_write_file_data(w->a, path);
        }
        if (!S_ISDIR(st.st_mode))
                return -EBADF;

        {
                char dir_name[PATH_MAX];
                snprintf(dir_name, sizeof(dir_name), "%s/", name);
                r = archive_write_entry(w->a, dir_name, S_IFDIR | 0755, 0, NULL);
                if (r < 0)
                        return r;
        }
        n = scandir(path, &entries, skip_dots, compare_names);
        if (n < 0)
                return negative_errno();
        for (int i = 0; i < n; i++) {
                char child_path[PATH_MAX], child_name[PATH_MAX];

                if (r >= 0) {
                        if (snprintf(child_path, sizeof(child_path), "%s/%s", path, entries[i]->d_name) >= PATH_MAX ||
                            snprintf(child_name, sizeof(child_name), "%s/%s", name, entries[i]->d_name) >= PATH_MAX)
                                r = -ENAMETOOLONG;
                        else
                                r = write_tree(w, child_path, child_name);
                }
                free(entries[i]);
        }
        free(entries);
        return r;
}

/* The directories above a tree ("nix/", "nix/store/"), once per archive. */
static int write_parents(Writer *w, const char *name, char ***written) {
        char buf[PATH_MAX];

        snprintf(buf, sizeof(buf), "%s", name);
        for (char *p = strchr(buf, '/'); p; p = strchr(p + 1, '/')) {
                char c = p[1];
                bool seen = false;

                p[1] = 0;
                for (char **s = *written; s && *s && !seen; s++)
                        seen = streq(*s, buf);
                if (!seen) {
                        size_t n = 0;
                        char **l;
                        int r = archive_write_entry(w->a, buf, S_IFDIR | 0755, 0, NULL);
                        if (r < 0)
                                return r;
                        while (*written && (*written)[n])
                                n++;
                        l = realloc(*written, (n + 2) * sizeof(char *));
                        if (!l)
                                return -ENOMEM;
                        l[n] = strdup(buf);
                        l[n + 1] = NULL;
                        *written = l;
                        if (!l[n])
                                return -ENOMEM;
                }
                p[1] = c;
        }
        return 0;
}

int layer_write(const char *path, const LayerTree *trees, size_t n_trees, char ret_diff_id[DIGEST_HEX_LEN + 1],
                uint64_t *ret_size) {
        char tmp[PATH_MAX];
        uint8_t digest[32];
        char **written = NULL;
        Writer w = { .fd = -EBADF };
        int r = 0;

        snprintf(tmp, sizeof(tmp), "%s.tmp-%d", path, (int) getpid());
        w.fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (w.fd < 0)
                return negative_errno();
        w.sha = EVP_MD_CTX_new();
        w.a = archive_write_new();
        if (!w.sha || !w.a) {
                r = -ENOMEM;
                goto finish;
        }
        EVP_DigestInit_ex(w.sha, EVP_sha256(), NULL);
        /* pax headers only where ustar cannot say it (long or non-ASCII names): the same bytes
         * every time, given a UTF-8 locale (see layer.h). */
        if (archive_write_set_format_pax_restricted(w.a) != ARCHIVE_OK ||
            archive_write_set_bytes_in_last_block(w.a, 1) != ARCHIVE_OK ||
            archive_write_open2(w.a, &w, NULL, on_write, NULL, NULL) != ARCHIVE_OK) {
                r = -EIO;
                goto finish;
        }
        for (size_t i = 0; i < n_trees && r >= 0; i++) {
                r = write_parents(&w, trees[i].name, &written);
                if (r >= 0)
                        r = write_tree(&w, trees[i].dir, trees[i].name);
        }
        if (r >= 0 && archive_write_close(w.a) != ARCHIVE_OK)
                r = -EIO;
finish:
        if (w.a)
                archive_write_free(w.a);
        for (char **s = written; s && *s; s++)
                free(*s);
        free(written);
        if (w.sha) {
                EVP_DigestFinal_ex(w.sha, digest, NULL);
                EVP_MD_CTX_free(w.sha);
        }
        safe_close(w.fd);
        if (r >= 0 && rename(tmp, path) < 0)
                r = negative_errno();
        if (r < 0) {
                (void) unlink(tmp);
                return r;
        }
        digest_to_hex(digest, ret_diff_id);
        if (ret_size)
                *ret_size = w.size;
        return 0;
}

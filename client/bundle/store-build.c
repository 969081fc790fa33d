/* SPDX-License-Identifier: MIT */
#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>

#include "buffer.h"
#include "fs-util.h"
#include "host-command.h"
#include "store-build.h"

static char *link_target_of(const StorePath *sp, const StoreFile *f) {
        _cleanup_free_ char *dir = NULL;
        char *slash;

        if (f->link.path != sp)
                return store_ref_path(&f->link);
        /* Inside the same store path: relative, so it holds wherever the store path is. */
        dir = strdup(f->dest);
        if (!dir)
                return NULL;
        slash = strrchr(dir, '/');
        if (slash)
                *slash = 0;
        else
                dir[0] = 0;
        return relative_path(dir, f->link.dest);
}

static int patch_elf(const StoreFile *f, const char *path, char **ret_error) {
        _cleanup_free_ char *interp = NULL, *output = NULL;
        _cleanup_buffer_ Buffer rpath = BUFFER_NULL;
        char *argv[10];
        size_t n = 0;
        int r;

        if (!f->interpreter.path && f->n_lib_dirs == 0)
                return 0; /* the loader itself, or an object that needs nothing */
        argv[n++] = (char *) "patchelf";
        if (f->interpreter.path) {
                interp = store_ref_path(&f->interpreter);
                if (!interp)
                        return -ENOMEM;
                argv[n++] = (char *) "--set-interpreter";
                argv[n++] = interp;
        }
        for (size_t i = 0; i < f->n_lib_dirs; i++) {
                _cleanup_free_ char *dir = store_ref_path(&f->lib_dirs[i]);
                if (!dir || buffer_printf(&rpath, "%s%s", i ? ":" : "", dir) < 0)
                        return -ENOMEM;
        }
        if (f->n_lib_dirs > 0) {
                if (buffer_append_byte(&rpath, 0) < 0)
                        return -ENOMEM;
                argv[n++] = (char *) "--set-rpath";
                argv[n++] = (char *) buffer_data(&rpath);
                /* Never the task image's libraries: what the store does not have fails loudly. */
                argv[n++] = (char *) "--no-default-lib";
        }
        argv[n++] = (char *) path;
        argv[n] = NULL;

        r = spawn_capture(argv, &output, NULL);
        if (r == -ENOENT)
                return asprintf(ret_error, "patchelf is not installed (apt-get install patchelf)") < 0 ? -ENOMEM : r;
        if (r != 0) {
                if (output)
                        output[strcspn(output, "\n")] = 0;
                return asprintf(ret_error, "patchelf failed on %s: %s", f->source, strna(output)) < 0 ? -ENOMEM : -EIO;
        }
        return 0;
}

/* Replace every NUL-terminated copy of f->rewrite_from in the file by f->rewrite_to. */
static int rewrite_path(const StoreFile *f, const char *path, char **ret_error) {
        size_t from_len = strlen(f->rewrite_from) + 1, to_len = strlen(f->rewrite_to);
        _cleanup_free_ char *data = NULL;
        _cleanup_close_ int fd = -EBADF;
        unsigned found = 0;
        struct stat st;

        if (to_len >= from_len)
                return -EINVAL;
        fd = open(path, O_RDWR | O_CLOEXEC);
        if (fd < 0 || fstat(fd, &st) < 0)
                return negative_errno();
        data = malloc(st.st_size + 1);
        if (!data)
                return -ENOMEM;
        if (loop_read_exact(fd, data, st.st_size) < 0)
                return -EIO;
        for (char *p = data; (p = memmem(p, data + st.st_size - p, f->rewrite_from, from_len)); p += from_len) {
                memset(p, 0, from_len);
                memcpy(p, f->rewrite_to, to_len);
                found++;
        }
        if (found == 0)
                return asprintf(ret_error, "%s: the path %s to relocate is not in it", f->source, f->rewrite_from) < 0
                               ? -ENOMEM : -ENOENT;
        if (pwrite(fd, data, st.st_size, 0) != st.st_size)
                return -EIO;
        return 0;
}

/* Replace each quoted copy of a text rewrite's path ('…' or "…", possibly followed by more of
 * the path inside the quotes) by the store path it stands for. */
static int rewrite_text(const StoreFile *f, const char *path) {
        _cleanup_free_ char *data = NULL, *out = NULL;
        _cleanup_fclose_ FILE *o = NULL;
        _cleanup_close_ int fd = -EBADF;
        size_t size, out_size = 0;
        struct stat st;

        fd = open(path, O_RDWR | O_CLOEXEC);
        if (fd < 0 || fstat(fd, &st) < 0)
                return negative_errno();
        size = (size_t) st.st_size;
        data = malloc(size + 1);
        if (!data)
                return -ENOMEM;
        if (loop_read_exact(fd, data, size) < 0)
                return -EIO;
        o = open_memstream(&out, &out_size);
        if (!o)
                return -ENOMEM;
        for (size_t i = 0; i < size;) {
                const TextRewrite *hit = NULL;

                if (i > 0 && (data[i - 1] == '\'' || data[i - 1] == '"'))
                        for (size_t j = 0; j < f->n_text_rewrites && !hit; j++) {
                                size_t n = strlen(f->text_rewrites[j].from);

                                if (i + n <= size && memcmp(data + i, f->text_rewrites[j].from, n) == 0 &&
                                    (i + n == size || strchr("'\"/", data[i + n])))
                                        hit = &f->text_rewrites[j];
                        }
                if (hit) {
                        fprintf(o, STORE_DIR "/%s/%s", hit->to.path->basename, hit->to.dest);
                        i += strlen(hit->from);
                } else
                        fputc(data[i++], o);
        }
        if (fclose(TAKE_PTR(o)) != 0)
                return -ENOMEM;
        if (ftruncate(fd, 0) < 0 || lseek(fd, 0, SEEK_SET) < 0)
                return negative_errno();
        return loop_write(fd, out, out_size);
}

static int build_file(const StorePath *sp, const StoreFile *f, const char *root, char **ret_error) {
        char path[PATH_MAX], *slash;
        int r;

        if (snprintf(path, sizeof(path), "%s/%s", root, f->dest) >= (int) sizeof(path))
                return -ENAMETOOLONG;
        slash = strrchr(path, '/');
        *slash = 0;
        r = mkdir_parents(path);
        *slash = '/';
        if (r < 0)
                return r;

        if (S_ISLNK(f->mode)) {
                _cleanup_free_ char *target = NULL;

                if (!f->link.path)
                        return 0; /* points at nothing the bundle holds */
                target = link_target_of(sp, f);
                if (!target)
                        return -ENOMEM;
                return symlink(target, path) < 0 ? negative_errno() : 0;
        }
        r = copy_file(f->source, path, 0600);
        if (r < 0)
                return asprintf(ret_error, "cannot copy %s: %s", f->source, strerror(-r)) < 0 ? -ENOMEM : r;
        if (f->rewrite_from) {
                r = rewrite_path(f, path, ret_error);
                if (r < 0)
                        return r;
        }
        if (f->n_text_rewrites > 0) {
                r = rewrite_text(f, path);
                if (r < 0)
                        return asprintf(ret_error, "cannot relocate paths in %s: %s", f->source, strerror(-r)) < 0 ? -ENOMEM : r;
        }
        if (f->elf) {
                r = patch_elf(f, path, ret_error);
                if (r < 0)
                        return r;
        }
        /* Permission bits as packaged, without set-id bits: nothing in a bundle is privileged. */
        return chmod(path, f->mode & 0777) < 0 ? negative_errno() : 0;
}

int store_path_build(StorePath *sp, const char *cache_store, bool *ret_made, char **ret_error) {
        char final[PATH_MAX], tmp[PATH_MAX];
        struct stat st;
        int r;

        *ret_made = false;
        snprintf(final, sizeof(final), "%s/%s", cache_store, sp->basename);
        if (stat(final, &st) == 0 && S_ISDIR(st.st_mode))
                return 0;
        snprintf(tmp, sizeof(tmp), "%s/.tmp-%d-%s", cache_store, (int) getpid(), sp->basename);
        (void) remove_tree(tmp);
        r = mkdir_parents(tmp);
        if (r < 0)
                return asprintf(ret_error, "cannot create %s: %s", tmp, strerror(-r)) < 0 ? -ENOMEM : r;

        for (size_t i = 0; i < sp->n_files; i++) {
                r = build_file(sp, &sp->files[i], tmp, ret_error);
                if (r < 0) {
                        if (!*ret_error && asprintf(ret_error, "cannot make %s in the store: %s", sp->files[i].dest,
                                                    strerror(-r)) < 0)
                                *ret_error = NULL;
                        (void) remove_tree(tmp);
                        return r;
                }
        }
        /* Atomic: a store path in the cache is whole or absent. Another build may have won. */
        if (rename(tmp, final) < 0) {
                r = negative_errno();
                (void) remove_tree(tmp);
                if (r != -EEXIST && r != -ENOTEMPTY)
                        return asprintf(ret_error, "cannot move %s into place: %s", final, strerror(-r)) < 0 ? -ENOMEM : r;
                return 0;
        }
        *ret_made = true;
        return 0;
}

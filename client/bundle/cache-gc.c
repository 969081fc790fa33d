/* SPDX-License-Identifier: MIT */
/* The bundle cache's roots and garbage. Each build records what it used — its store paths and
 * its cached layers — in roots/NAME_VERSION_PLATFORM.json, replacing the record of the build
 * before it of the same bundle and platform. cache_gc() removes every store path and layer no
 * record names. A lock (flock on the cache's lock file) keeps a collection away from builds in
 * progress: builds share it, a collection takes it alone. */
#include <fcntl.h>
#include <ftw.h>
#include <jansson.h>
#include <sys/file.h>
#include <sys/stat.h>

#include "cache-gc.h"
#include "fs-util.h"
#include "layer.h"
#include "macro.h"
#include "strv.h"

int cache_lock(const char *cache_dir, bool exclusive, int *ret_fd) {
        _cleanup_free_ char *path = NULL;
        _cleanup_close_ int fd = -EBADF;

        if (asprintf(&path, "%s/lock", cache_dir) < 0)
                return -ENOMEM;
        fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
        if (fd < 0)
                return -errno;
        if (flock(fd, (exclusive ? LOCK_EX : LOCK_SH) | LOCK_NB) < 0)
                return errno == EWOULDBLOCK ? -EBUSY : -errno;
        *ret_fd = TAKE_FD(fd);
        return 0;
}

/* A name for a file: letters, digits, '.', '-' kept; anything else '_'. */
static void sanitize(char *s) {
        for (; *s; s++)
                if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') || *s == '.' ||
                      *s == '-'))
                        *s = '_';
}

int cache_record_build(const char *cache_dir, const char *name, const char *version, const char *platform,
                       char *const *store, char *const *layers) {
        _cleanup_free_ char *dir = NULL, *base = NULL, *path = NULL, *tmp = NULL;
        json_t *j, *s = json_array(), *l = json_array();
        int r;

        for (char *const *p = store; s && p && *p; p++)
                json_array_append_new(s, json_string(*p));
        for (char *const *p = layers; l && p && *p; p++)
                json_array_append_new(l, json_string(*p));
        j = json_pack("{s:s, s:s, s:s, s:o*, s:o*}", "name", name, "version", version, "platform", platform, "store",
                      s, "layers", l);
        if (!j)
                return -ENOMEM;
        if (asprintf(&dir, "%s/roots", cache_dir) < 0 || asprintf(&base, "%s_%s_%s", name, version, platform) < 0) {
                json_decref(j);
                return -ENOMEM;
        }
        sanitize(base);
        if (asprintf(&path, "%s/%s.json", dir, base) < 0 || asprintf(&tmp, "%s.tmp-%d", path, (int) getpid()) < 0) {
                json_decref(j);
                return -ENOMEM;
        }
        r = mkdir_parents(dir);
        if (r >= 0)
                r = json_dump_file(j, tmp, JSON_COMPACT) < 0 ? -EIO : 0;
        json_decref(j);
        if (r >= 0 && rename(tmp, path) < 0)
                r = -errno;
        if (r < 0)
                (void) unlink(tmp);
        return r;
}

/* Every store path and layer the records name, into *store and *layers (sorted). */
static int read_roots(const char *cache_dir, char ***store, char ***layers, size_t *ret_n, char **ret_error) {
        _cleanup_free_ char *dir = NULL;
        _cleanup_(closedirp) DIR *d = NULL;
        struct dirent *de;
        size_t n = 0;

        if (asprintf(&dir, "%s/roots", cache_dir) < 0)
                return -ENOMEM;
        d = opendir(dir);
        if (!d && errno != ENOENT)
                return -errno;
        while (d && (de = readdir(d))) {
                char path[PATH_MAX];
                json_error_t err;
                json_t *j, *v;
                size_t i;

                if (!strstr(de->d_name, ".json") || strstr(de->d_name, ".tmp-"))
                        continue;
                snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
                j = json_load_file(path, 0, &err);
                if (!j) {
                        /* Not knowing what a build uses, remove nothing. */
                        if (asprintf(ret_error, "%s: %s (remove it, and rebuild that bundle)", path, err.text) < 0)
                                *ret_error = NULL;
                        return -EBADMSG;
                }
                json_array_foreach(json_object_get(j, "store"), i, v)
                        if (json_string_value(v) && strv_extend(store, json_string_value(v)) < 0)
                                return json_decref(j), -ENOMEM;
                json_array_foreach(json_object_get(j, "layers"), i, v)
                        if (json_string_value(v) && strv_extend(layers, json_string_value(v)) < 0)
                                return json_decref(j), -ENOMEM;
                json_decref(j);
                n++;
        }
        *ret_n = n;
        return 0;
}

static uint64_t usage_sum;

static int add_usage(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
        usage_sum += (uint64_t) st->st_blocks * 512;
        return 0;
}

/* The disk space under path (du), not following links. */
static uint64_t disk_usage(const char *path) {
        usage_sum = 0;
        (void) nftw(path, add_usage, 16, FTW_PHYS);
        return usage_sum;
}

/* A layer file's key: its name without ".FORMAT.tar" / ".FORMAT.diffid". */
static bool layer_key(const char *file, char *key, size_t size) {
        static const char *const suffixes[] = { "." LAYER_FORMAT ".tar", "." LAYER_FORMAT ".diffid" };
        size_t n = strlen(file);

        for (size_t i = 0; i < ELEMENTSOF(suffixes); i++) {
                size_t s = strlen(suffixes[i]);
                if (n > s && streq(file + n - s, suffixes[i]) && n - s < size) {
                        memcpy(key, file, n - s);
                        key[n - s] = 0;
                        return true;
                }
        }
        return false;
}

static int sweep(const char *dir, char **keep, bool layers, size_t *ret_removed, uint64_t *freed) {
        _cleanup_(closedirp) DIR *d = opendir(dir);
        struct dirent *de;

        if (!d)
                return errno == ENOENT ? 0 : -errno;
        while ((de = readdir(d))) {
                char path[PATH_MAX], key[NAME_MAX + 1];
                const char *name = de->d_name;

                if (name[0] == '.' || strstr(name, ".tmp-"))
                        continue; /* ".", "..", and a build's scratch */
                if (layers) {
                        if (!layer_key(name, key, sizeof(key)))
                                continue;
                        name = key;
                }
                if (strv_contains(keep, name))
                        continue;
                snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
                int r;

                *freed += disk_usage(path);
                r = remove_tree(path);
                if (r < 0)
                        return r;
                if (!layers || strstr(de->d_name, ".tar"))
                        (*ret_removed)++;
        }
        return 0;
}

int cache_gc(const char *cache_dir, CacheGcResult *ret, char **ret_error) {
        _cleanup_strv_free_ char **store = NULL, **layers = NULL;
        _cleanup_free_ char *store_dir = NULL, *layers_dir = NULL;
        _cleanup_close_ int lock = -EBADF;
        int r;

        *ret = (CacheGcResult) {};
        *ret_error = NULL;
        if (access(cache_dir, F_OK) < 0)
                return 0; /* nothing cached yet */
        r = cache_lock(cache_dir, true, &lock);
        if (r == -EBUSY) {
                if (asprintf(ret_error, "a build is using the cache %s: try again once it is done", cache_dir) < 0)
                        *ret_error = NULL;
                return r;
        }
        if (r < 0)
                return r;
        r = read_roots(cache_dir, &store, &layers, &ret->n_roots, ret_error);
        if (r < 0)
                return r;
        if (asprintf(&store_dir, "%s/store", cache_dir) < 0 || asprintf(&layers_dir, "%s/layers", cache_dir) < 0)
                return -ENOMEM;
        r = sweep(store_dir, store, false, &ret->n_store_paths, &ret->bytes_freed);
        if (r >= 0)
                r = sweep(layers_dir, layers, true, &ret->n_layers, &ret->bytes_freed);
        return r;
}

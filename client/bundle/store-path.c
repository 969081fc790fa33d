/* SPDX-License-Identifier: MIT */
#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/stat.h>

#include "fs-util.h"
#include "store-path.h"

/* Bump when what goes into a store path changes for the same inputs (how files are patched,
 * what is left out), so that old cached store paths are not taken for new ones. */
#define STORE_RECIPE "agentix-store-1"

char *store_safe_name(const char *s) {
        char *t = strdup(s);

        for (char *p = t; p && *p; p++)
                if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
                      strchr("+._?=-", *p)))
                        *p = '_';
        return t;
}

StorePath *store_path_new(const char *name, const char *version) {
        StorePath *sp = calloc(1, sizeof(*sp));

        if (!sp)
                return NULL;
        sp->name = store_safe_name(name);
        sp->version = store_safe_name(version);
        sp->by_dest = strmap_new();
        if (!sp->name || !sp->version || !sp->by_dest)
                return store_path_free(sp);
        return sp;
}

StorePath *store_path_free(StorePath *sp) {
        if (!sp)
                return NULL;
        for (size_t i = 0; i < sp->n_files; i++) {
                StoreFile *f = &sp->files[i];
                free(f->dest);
                free(f->source);
                free(f->link_target);
                free(f->link.dest);
                elf_deps_free(f->elf);
                free(f->interpreter.dest);
                for (size_t j = 0; j < f->n_lib_dirs; j++)
                        free(f->lib_dirs[j].dest);
                free(f->lib_dirs);
                free(f->rewrite_from);
                free(f->rewrite_to);
                for (size_t j = 0; j < f->n_text_rewrites; j++) {
                        free(f->text_rewrites[j].from);
                        free(f->text_rewrites[j].to.dest);
                }
                free(f->text_rewrites);
        }
        free(sp->files);
        strmap_free(sp->by_dest);
        free(sp->refs);
        free(sp->name);
        free(sp->version);
        free(sp->source_package);
        strv_free(sp->packages);
        free(sp->basename);
        free(sp);
        return NULL;
}

StoreFile *store_path_find(StorePath *sp, const char *dest) {
        uintptr_t i = (uintptr_t) strmap_get(sp->by_dest, dest, strlen(dest));

        return i ? &sp->files[i - 1] : NULL;
}

int store_path_add_file(StorePath *sp, const char *source, const char *dest) {
        _cleanup_free_ char *link = NULL;
        StoreFile *files;
        struct stat st;
        int r;

        if (store_path_find(sp, dest))
                return 0;
        if (lstat(source, &st) < 0)
                return negative_errno();
        if (S_ISLNK(st.st_mode)) {
                link = calloc(1, st.st_size + 2);
                if (!link)
                        return -ENOMEM;
                if (readlink(source, link, st.st_size + 1) != st.st_size)
                        return -EIO;
        } else if (!S_ISREG(st.st_mode))
                return -EISDIR; /* directories come with their files; devices, fifos never */

        files = realloc(sp->files, (sp->n_files + 1) * sizeof(StoreFile));
        if (!files)
                return -ENOMEM;
        sp->files = files;
        files[sp->n_files] = (StoreFile) {
                .dest = strdup(dest),
                .source = strdup(source),
                .mode = st.st_mode,
                .size = S_ISREG(st.st_mode) ? (uint64_t) st.st_size : 0,
                .link_target = TAKE_PTR(link),
        };
        if (!files[sp->n_files].dest || !files[sp->n_files].source)
                return -ENOMEM;
        sp->n_files++;
        r = strmap_put(sp->by_dest, files[sp->n_files - 1].dest, strlen(dest), (void *) (uintptr_t) sp->n_files);
        if (r < 0)
                return r;
        sp->total_size += files[sp->n_files - 1].size;
        return 1;
}

int store_path_add_ref(StorePath *sp, StorePath *other) {
        StorePath **refs;

        if (other == sp)
                return 0;
        for (size_t i = 0; i < sp->n_refs; i++)
                if (sp->refs[i] == other)
                        return 0;
        refs = realloc(sp->refs, (sp->n_refs + 1) * sizeof(StorePath *));
        if (!refs)
                return -ENOMEM;
        sp->refs = refs;
        sp->refs[sp->n_refs++] = other;
        return 0;
}

char *store_ref_path(const StoreRef *r) {
        char *s;

        if (asprintf(&s, STORE_DIR "/%s%s%s", r->path->basename, r->dest ? "/" : "", r->dest ?: "") < 0)
                return NULL;
        return s;
}

/* ---- naming ------------------------------------------------------------------------------ */

static int compare_dest(const void *a, const void *b) {
        return strcmp((*(const StoreFile *const *) a)->dest, (*(const StoreFile *const *) b)->dest);
}

static int digest_update(const void *buf, size_t n, void *ctx) {
        return EVP_DigestUpdate(ctx, buf, n) == 1 ? 0 : -EIO;
}

static int hash_file(EVP_MD_CTX *ctx, const char *path) {
        return read_file_chunks(path, digest_update, ctx);
}

static void hash_string(EVP_MD_CTX *ctx, const char *s) {
        EVP_DigestUpdate(ctx, s ?: "", strlen(s ?: "") + 1);
}

/* What a file's content hash can be cached under: where it is and what stat() says of it
 * (device, inode, size, change and modification times), as git's index and ccache do. */
static int stat_key_update(EVP_MD_CTX *ctx, const StoreFile *f) {
        char buf[256];
        struct stat st;

        if (lstat(f->source, &st) < 0)
                return negative_errno();
        hash_string(ctx, f->source);
        snprintf(buf, sizeof(buf), "%llu:%llu:%lld:%lld.%09ld:%lld.%09ld", (unsigned long long) st.st_dev,
                 (unsigned long long) st.st_ino, (long long) st.st_size, (long long) st.st_mtim.tv_sec,
                 st.st_mtim.tv_nsec, (long long) st.st_ctim.tv_sec, st.st_ctim.tv_nsec);
        hash_string(ctx, buf);
        return 0;
}

/* The hash of the files alone: their names, modes, contents, and what each link and ELF
 * object was resolved to, by the name (not yet the hash) of the store path it points into.
 * With `key`, the same walk with each file's stat key in place of its contents: a cheap key
 * under which the content hash is cached. */
static int hash_files(StorePath *sp, bool key, uint8_t ret[32]) {
        _cleanup_free_ StoreFile **sorted = NULL;
        EVP_MD_CTX *ctx = EVP_MD_CTX_new();
        char mode[16];
        int r = 0;

        sorted = calloc(sp->n_files + 1, sizeof(StoreFile *));
        if (!ctx || !sorted) {
                EVP_MD_CTX_free(ctx);
                return -ENOMEM;
        }
        for (size_t i = 0; i < sp->n_files; i++)
                sorted[i] = &sp->files[i];
        qsort(sorted, sp->n_files, sizeof(StoreFile *), compare_dest);

        EVP_DigestInit_ex(ctx, EVP_sha256(), NULL);
        hash_string(ctx, STORE_RECIPE);
        hash_string(ctx, key ? "stat-key" : "contents");
        hash_string(ctx, sp->name);
        hash_string(ctx, sp->version);
        for (size_t i = 0; i < sp->n_files && r >= 0; i++) {
                StoreFile *f = sorted[i];

                hash_string(ctx, f->dest);
                snprintf(mode, sizeof(mode), "%o", (unsigned) f->mode);
                hash_string(ctx, mode);
                if (S_ISLNK(f->mode)) {
                        hash_string(ctx, f->link.path ? f->link.path->name : "");
                        hash_string(ctx, f->link.dest);
                        continue;
                }
                r = key ? stat_key_update(ctx, f) : hash_file(ctx, f->source);
                if (f->rewrite_from) {
                        hash_string(ctx, f->rewrite_from);
                        hash_string(ctx, f->rewrite_to);
                }
                /* By name, not basename: a file may point into its own store path. */
                for (size_t j = 0; j < f->n_text_rewrites; j++) {
                        hash_string(ctx, f->text_rewrites[j].from);
                        hash_string(ctx, f->text_rewrites[j].to.path->name);
                        hash_string(ctx, f->text_rewrites[j].to.dest);
                }
                if (f->interpreter.path) {
                        hash_string(ctx, f->interpreter.path->name);
                        hash_string(ctx, f->interpreter.dest);
                }
                for (size_t j = 0; j < f->n_lib_dirs; j++) {
                        hash_string(ctx, f->lib_dirs[j].path->name);
                        hash_string(ctx, f->lib_dirs[j].dest);
                }
        }
        EVP_DigestFinal_ex(ctx, ret, NULL);
        EVP_MD_CTX_free(ctx);
        return r;
}

/* The content hash, from the cache when no file changed since it was computed; returns 1 when
 * the files had to be read. */
static int hash_contents(StorePath *sp, const char *cache_dir) {
        char path[PATH_MAX], tmp[PATH_MAX], hex[65];
        uint8_t key[32];
        int r;

        if (!cache_dir)
                goto read_files;
        r = hash_files(sp, true, key);
        if (r < 0)
                goto read_files; /* a file we cannot stat: reading it reports why */
        for (size_t i = 0; i < 32; i++)
                snprintf(hex + 2 * i, 3, "%02x", key[i]);
        snprintf(path, sizeof(path), "%s/%s", cache_dir, hex);
        {
                _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
                if (fd >= 0 && read(fd, sp->content_hash, 32) == 32)
                        return 0;
        }

read_files:
        r = hash_files(sp, false, sp->content_hash);
        if (r < 0 || !cache_dir)
                return r < 0 ? r : 1;
        /* Written aside and renamed, so that a reader never sees half a hash. */
        snprintf(tmp, sizeof(tmp), "%s/.tmp-%s-%d", cache_dir, hex, (int) getpid());
        {
                _cleanup_close_ int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
                if (fd >= 0 && loop_write(fd, sp->content_hash, 32) >= 0 && rename(tmp, path) >= 0)
                        return 1;
        }
        (void) unlink(tmp);
        return 1; /* the cache is an optimisation: a failed write costs a re-read next time */
}

/* Nix's base-32 (no e, o, u, t), of the first 20 bytes: 32 characters. */
static void nix_base32(const uint8_t *hash, size_t len, char *out) {
        static const char alphabet[] = "0123456789abcdfghijklmnpqrsvwxyz";
        size_t n = (len * 8 - 1) / 5 + 1;

        for (size_t i = 0; i < n; i++) {
                size_t b = (n - 1 - i) * 5, byte = b / 8, bit = b % 8;
                unsigned c = (hash[byte] >> bit) | (byte + 1 < len ? hash[byte + 1] << (8 - bit) : 0);
                out[i] = alphabet[c & 0x1f];
        }
        out[n] = 0;
}

static int compare_ref_name(const void *a, const void *b) {
        const StorePath *x = *(const StorePath *const *) a, *y = *(const StorePath *const *) b;
        int c = strcmp(x->name, y->name);

        return c ?: memcmp(x->content_hash, y->content_hash, 32);
}

static int name_one(StorePath *sp) {
        char b32[STORE_HASH_LEN + 1];
        EVP_MD_CTX *ctx;

        if (sp->visit != 0)
                return 0; /* named, or a cycle: the one in progress counts by its content only */
        sp->visit = 1;
        if (sp->n_refs > 1)
                qsort(sp->refs, sp->n_refs, sizeof(StorePath *), compare_ref_name);
        for (size_t i = 0; i < sp->n_refs; i++) {
                int r = name_one(sp->refs[i]);
                if (r < 0)
                        return r;
        }

        ctx = EVP_MD_CTX_new();
        if (!ctx)
                return -ENOMEM;
        EVP_DigestInit_ex(ctx, EVP_sha256(), NULL);
        EVP_DigestUpdate(ctx, sp->content_hash, 32);
        for (size_t i = 0; i < sp->n_refs; i++)
                EVP_DigestUpdate(ctx, sp->refs[i]->visit == 2 ? sp->refs[i]->hash : sp->refs[i]->content_hash, 32);
        EVP_DigestFinal_ex(ctx, sp->hash, NULL);
        EVP_MD_CTX_free(ctx);

        nix_base32(sp->hash, 20, b32);
        if (asprintf(&sp->basename, "%s-%s-%s", b32, sp->name, sp->version) < 0)
                return -ENOMEM;
        sp->visit = 2;
        return 0;
}

int store_paths_name(StorePath **paths, size_t n, const char *hash_cache_dir, size_t *ret_hashed) {
        size_t hashed = 0;
        int r;

        for (size_t i = 0; i < n; i++) {
                r = hash_contents(paths[i], hash_cache_dir);
                if (r < 0)
                        return r;
                hashed += r;
        }
        if (ret_hashed)
                *ret_hashed = hashed;
        for (size_t i = 0; i < n; i++) {
                r = name_one(paths[i]);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* SPDX-License-Identifier: MIT */
#include <dirent.h>
#include <elf.h>
#include <signal.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <openssl/evp.h>
#include <stdarg.h>
#include <sys/stat.h>

#include "bundle-build.h"
#include "cache-gc.h"
#include "bundle-manifest.h"
#include "closure.h"
#include "docker-engine.h"
#include "fs-util.h"
#include "image-archive.h"
#include "image-ref.h"
#include "module-compile.h"
#include "python-relocate.h"
#include "runtime-env.h"
#include "runtime-tree.h"
#include "host-command.h"
#include "store-build.h"

/* overlayfs stacks at most ~125 layers: past this many store paths, the rest share one. */
#define MAX_LAYERS 100
#define RUNTIME_NAME "agentix"
#define LWS_EVLIB_PACKAGE "libwebsockets-evlib-uv"
#define LWS_PLUGIN_LINK "/nix/runtime/lib/lws"

typedef struct Build {
        const BundleBuildOptions *o;
        BundleManifest *m;
        DpkgDb *db;
        Closure *c;
        char *os, *arch, *variant;
        char *cache_store, *cache_layers, *cache_hashes, *cache_tmp;
        char *tmp;                 /* this build's scratch directory */
        int cache_lock;            /* shared: no collection (cache-gc.c) while this build runs */
        ImageLayer *layers;
        size_t n_layers;
        size_t n_hashed;           /* store paths whose files were read to hash them */
        size_t n_layers_written;   /* layers not found in the cache */
        char **env;
        char *error;
} Build;

#define build_fail(b, r, ...) message_set_first(&(b)->error, (r), __VA_ARGS__)

static void progress(Build *b, BuildStep step, size_t done, size_t total, const char *what) {
        if (b->o->progress)
                b->o->progress(step, done, total, what, b->o->userdata);
}

/* ---- platform --------------------------------------------------------------------------- */

static const struct {
        const char *dpkg, *arch, *variant;
        uint16_t machine;
} platforms[] = {
        { "amd64", "amd64", NULL, EM_X86_64 },
        { "arm64", "arm64", "v8", EM_AARCH64 },
        { "armhf", "arm", "v7", EM_ARM },
        { "i386", "386", NULL, EM_386 },
        { "ppc64el", "ppc64le", NULL, EM_PPC64 },
        { "s390x", "s390x", NULL, EM_S390 },
        { "riscv64", "riscv64", NULL, EM_RISCV },
};

int platform_of_host(const char *dpkg_arch, char **ret) {
        for (size_t i = 0; i < ELEMENTSOF(platforms); i++)
                if (streq(platforms[i].dpkg, dpkg_arch))
                        return asprintf(ret, "linux/%s%s%s", platforms[i].arch, platforms[i].variant ? "/" : "",
                                        platforms[i].variant ?: "") < 0 ? -ENOMEM : 0;
        return -EOPNOTSUPP;
}

static int check_platform(Build *b, const char *wanted, uint16_t *ret_machine) {
        _cleanup_free_ char *host = NULL;
        char short_form[64];
        size_t i;

        for (i = 0; i < ELEMENTSOF(platforms) && !streq(platforms[i].dpkg, b->db->arch); i++)
                ;
        if (i == ELEMENTSOF(platforms))
                return build_fail(b, -EOPNOTSUPP, "this host's architecture (%s) is not one agentix knows", b->db->arch);
        if (platform_of_host(b->db->arch, &host) < 0)
                return -ENOMEM;
        /* linux/arm64/v8 may be spelled linux/arm64, as Docker does. */
        snprintf(short_form, sizeof(short_form), "linux/%s", platforms[i].arch);
        if (wanted && !streq(wanted, host) && !streq(wanted, short_form))
                return build_fail(b, -EOPNOTSUPP,
                                  "cannot build a bundle for %s on this %s host: a bundle is made of the build host's "
                                  "own programs and libraries; build it on a %s machine", wanted, host, wanted);
        b->os = strdup("linux");
        b->arch = strdup(platforms[i].arch);
        b->variant = platforms[i].variant ? strdup(platforms[i].variant) : NULL;
        if (!b->os || !b->arch || (platforms[i].variant && !b->variant))
                return -ENOMEM;
        *ret_machine = platforms[i].machine;
        return 0;
}

/* ---- inputs ----------------------------------------------------------------------------- */

static int add_runtime(Build *b) {
        /* The server, its worker and the worker's helper for other accounts: the worker finds
         * the helper beside itself, so they share one store path. */
        static const char *const programs[] = { "agentix-server", "agentix-worker", "agentix-exec-as" };
        char paths[ELEMENTSOF(programs)][PATH_MAX], dests[ELEMENTSOF(programs)][64];
        char *sources[ELEMENTSOF(programs) + 1] = {}, *targets[ELEMENTSOF(programs) + 1] = {};
        int r;

        for (size_t i = 0; i < ELEMENTSOF(programs); i++) {
                const char *dir = b->o->runtime_dir ?: i == 0 ? AGENTIX_BINDIR : AGENTIX_LIBEXECDIR;

                snprintf(paths[i], sizeof(paths[i]), "%s/%s", dir, programs[i]);
                snprintf(dests[i], sizeof(dests[i]), "bin/%s", programs[i]);
                if (access(paths[i], X_OK) < 0)
                        return build_fail(b, -ENOENT, "the agentix runtime is missing: %s: %m (use --runtime-dir)", paths[i]);
                sources[i] = paths[i];
                targets[i] = dests[i];
        }
        r = closure_add_component(b->c, RUNTIME_NAME, AGENTIX_VERSION, sources, targets, NULL);
        if (r < 0)
                return build_fail(b, r, "%s", b->c->error ?: strerror(-r));
        /* What libraries read at run time that no ELF file names: libwebsockets' libuv glue (a
         * plugin), glibc's C.UTF-8 locale (python3 switches to it), ncurses' terminfo. */
        if (closure_add_companion(b->c, "libwebsockets", LWS_EVLIB_PACKAGE) < 0 ||
            closure_add_companion(b->c, "glibc", "libc-bin") < 0 || closure_add_companion(b->c, "ncurses", "ncurses-base") < 0)
                return -ENOMEM;
        return 0;
}

/* libwebsockets looks for its event-library plugins in the directory it was built for
 * (/usr/lib/<triplet>), which a task image may not have: point it at /nix/runtime/lib/lws, a
 * link to its directory in the store (the new path must not be longer than the old). */
static int relocate_lws_plugins(Build *b) {
        StorePath *sp = closure_find_source(b->c, "libwebsockets");

        for (size_t i = 0; sp && i < sp->n_files; i++) {
                StoreFile *f = &sp->files[i];
                const char *base = strrchr(f->dest, '/');
                _cleanup_free_ char *dir = NULL;
                int r;

                if (!S_ISREG(f->mode) || !base || !strneq(base + 1, "libwebsockets.so.", 17) ||
                    !strneq(f->dest, "lib/", 4))
                        continue;
                dir = strndup(f->dest, base - f->dest);
                if (!dir || asprintf(&f->rewrite_from, "/usr/%s", dir) < 0 ||
                    !(f->rewrite_to = strdup(LWS_PLUGIN_LINK)))
                        return -ENOMEM;
                if (strlen(f->rewrite_to) >= strlen(f->rewrite_from))
                        return build_fail(b, -EINVAL, "cannot relocate libwebsockets' plugin directory %s",
                                          f->rewrite_from);
                r = closure_add_runtime_link(b->c, LWS_PLUGIN_LINK + STRLEN("/nix/runtime/"), sp, dir);
                if (r < 0)
                        return r;
        }
        return 0;
}

static int add_modules(Build *b) {
        for (size_t i = 0; i < b->m->n_modules; i++) {
                const BundleModule *mod = &b->m->modules[i];
                char so[PATH_MAX], dest[PATH_MAX], name[PATH_MAX];
                int r;

                progress(b, BUILD_STEP_MODULES, i, b->m->n_modules, mod->name);
                if (mod->file) {
                        if (mod->file[0] == '/')
                                snprintf(so, sizeof(so), "%s", mod->file);
                        else
                                snprintf(so, sizeof(so), "%s/%s", b->m->dir, mod->file);
                        if (access(so, R_OK) < 0)
                                return build_fail(b, -ENOENT, "[Module %s]: %s: %m", mod->name, so);
                } else {
                        snprintf(so, sizeof(so), "%s/%s.so", b->tmp, mod->name);
                        r = module_compile(mod, b->m->dir, b->o->include_dir ?: AGENTIX_INCLUDEDIR, so, &b->error);
                        if (r < 0)
                                return r;
                }
                snprintf(dest, sizeof(dest), "lib/agentix/modules/%s.so", mod->name);
                snprintf(name, sizeof(name), "agentix-module-%s", mod->name);
                r = closure_add_component(b->c, name, b->m->version, (char *[]) { so, NULL }, (char *[]) { dest, NULL },
                                          NULL);
                if (r < 0)
                        return build_fail(b, r, "%s", b->c->error ?: strerror(-r));
        }
        progress(b, BUILD_STEP_MODULES, b->m->n_modules, b->m->n_modules, NULL);
        return 0;
}

/* Files some packages need that dpkg made at install time rather than shipped. */
static int add_generated_files(Build *b) {
        StorePath *sp = closure_find_source(b->c, "ca-certificates");
        const char *bundle = "/etc/ssl/certs/ca-certificates.crt";
        int r;

        if (!sp || access(bundle, R_OK) < 0)
                return 0;
        r = store_path_add_file(sp, bundle, "etc/ssl/certs/ca-certificates.crt");
        return r < 0 ? build_fail(b, r, "cannot read %s: %s", bundle, strerror(-r)) : 0;
}

static int collect(Build *b) {
        int r;

        r = add_runtime(b);
        if (r >= 0)
                r = add_modules(b);
        if (r < 0)
                return r;
        progress(b, BUILD_STEP_RESOLVE, 0, 1, NULL);
        for (char **p = b->m->packages; p && *p; p++) {
                r = closure_add_package(b->c, *p, b->m->exclude_packages);
                if (r < 0)
                        return build_fail(b, r, "%s", b->c->error ?: strerror(-r));
        }
        for (char **p = b->m->programs; p && *p; p++) {
                r = closure_add_program(b->c, *p);
                if (r < 0)
                        return build_fail(b, r, "%s", b->c->error ?: strerror(-r));
        }
        r = add_generated_files(b);
        if (r < 0)
                return r;
        r = closure_resolve(b->c);
        if (r < 0)
                return build_fail(b, r, "%s", b->c->error ?: strerror(-r));
        r = relocate_lws_plugins(b);
        if (r < 0)
                return r;
        r = relocate_python_paths(b->c);
        if (r < 0)
                return build_fail(b, r, "%s", b->c->error ?: strerror(-r));
        r = store_paths_name(b->c->paths, b->c->n_paths, b->cache_hashes, &b->n_hashed);
        if (r < 0)
                return build_fail(b, r, "cannot hash the store paths: %s", strerror(-r));
        progress(b, BUILD_STEP_RESOLVE, 1, 1, NULL);
        return 0;
}

/* ---- store paths and layers ------------------------------------------------------------- */

static int build_store(Build *b, size_t *ret_made) {
        size_t made = 0;

        for (size_t i = 0; i < b->c->n_paths; i++) {
                StorePath *sp = b->c->paths[i];
                _cleanup_free_ char *e = NULL;
                bool m;
                int r;

                progress(b, BUILD_STEP_STORE, i, b->c->n_paths, sp->name);
                r = store_path_build(sp, b->cache_store, &m, &e);
                if (r < 0)
                        return build_fail(b, r, "%s", e ?: strerror(-r));
                made += m;
        }
        progress(b, BUILD_STEP_STORE, b->c->n_paths, b->c->n_paths, NULL);
        *ret_made = made;
        return 0;
}

static int read_diff_id(const char *path, char out[DIGEST_HEX_LEN + 1]) {
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);

        if (fd < 0 || read(fd, out, DIGEST_HEX_LEN) != DIGEST_HEX_LEN)
                return -ENOENT;
        out[DIGEST_HEX_LEN] = 0;
        return strspn(out, "0123456789abcdef") == DIGEST_HEX_LEN ? 0 : -EBADMSG;
}

/* A layer of the given store paths, cached under `key`. */
static int cached_layer(Build *b, const char *key, StorePath **paths, size_t n, ImageLayer *ret) {
        char tar[PATH_MAX], id_file[PATH_MAX];
        _cleanup_free_ LayerTree *trees = calloc(n, sizeof(LayerTree));
        _cleanup_strv_free_ char **dirs = NULL, **names = NULL;
        int r;

        if (!trees)
                return -ENOMEM;
        snprintf(tar, sizeof(tar), "%s/%s." LAYER_FORMAT ".tar", b->cache_layers, key);
        snprintf(id_file, sizeof(id_file), "%s/%s." LAYER_FORMAT ".diffid", b->cache_layers, key);
        ret->path = strdup(tar);
        if (!ret->path)
                return -ENOMEM;
        if (access(tar, R_OK) == 0 && read_diff_id(id_file, ret->diff_id) == 0)
                return 0;

        for (size_t i = 0; i < n; i++) {
                char *d, *nm;
                if (asprintf(&d, "%s/%s", b->cache_store, paths[i]->basename) < 0 || strv_consume(&dirs, d) < 0 ||
                    asprintf(&nm, "nix/store/%s", paths[i]->basename) < 0 || strv_consume(&names, nm) < 0)
                        return -ENOMEM;
        }
        for (size_t i = 0; i < n; i++)
                trees[i] = (LayerTree) { .dir = dirs[i], .name = names[i] };
        b->n_layers_written++;
        r = layer_write(tar, trees, n, ret->diff_id, NULL);
        if (r < 0)
                return build_fail(b, r, "cannot write the layer %s: %s", tar, strerror(-r));
        {
                _cleanup_close_ int fd = open(id_file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
                if (fd < 0 || loop_write(fd, ret->diff_id, DIGEST_HEX_LEN) < 0)
                        return build_fail(b, negative_errno(), "cannot write %s: %m", id_file);
        }
        return 0;
}

static int compare_paths(const void *a, const void *b) {
        const StorePath *x = *(const StorePath *const *) a, *y = *(const StorePath *const *) b;
        /* The biggest own layers first; the small rest share the last one. */
        if (x->total_size != y->total_size)
                return x->total_size > y->total_size ? -1 : 1;
        return strcmp(x->basename, y->basename);
}

static int build_layers(Build *b) {
        _cleanup_free_ StorePath **sorted = calloc(b->c->n_paths + 1, sizeof(StorePath *));
        size_t n = b->c->n_paths, own = n <= MAX_LAYERS - 1 ? n : MAX_LAYERS - 2;
        int r;

        if (!sorted)
                return -ENOMEM;
        memcpy(sorted, b->c->paths, n * sizeof(StorePath *));
        qsort(sorted, n, sizeof(StorePath *), compare_paths);
        b->layers = calloc(MAX_LAYERS + 1, sizeof(ImageLayer));
        if (!b->layers)
                return -ENOMEM;

        for (size_t i = 0; i < own; i++) {
                progress(b, BUILD_STEP_LAYERS, i, n, sorted[i]->name);
                r = cached_layer(b, sorted[i]->basename, &sorted[i], 1, &b->layers[b->n_layers]);
                if (r < 0)
                        return r;
                if (asprintf(&b->layers[b->n_layers].comment, STORE_DIR "/%s", sorted[i]->basename) < 0)
                        return -ENOMEM;
                b->n_layers++;
        }
        if (own < n) {
                /* The rest in one layer, named after what it holds. */
                uint8_t d[32];
                char key[DIGEST_HEX_LEN + 16], hex[DIGEST_HEX_LEN + 1];
                EVP_MD_CTX *ctx = EVP_MD_CTX_new();

                if (!ctx)
                        return -ENOMEM;
                qsort(sorted + own, n - own, sizeof(StorePath *), compare_paths);
                EVP_DigestInit_ex(ctx, EVP_sha256(), NULL);
                for (size_t i = own; i < n; i++)
                        EVP_DigestUpdate(ctx, sorted[i]->basename, strlen(sorted[i]->basename) + 1);
                EVP_DigestFinal_ex(ctx, d, NULL);
                EVP_MD_CTX_free(ctx);
                digest_to_hex(d, hex);
                snprintf(key, sizeof(key), "merged-%s", hex);
                progress(b, BUILD_STEP_LAYERS, own, n, "the rest");
                r = cached_layer(b, key, sorted + own, n - own, &b->layers[b->n_layers]);
                if (r < 0)
                        return r;
                if (asprintf(&b->layers[b->n_layers].comment, "%zu smaller store paths", n - own) < 0)
                        return -ENOMEM;
                b->n_layers++;
        }
        progress(b, BUILD_STEP_LAYERS, n, n, NULL);
        return 0;
}

/* ---- /nix/runtime ----------------------------------------------------------------------- */

static int build_runtime_layer(Build *b) {
        _cleanup_free_ char *root = NULL, *tar = NULL;
        ImageLayer *l = &b->layers[b->n_layers];
        char platform[64];
        int r;

        if (asprintf(&root, "%s/runtime", b->tmp) < 0 || asprintf(&tar, "%s/runtime.tar", b->tmp) < 0)
                return -ENOMEM;
        snprintf(platform, sizeof(platform), "%s/%s%s%s", b->os, b->arch, b->variant ? "/" : "", b->variant ?: "");
        r = runtime_tree_write(&(RuntimeTree) { .c = b->c, .m = b->m, .env = b->env, .platform = platform }, root,
                               &b->error);
        if (r < 0)
                return r;
        r = layer_write(tar, &(LayerTree) { .dir = root, .name = "nix/runtime" }, 1, l->diff_id, NULL);
        if (r < 0)
                return build_fail(b, r, "cannot write the runtime layer: %s", strerror(-r));
        l->path = TAKE_PTR(tar);
        l->comment = strdup("/nix/runtime");
        b->n_layers++;
        return 0;
}

/* ---- image ------------------------------------------------------------------------------ */

static int deliver(Build *b, BundleBuildResult *res) {
        _cleanup_strv_free_ char **tags = NULL, **labels = NULL;
        _cleanup_free_ char *config = NULL, *archive = NULL, *ref = NULL, *e = NULL;
        ImageSpec spec;
        DockerClient *d = NULL;
        int r;

        if (b->o->tag) {
                /* One tag of the caller's, so that a build for tests (say) leaves NAME:VERSION alone. */
                _cleanup_free_ char *repository = NULL, *tag = NULL;

                r = image_ref_split(b->o->tag, &repository, &tag);
                if (r == -EINVAL)
                        return build_fail(b, r, "--tag=%s is not an image name (REPOSITORY[:TAG])", b->o->tag);
                if (r < 0 || asprintf(&ref, "%s:%s", repository, tag) < 0 || strv_consume(&tags, TAKE_PTR(ref)) < 0)
                        return -ENOMEM;
        } else if (asprintf(&ref, "%s:%s", b->m->name, b->m->version) < 0 || strv_consume(&tags, TAKE_PTR(ref)) < 0 ||
                   asprintf(&ref, "%s:latest", b->m->name) < 0 || strv_consume(&tags, TAKE_PTR(ref)) < 0)
                return -ENOMEM;
        if (asprintf(&ref, "org.agentix.bundle=%s", b->m->name) < 0 || strv_consume(&labels, TAKE_PTR(ref)) < 0 ||
            asprintf(&ref, "org.agentix.bundle.version=%s", b->m->version) < 0 ||
            strv_consume(&labels, TAKE_PTR(ref)) < 0 ||
            asprintf(&ref, "org.agentix.runtime.version=%s", AGENTIX_VERSION) < 0 ||
            strv_consume(&labels, TAKE_PTR(ref)) < 0)
                return -ENOMEM;
        if (b->m->description && (asprintf(&ref, "org.opencontainers.image.description=%s", b->m->description) < 0 ||
                                  strv_consume(&labels, TAKE_PTR(ref)) < 0))
                return -ENOMEM;
        spec = (ImageSpec) {
                .os = b->os, .architecture = b->arch, .variant = b->variant,
                .layers = b->layers, .n_layers = b->n_layers,
                .tags = tags, .labels = labels,
                .env = (char *[]) { (char *) "PATH=/nix/runtime/bin", NULL },
        };
        progress(b, BUILD_STEP_IMAGE, 0, 1, NULL);
        r = image_config(&spec, &config, res->id);
        if (r < 0)
                return r;

        if (b->o->output) {
                _cleanup_close_ int fd = -EBADF;
                if (asprintf(&archive, "%s.tmp-%d", b->o->output, (int) getpid()) < 0)
                        return -ENOMEM;
                fd = open(archive, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
                if (fd < 0)
                        return build_fail(b, negative_errno(), "cannot write %s: %m", b->o->output);
                r = image_archive_write(fd, &spec, config, res->id);
                if (r >= 0 && rename(archive, b->o->output) < 0)
                        r = negative_errno();
                if (r < 0) {
                        (void) unlink(archive);
                        return build_fail(b, r, "cannot write %s: %s", b->o->output, strerror(-r));
                }
                progress(b, BUILD_STEP_IMAGE, 1, 1, NULL);
                res->tags = TAKE_PTR(tags);
                return 0;
        }

        r = docker_engine_open(&d, &e);
        if (r < 0)
                return build_fail(b, r, "%s", e ?: strerror(-r));
        if (asprintf(&ref, "sha256:%s", res->id) < 0) {
                docker_client_free(d);
                return -ENOMEM;
        }
        r = docker_image_exists(d, ref, &e);
        if (r == 0) {
                _cleanup_close_ int fd = -EBADF;
                /* Written whole first, so that a failed build never leaves half an image in Docker. */
                if (asprintf(&archive, "%s/image.tar", b->tmp) < 0) {
                        docker_client_free(d);
                        return -ENOMEM;
                }
                fd = open(archive, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
                r = fd < 0 ? negative_errno() : image_archive_write(fd, &spec, config, res->id);
                progress(b, BUILD_STEP_IMAGE, 1, 1, NULL);
                if (r < 0) {
                        docker_client_free(d);
                        return build_fail(b, r, "cannot write the image archive: %s", strerror(-r));
                }
                progress(b, BUILD_STEP_LOAD, 0, 1, NULL);
                r = docker_image_load(d, archive, &e);
                (void) unlink(archive);
                res->loaded = r >= 0;
        } else if (r > 0) {
                /* Docker has this very image: only make sure the tags point at it. */
                for (char **t = tags; r >= 0 && *t; t++) {
                        _cleanup_free_ char *repository = NULL, *tag = NULL;

                        r = image_ref_split(*t, &repository, &tag);
                        if (r >= 0)
                                r = docker_image_tag(d, ref, repository, tag, &e);
                }
        }
        docker_client_free(d);
        if (r < 0)
                return build_fail(b, r, "%s", e ?: strerror(-r));
        progress(b, BUILD_STEP_LOAD, 1, 1, NULL);
        res->tags = TAKE_PTR(tags);
        return 0;
}

/* ---- the whole build -------------------------------------------------------------------- */

/* Scratch left by builds that were killed: .tmp-PID-… in the store, build-PID in tmp/, and
 * *.tmp-PID layers, whose PID no longer runs. */
static void remove_stale(const char *dir, const char *prefix) {
        _cleanup_(closedirp) DIR *d = opendir(dir);
        struct dirent *de;

        while (d && (de = readdir(d))) {
                const char *p = strstr(de->d_name, prefix);
                char path[PATH_MAX];
                long pid;

                if (!p)
                        continue;
                pid = strtol(p + strlen(prefix), NULL, 10);
                if (pid <= 0 || pid == getpid() || kill((pid_t) pid, 0) == 0 || errno != ESRCH)
                        continue;
                snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
                (void) remove_tree(path);
        }
}

static int cache_dirs(Build *b) {
        int r;

        if (asprintf(&b->cache_store, "%s/store", b->o->cache_dir) < 0 ||
            asprintf(&b->cache_layers, "%s/layers", b->o->cache_dir) < 0 ||
            asprintf(&b->cache_hashes, "%s/hashes", b->o->cache_dir) < 0 ||
            asprintf(&b->cache_tmp, "%s/tmp", b->o->cache_dir) < 0 ||
            asprintf(&b->tmp, "%s/tmp/build-%d", b->o->cache_dir, (int) getpid()) < 0)
                return -ENOMEM;
        for (char *const *d = (char *const[]) { b->cache_store, b->cache_layers, b->cache_hashes, b->tmp, NULL }; *d; d++) {
                r = mkdir_parents(*d);
                if (r < 0)
                        return build_fail(b, r, "cannot create the cache directory %s: %s", *d, strerror(-r));
        }
        r = cache_lock(b->o->cache_dir, false, &b->cache_lock);
        if (r == -EBUSY)
                return build_fail(b, r, "the cache %s is being collected (agentixctl build --gc): try again once that is done",
                                  b->o->cache_dir);
        if (r < 0)
                return build_fail(b, r, "cannot lock the cache %s: %s", b->o->cache_dir, strerror(-r));
        remove_stale(b->cache_store, ".tmp-");
        remove_stale(b->cache_tmp, "build-");
        remove_stale(b->cache_layers, ".tmp-");
        remove_stale(b->cache_hashes, ".tmp-");
        return 0;
}

/* What this build used, for the next collection to keep (cache-gc.c). */
static int record_roots(Build *b) {
        _cleanup_strv_free_ char **store = NULL, **layers = NULL;
        char platform[64], key[PATH_MAX];
        size_t n = strlen(b->cache_layers), suffix = STRLEN("." LAYER_FORMAT ".tar");
        int r;

        for (size_t i = 0; i < b->c->n_paths; i++)
                if (strv_extend(&store, b->c->paths[i]->basename) < 0)
                        return -ENOMEM;
        for (size_t i = 0; i < b->n_layers; i++) {
                const char *p = b->layers[i].path;
                size_t len = p ? strlen(p) : 0;
                /* Cached layers are CACHE/layers/KEY.l1.tar; the runtime layer is this build's own. */
                if (len <= n + 1 + suffix || !strneq(p, b->cache_layers, n) || p[n] != '/')
                        continue;
                snprintf(key, sizeof(key), "%.*s", (int) (len - n - 1 - suffix), p + n + 1);
                if (strv_extend(&layers, key) < 0)
                        return -ENOMEM;
        }
        snprintf(platform, sizeof(platform), "%s-%s%s%s", b->os, b->arch, b->variant ? "-" : "", b->variant ?: "");
        r = cache_record_build(b->o->cache_dir, b->m->name, b->m->version, platform, store, layers);
        if (r < 0)
                return build_fail(b, r, "cannot record what the build used in %s/roots: %s", b->o->cache_dir,
                                  strerror(-r));
        return 0;
}

static void build_done(Build *b) {
        safe_close(b->cache_lock);
        if (b->tmp)
                (void) remove_tree(b->tmp);
        for (size_t i = 0; i < b->n_layers; i++) {
                free(b->layers[i].path);
                free(b->layers[i].comment);
        }
        free(b->layers);
        closure_free(b->c);
        dpkg_db_free(b->db);
        bundle_manifest_free(b->m);
        strv_free(b->env);
        free(b->os);
        free(b->arch);
        free(b->variant);
        free(b->cache_store);
        free(b->cache_layers);
        free(b->cache_hashes);
        free(b->cache_tmp);
        free(b->tmp);
}

int bundle_build(const BundleBuildOptions *o, BundleBuildResult *res, char **ret_error) {
        Build b = { .o = o, .cache_lock = -EBADF };
        uint16_t machine = 0;
        size_t made = 0;
        int r;

        *res = (BundleBuildResult) {};
        *ret_error = NULL;
        r = bundle_manifest_load(o->manifest, &b.m, &b.error);
        if (r < 0)
                goto finish;
        r = dpkg_db_load(&b.db);
        if (r == -ENOENT) {
                r = build_fail(&b, r, "dpkg-query is not there: agentixctl build takes tools from a Debian host's packages");
                goto finish;
        }
        if (r < 0) {
                r = build_fail(&b, r, "cannot read the package database: %s", strerror(-r));
                goto finish;
        }
        r = check_platform(&b, o->platform ?: b.m->platform, &machine);
        if (r < 0)
                goto finish;
        r = cache_dirs(&b);
        if (r < 0)
                goto finish;
        r = closure_new(b.db, machine, &b.c);
        if (r < 0)
                goto finish;
        r = collect(&b);
        if (r < 0)
                goto finish;
        r = runtime_environment(b.c, b.m->environment, &b.env);
        if (r < 0)
                goto finish;
        r = build_store(&b, &made);
        if (r < 0)
                goto finish;
        r = build_layers(&b);
        if (r < 0)
                goto finish;
        r = build_runtime_layer(&b);
        if (r < 0)
                goto finish;
        r = deliver(&b, res);
        if (r < 0)
                goto finish;
        r = record_roots(&b);
        if (r < 0)
                goto finish;

        res->name = strdup(b.m->name);
        res->version = strdup(b.m->version);
        res->n_store_paths = b.c->n_paths;
        res->n_layers = b.n_layers;
        res->n_made = made;
        res->n_hashed = b.n_hashed;
        res->n_layers_written = b.n_layers_written;
        res->n_warnings = b.c->n_warnings;
        for (size_t i = 0; i < b.c->n_paths; i++)
                res->size += b.c->paths[i]->total_size;
finish:
        if (r < 0 && !b.error)
                b.error = strdup(strerror(-r));
        if (r < 0)
                *ret_error = TAKE_PTR(b.error);
        free(b.error);
        build_done(&b);
        return r;
}

void bundle_build_result_done(BundleBuildResult *r) {
        strv_free(r->tags);
        free(r->name);
        free(r->version);
        *r = (BundleBuildResult) {};
}

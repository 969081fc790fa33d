/* SPDX-License-Identifier: MIT */
#include <dirent.h>
#include <fcntl.h>
#include <glob.h>
#include <libgen.h>
#include <limits.h>
#include <stdarg.h>
#include <sys/stat.h>

#include "closure.h"
#include "log.h"

/* What a sandbox never reads: documentation, translations, bug-reporting and lintian data. */
static const char *const excluded_prefixes[] = {
        "/usr/share/doc/", "/usr/share/doc-base/", "/usr/share/man/", "/usr/share/info/",
        "/usr/share/lintian/", "/usr/share/bug/", "/usr/share/locale/", "/usr/share/menu/",
};

/* Packages that only install and configure others: no program in a sandbox runs them. Taken
 * when named, never as a dependency. */
static const char *const maintainer_only_packages[] = {
        "adduser", "debconf", "dpkg", "init-system-helpers", "install-info", "sensible-utils", "ucf",
};

static bool is_maintainer_only(const char *name) {
        for (size_t i = 0; i < ELEMENTSOF(maintainer_only_packages); i++)
                if (streq(maintainer_only_packages[i], name))
                        return true;
        return false;
}

#define closure_fail(c, r, ...) message_set_first(&(c)->error, (r), __VA_ARGS__)

static int read_ld_so_conf(char ***dirs) {
        glob_t g = {};
        int r = 0;

        if (glob("/etc/ld.so.conf.d/*.conf", 0, NULL, &g) == 0)
                for (size_t i = 0; i < g.gl_pathc && r >= 0; i++) {
                        _cleanup_fclose_ FILE *f = fopen(g.gl_pathv[i], "re");
                        _cleanup_free_ char *line = NULL;
                        size_t size = 0;

                        while (f && r >= 0 && getline(&line, &size, f) > 0) {
                                line[strcspn(line, "\n#")] = 0;
                                if (line[0] == '/' && !strv_contains(*dirs, line))
                                        r = strv_extend(dirs, line);
                        }
                }
        globfree(&g);
        for (const char *const *d = (const char *const[]) { "/lib", "/usr/lib", NULL }; *d && r >= 0; d++)
                if (!strv_contains(*dirs, *d))
                        r = strv_extend(dirs, *d);
        return r;
}

int closure_new(DpkgDb *db, uint16_t machine, Closure **ret) {
        _cleanup_(closure_freep) Closure *c = calloc(1, sizeof(Closure));
        int r;

        if (!c)
                return -ENOMEM;
        c->db = db;
        c->machine = machine;
        c->by_source = strmap_new();
        c->packages = strmap_new();
        c->link_paths = strmap_new();
        if (!c->by_source || !c->packages || !c->link_paths)
                return -ENOMEM;
        r = read_ld_so_conf(&c->lib_dirs);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(c);
        return 0;
}

Closure *closure_free(Closure *c) {
        if (!c)
                return NULL;
        for (size_t i = 0; i < c->n_paths; i++)
                store_path_free(c->paths[i]);
        free(c->paths);
        strmap_free(c->by_source);
        strmap_free(c->packages);
        strmap_free(c->link_paths);
        for (size_t i = 0; i < c->n_links; i++) {
                free(c->links[i].path);
                free(c->links[i].target.dest);
        }
        free(c->links);
        strv_free(c->lib_dirs);
        strv_free(c->companions);
        free(c->interpreter.dest);
        free(c->error);
        free(c);
        return NULL;
}

StorePath *closure_find_source(Closure *c, const char *source) {
        return strmap_get(c->by_source, source, strlen(source));
}

static int closure_push(Closure *c, StorePath *sp) {
        StorePath **p = realloc(c->paths, (c->n_paths + 1) * sizeof(StorePath *));

        if (!p)
                return -ENOMEM;
        c->paths = p;
        c->paths[c->n_paths++] = sp;
        return 0;
}

/* "/usr/bin/x" -> "bin/x", "/etc/x" -> "etc/x": where a canonical host path goes in a store
 * path (the Nix layout: no usr/). */
static const char *dest_of(const char *canonical) {
        if (strneq(canonical, "/usr/", 5))
                return canonical + 5;
        return canonical + 1;
}

static bool is_excluded(const char *canonical) {
        for (size_t i = 0; i < ELEMENTSOF(excluded_prefixes); i++)
                if (strneq(canonical, excluded_prefixes[i], strlen(excluded_prefixes[i])))
                        return true;
        return false;
}

int closure_add_runtime_link(Closure *c, const char *path, StorePath *sp, const char *dest) {
        RuntimeLink *l;

        if (strmap_get(c->link_paths, path, strlen(path)))
                return 0; /* the first one wins: tools named first, then dependencies */
        l = realloc(c->links, (c->n_links + 1) * sizeof(RuntimeLink));
        if (!l)
                return -ENOMEM;
        c->links = l;
        l = &c->links[c->n_links];
        *l = (RuntimeLink) { .path = strdup(path), .target = { .path = sp, .dest = strdup(dest) } };
        if (!l->path || !l->target.dest) {
                free(l->path);
                free(l->target.dest);
                return -ENOMEM;
        }
        c->n_links++;
        /* The key is the string, which stays where it is when the array moves. */
        return strmap_put(c->link_paths, l->path, strlen(path), (void *) (uintptr_t) c->n_links);
}

static int add_bin_link(Closure *c, const char *name, StorePath *sp, const char *dest) {
        _cleanup_free_ char *path = NULL;

        if (asprintf(&path, "bin/%s", name) < 0)
                return -ENOMEM;
        return closure_add_runtime_link(c, path, sp, dest);
}

static int link_bins(Closure *c, StorePath *sp, size_t from) {
        for (size_t i = from; i < sp->n_files; i++) {
                const char *d = sp->files[i].dest, *name;
                int r;

                if (!strneq(d, "bin/", 4) && !strneq(d, "sbin/", 5))
                        continue;
                name = strchr(d, '/') + 1;
                if (strchr(name, '/'))
                        continue;
                r = add_bin_link(c, name, sp, d);
                if (r < 0)
                        return r;
        }
        return 0;
}

static int take_package(Closure *c, DebPackage *p, bool link) {
        StorePath *sp;
        char *pkg;
        size_t first;
        int r;

        if (strmap_get(c->packages, p->name, strlen(p->name)))
                return 0;
        r = strmap_put(c->packages, p->name, strlen(p->name), p);
        if (r < 0)
                return r;

        sp = closure_find_source(c, p->source);
        if (!sp) {
                sp = store_path_new(p->source, p->source_version);
                if (!sp)
                        return -ENOMEM;
                sp->source_package = strdup(p->source);
                r = sp->source_package ? closure_push(c, sp) : -ENOMEM;
                if (r < 0) {
                        store_path_free(sp);
                        return r;
                }
                r = strmap_put(c->by_source, sp->source_package, strlen(sp->source_package), sp);
                if (r < 0)
                        return r;
        }
        if (asprintf(&pkg, "%s=%s", p->name, p->version) < 0)
                return -ENOMEM;
        r = strv_consume(&sp->packages, pkg);
        if (r < 0)
                return r;

        r = dpkg_db_load_files(c->db, p);
        if (r == -ENOENT)
                return closure_fail(c, r, "the file list of package '%s' is missing (reinstall it)", p->name);
        if (r < 0)
                return r;
        first = sp->n_files;
        for (char **f = p->files; *f; f++) {
                if (is_excluded(*f))
                        continue;
                r = store_path_add_file(sp, *f, dest_of(*f));
                if (r == -EISDIR || r == -ENOENT) /* directories; files removed by a dpkg path-exclude */
                        continue;
                if (r < 0)
                        return closure_fail(c, r, "cannot read %s of package %s: %s", *f, p->name, strerror(-r));
        }
        return link ? link_bins(c, sp, first) : 0;
}

int closure_add_package(Closure *c, const char *name, char *const *exclude) {
        _cleanup_free_ DebPackage **queue = NULL;
        size_t n = 0, cap = 0;
        DebPackage *p;
        int r;

        p = dpkg_db_find(c->db, name);
        if (!p)
                return closure_fail(c, -ENOPKG, "package '%s' is not installed on the build host (apt-get install %s)",
                                    name, name);
        /* Breadth first, so that a tool's own programs win /nix/runtime/bin over its dependencies'. */
        cap = 16;
        queue = calloc(cap, sizeof(DebPackage *));
        if (!queue)
                return -ENOMEM;
        if (strmap_get(c->packages, p->name, strlen(p->name)))
                return 0;
        queue[n++] = p;
        for (size_t i = 0; i < n; i++) {
                _cleanup_free_ DebPackage **deps = NULL;
                _cleanup_free_ char *missing = NULL;

                r = take_package(c, queue[i], true);
                if (r < 0)
                        return r;
                r = dpkg_db_dependencies(c->db, queue[i], &deps, &missing);
                if (r == -ENOPKG)
                        return closure_fail(c, r, "package '%s' needs '%s', which is not installed on the build host",
                                            queue[i]->name, missing);
                if (r < 0)
                        return r;
                for (DebPackage **d = deps; *d; d++) {
                        bool queued = false;

                        if ((*d)->essential || is_maintainer_only((*d)->name) || strv_contains(exclude, (*d)->name) ||
                            strmap_get(c->packages, (*d)->name, strlen((*d)->name)))
                                continue;
                        for (size_t j = 0; j < n && !queued; j++)
                                queued = queue[j] == *d;
                        if (queued)
                                continue;
                        if (n == cap) {
                                DebPackage **q = realloc(queue, 2 * cap * sizeof(DebPackage *));
                                if (!q)
                                        return -ENOMEM;
                                queue = q;
                                cap *= 2;
                        }
                        queue[n++] = *d;
                }
        }
        return 0;
}

static int add_loose(Closure *c, const char *name, const char *version, char *const *files, char *const *dests,
                     bool link, StorePath **ret) {
        StorePath *sp = store_path_new(name, version);
        int r;

        if (!sp)
                return -ENOMEM;
        r = closure_push(c, sp);
        if (r < 0) {
                store_path_free(sp);
                return r;
        }
        sp->required = true;
        for (size_t i = 0; files[i]; i++) {
                r = store_path_add_file(sp, files[i], dests[i]);
                if (r < 0)
                        return closure_fail(c, r, "cannot read %s: %s", files[i], strerror(-r));
        }
        if (link) {
                r = link_bins(c, sp, 0);
                if (r < 0)
                        return r;
        }
        if (ret)
                *ret = sp;
        return 0;
}

int closure_add_component(Closure *c, const char *name, const char *version, char *const *files,
                          char *const *dests, StorePath **ret) {
        return add_loose(c, name, version, files, dests, true, ret);
}

int closure_add_program(Closure *c, const char *path) {
        _cleanup_free_ char *canonical = NULL, *dest = NULL;
        char buf[PATH_MAX], *base;
        DebPackage *p;
        StorePath *sp;
        int r;

        if (access(path, X_OK) < 0)
                return closure_fail(c, negative_errno(), "program %s: %m", path);
        r = dpkg_canonical_path(c->db, path, &canonical);
        if (r < 0)
                return r;
        snprintf(buf, sizeof(buf), "%s", path);
        base = basename(buf);
        p = dpkg_db_owner(c->db, canonical);
        if (p) {
                r = take_package(c, p, false);
                if (r < 0)
                        return r;
                sp = closure_find_source(c, p->source);
                if (!store_path_find(sp, dest_of(canonical)))
                        return closure_fail(c, -ENOENT, "program %s: not found in package %s", path, p->name);
                return add_bin_link(c, base, sp, dest_of(canonical));
        }
        /* Not from a package (/usr/local/bin/…): the file alone, with the libraries it needs. */
        if (asprintf(&dest, "bin/%s", base) < 0)
                return -ENOMEM;
        r = add_loose(c, base, "local", (char *[]) { (char *) path, NULL }, (char *[]) { dest, NULL }, true, &sp);
        return r;
}

/* ---- resolving -------------------------------------------------------------------------- */

/* Where a host file is in the closure: the store path of the package that owns it (taking the
 * package when `take` and it is not there yet). */
static int locate(Closure *c, const char *host_path, bool take, StoreRef *ret) {
        _cleanup_free_ char *canonical = NULL;
        DebPackage *p;
        StorePath *sp;
        int r;

        r = dpkg_canonical_path(c->db, host_path, &canonical);
        if (r < 0)
                return r;
        p = dpkg_db_owner(c->db, canonical);
        if (!p)
                return -ENOENT;
        if (!strmap_get(c->packages, p->name, strlen(p->name))) {
                if (!take)
                        return -ENOENT;
                r = take_package(c, p, false);
                if (r < 0)
                        return r;
        }
        sp = closure_find_source(c, p->source);
        if (!store_path_find(sp, dest_of(canonical)))
                return -ENOENT;
        *ret = (StoreRef) { .path = sp, .dest = strdup(dest_of(canonical)) };
        return ret->dest ? 0 : -ENOMEM;
}

/* A library by soname, searched as ld.so does: the object's own RUNPATH, then the default
 * directories. Returns the host path. */
static int find_library(Closure *c, const StoreFile *f, const char *soname, char **ret) {
        _cleanup_free_ char *origin = strdup(f->source);
        char candidate[PATH_MAX];

        if (!origin)
                return -ENOMEM;
        *strrchr(origin, '/') = 0;
        for (char **d = f->elf ? f->elf->search_path : NULL; d && *d; d++) {
                const char *dir = *d, *rest = NULL;

                if (strneq(dir, "$ORIGIN", 7))
                        rest = dir + 7;
                else if (strneq(dir, "${ORIGIN}", 9))
                        rest = dir + 9;
                if (rest)
                        snprintf(candidate, sizeof(candidate), "%s%s/%s", origin, rest, soname);
                else
                        snprintf(candidate, sizeof(candidate), "%s/%s", dir, soname);
                if (access(candidate, F_OK) == 0)
                        return (*ret = strdup(candidate)) ? 0 : -ENOMEM;
        }
        for (char **d = c->lib_dirs; *d; d++) {
                snprintf(candidate, sizeof(candidate), "%s/%s", *d, soname);
                if (access(candidate, F_OK) == 0)
                        return (*ret = strdup(candidate)) ? 0 : -ENOMEM;
        }
        return -ENOENT;
}

static int add_lib_dir(StorePath *sp, StoreFile *f, const StoreRef *lib) {
        _cleanup_free_ char *dir = strdup(lib->dest);
        StoreRef *l;
        char *slash;

        if (!dir)
                return -ENOMEM;
        slash = strrchr(dir, '/');
        if (slash)
                *slash = 0;
        for (size_t i = 0; i < f->n_lib_dirs; i++)
                if (f->lib_dirs[i].path == lib->path && streq(f->lib_dirs[i].dest, dir))
                        return 0;
        l = realloc(f->lib_dirs, (f->n_lib_dirs + 1) * sizeof(StoreRef));
        if (!l)
                return -ENOMEM;
        f->lib_dirs = l;
        f->lib_dirs[f->n_lib_dirs++] = (StoreRef) { .path = lib->path, .dest = TAKE_PTR(dir) };
        return store_path_add_ref(sp, lib->path);
}

/* A library not from any package (/usr/local/lib/…): a store path of its own. */
static int locate_loose_library(Closure *c, const char *host_path, const char *soname, StoreRef *ret) {
        _cleanup_free_ char *dest = NULL;
        StorePath *sp = NULL;

        for (size_t i = 0; i < c->n_paths; i++)
                if (!c->paths[i]->source_package && c->paths[i]->n_files == 1 &&
                    streq(c->paths[i]->files[0].source, host_path))
                        sp = c->paths[i];
        if (!sp) {
                if (asprintf(&dest, "lib/%s", soname) < 0)
                        return -ENOMEM;
                int r = add_loose(c, soname, "local", (char *[]) { (char *) host_path, NULL }, (char *[]) { dest, NULL },
                                  false, &sp);
                if (r < 0)
                        return r;
        }
        *ret = (StoreRef) { .path = sp, .dest = strdup(sp->files[0].dest) };
        return ret->dest ? 0 : -ENOMEM;
}

/* File j of sp needs soname. Taking its package may grow sp->files: f is fetched again after. */
static int resolve_library(Closure *c, StorePath *sp, size_t j, const char *soname, bool optional) {
        _cleanup_free_ char *host = NULL;
        StoreRef lib = {};
        int r;

        r = find_library(c, &sp->files[j], soname, &host);
        if (r == -ENOENT) {
                if (optional)
                        return 0;
                if (sp->required)
                        return closure_fail(c, -ENOENT, "%s needs %s, which is not on the build host",
                                            sp->files[j].source, soname);
                log_debug("%s needs %s, which is not on the build host: left out", sp->files[j].source, soname);
                c->n_warnings++;
                return 0;
        }
        if (r < 0)
                return r;
        r = locate(c, host, true, &lib);
        if (r == -ENOENT)
                r = locate_loose_library(c, host, soname, &lib);
        if (r < 0)
                return r;
        r = add_lib_dir(sp, &sp->files[j], &lib);
        free(lib.dest);
        return r;
}

static int scan_elf(Closure *c, StorePath *sp, size_t j) {
        StoreFile *f = &sp->files[j];
        _cleanup_close_ int fd = -EBADF;
        _cleanup_free_ char *dest = NULL;
        ElfDeps *e = NULL;
        int r;

        f->scanned = true;
        if (!S_ISREG(f->mode) || f->size < 64)
                return 0;
        fd = open(f->source, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0)
                return closure_fail(c, negative_errno(), "cannot read %s: %m", f->source);
        r = elf_deps_read(fd, &e);
        if (r == -ENOEXEC || r == -EBADMSG)
                return 0;
        if (r < 0)
                return closure_fail(c, r, "cannot read the ELF file %s: %s", f->source, strerror(-r));
        if (e->machine != c->machine || !e->dynamic) {
                elf_deps_free(e);
                return 0; /* another architecture's file, or a static program: used as it is */
        }
        f->elf = e;

        if (e->interpreter) {
                char real[PATH_MAX];

                if (!realpath(e->interpreter, real))
                        return closure_fail(c, -ENOENT, "%s needs the loader %s, which is not on the build host",
                                            f->source, e->interpreter);
                StoreRef interp = {};
                r = locate(c, real, true, &interp);
                if (r < 0)
                        return closure_fail(c, r, "%s: its loader %s belongs to no installed package",
                                            sp->files[j].source, real);
                sp->files[j].interpreter = interp;
                r = store_path_add_ref(sp, interp.path);
                if (r < 0)
                        return r;
                if (!c->interpreter.path) {
                        c->interpreter.path = interp.path;
                        c->interpreter.dest = strdup(interp.dest);
                }
        }
        for (char **n = e->needed; n && *n; n++) {
                r = resolve_library(c, sp, j, *n, false);
                if (r < 0)
                        return r;
        }
        /* glibc loads libgcc_s with dlopen() (thread cancellation, unwinding): from the store too. */
        dest = strdup(sp->files[j].dest);
        if (!dest)
                return -ENOMEM;
        if (strneq(strrchr(dest, '/') ?: dest, "/libc.so.", 9))
                return resolve_library(c, sp, j, "libgcc_s.so.1", true);
        return 0;
}

static int resolve_link(Closure *c, StorePath *sp, StoreFile *f) {
        _cleanup_free_ char *joined = NULL, *canonical = NULL;
        char real[PATH_MAX];
        int r;

        if (f->link_target[0] == '/')
                joined = strdup(f->link_target);
        else {
                _cleanup_free_ char *dir = strdup(f->source);
                if (dir)
                        *strrchr(dir, '/') = 0;
                if (!dir || asprintf(&joined, "%s/%s", dir, f->link_target) < 0)
                        joined = NULL;
        }
        if (!joined)
                return -ENOMEM;
        r = dpkg_canonical_path(c->db, joined, &canonical);
        if (r < 0)
                return r;

        /* Inside the same store path (a file, or a directory of its files). */
        if (store_path_find(sp, dest_of(canonical))) {
                f->link = (StoreRef) { .path = sp, .dest = strdup(dest_of(canonical)) };
                return f->link.dest ? 0 : -ENOMEM;
        }
        r = locate(c, canonical, false, &f->link);
        if (r == 0)
                return store_path_add_ref(sp, f->link.path);
        /* Through the host's links (/etc/alternatives/…) to a file the closure has. */
        if (realpath(canonical, real)) {
                _cleanup_free_ char *canonical_real = NULL;

                r = dpkg_canonical_path(c->db, real, &canonical_real);
                if (r < 0)
                        return r;
                if (store_path_find(sp, dest_of(canonical_real))) {
                        f->link = (StoreRef) { .path = sp, .dest = strdup(dest_of(canonical_real)) };
                        return f->link.dest ? 0 : -ENOMEM;
                }
                if (locate(c, canonical_real, false, &f->link) == 0)
                        return store_path_add_ref(sp, f->link.path);
        }
        /* A link to something the bundle does not hold (documentation, a directory): dropped. */
        f->link = (StoreRef) {};
        return 0;
}

int closure_add_companion(Closure *c, const char *source, const char *package) {
        int r = strv_extend(&c->companions, source);

        return r < 0 ? r : strv_extend(&c->companions, package);
}

/* Take the companions of the sources the closure holds. Returns > 0 when it took any. */
static int take_companions(Closure *c) {
        int taken = 0;

        for (char **s = c->companions; s && s[0] && s[1]; s += 2) {
                DebPackage *p = dpkg_db_find(c->db, s[1]);
                int r;

                if (!p || !closure_find_source(c, s[0]) || strmap_get(c->packages, p->name, strlen(p->name)))
                        continue;
                r = take_package(c, p, true);
                if (r < 0)
                        return r;
                taken = 1;
        }
        return taken;
}

int closure_resolve(Closure *c) {
        bool changed = true;
        int r;

        /* Reading an ELF file can take a package, which brings more files (and companions): until
         * nothing is new. */
        while (changed) {
                r = take_companions(c);
                if (r < 0)
                        return r;
                changed = r > 0;
                for (size_t i = 0; i < c->n_paths; i++)
                        for (size_t j = 0; j < c->paths[i]->n_files; j++) {
                                if (c->paths[i]->files[j].scanned)
                                        continue;
                                changed = true;
                                r = scan_elf(c, c->paths[i], j);
                                if (r < 0)
                                        return r;
                        }
        }
        if (!c->interpreter.path)
                return closure_fail(c, -ENOENT, "no program in the bundle needs a dynamic loader; nothing to run");
        for (size_t i = 0; i < c->n_paths; i++)
                for (size_t j = 0; j < c->paths[i]->n_files; j++) {
                        StoreFile *f = &c->paths[i]->files[j];
                        if (!S_ISLNK(f->mode))
                                continue;
                        r = resolve_link(c, c->paths[i], f);
                        if (r < 0)
                                return r;
                }
        return 0;
}

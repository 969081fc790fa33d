/* SPDX-License-Identifier: MIT */
#pragma once

/* The closure of a bundle: every store path it needs — the tools' Debian packages with their
 * dependencies (grouped by source package), the libraries every ELF object needs (read from
 * the ELF files, found as the dynamic loader would), glibc with its loader, the agentix
 * runtime and the project's modules — and how each file points into the others. */

#include "dpkg-db.h"
#include "store-path.h"

typedef struct RuntimeLink {
        char *path;               /* relative to /nix/runtime: "bin/bash" */
        StoreRef target;
} RuntimeLink;

typedef struct Closure {
        DpkgDb *db;
        StorePath **paths;
        size_t n_paths;
        StrMap *by_source;        /* Debian source package -> StorePath */
        StrMap *packages;         /* binary packages taken -> DebPackage */
        char **lib_dirs;          /* the loader's default directories on the build host */
        uint16_t machine;         /* ELF machine of the bundle */
        RuntimeLink *links;       /* /nix/runtime/bin/…, and what else the runtime points at */
        size_t n_links;
        StrMap *link_paths;
        StoreRef interpreter;     /* glibc's loader in the store */
        char **companions;        /* source, package, source, package, …: see closure_add_companion() */
        char *error;              /* why the last call failed, for a person */
        unsigned n_warnings;
} Closure;

int closure_new(DpkgDb *db, uint16_t machine, Closure **ret);
Closure *closure_free(Closure *c);
DEFINE_TRIVIAL_CLEANUP_FUNC(Closure *, closure_free);

/* A tool by Debian package (real or virtual), with what it depends on, except packages that are
 * Essential (every Debian system has them; name them to take them) and those in `exclude`. */
int closure_add_package(Closure *c, const char *name, char *const *exclude);
/* A program by path: its package when one owns it, else the file alone. */
int closure_add_program(Closure *c, const char *path);
/* A component that is not a Debian package: files[i] (host path) at dests[i]. Its ELF files'
 * missing libraries are errors. Links every bin/ file into /nix/runtime/bin. */
int closure_add_component(Closure *c, const char *name, const char *version, char *const *files,
                          char *const *dests, StorePath **ret);

/* Whenever the closure holds the Debian source package `source`, take `package` too (when it is
 * installed): data that the source's libraries read at run time but no ELF file names
 * (ncurses' terminfo, glibc's C.UTF-8 locale, libwebsockets' event-loop plugins). */
int closure_add_companion(Closure *c, const char *source, const char *package);

/* Read every ELF object, take the packages of the libraries they need, and resolve every
 * symlink. Call after adding everything. */
int closure_resolve(Closure *c);

/* Link /nix/runtime/<path> to dest in sp, unless something is linked there already (0). */
int closure_add_runtime_link(Closure *c, const char *path, StorePath *sp, const char *dest);

/* The store path holding a Debian source package, or NULL. */
StorePath *closure_find_source(Closure *c, const char *source);

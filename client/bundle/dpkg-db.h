/* SPDX-License-Identifier: MIT */
#pragma once

/* The build host's installed Debian packages, as dpkg knows them: names, versions, source
 * packages, dependencies, and which package owns which file. Tools come into a bundle as the
 * packages that provide them. */

#include <stdbool.h>

#include "strmap.h"
#include "strv.h"

typedef struct DebPackage {
        char *name, *arch, *version;
        char *source, *source_version;
        bool essential;
        char **provides;     /* virtual package names */
        char *depends;       /* Pre-Depends and Depends, as dpkg writes them */
        char **files;        /* canonical paths from its file list; loaded by dpkg_db_load_files() */
} DebPackage;

typedef struct DpkgDb {
        DebPackage *packages;
        size_t n_packages;
        char *arch;          /* dpkg --print-architecture */
        bool merged_usr;     /* /lib is a link to usr/lib */
        StrMap *by_name;     /* installed name -> DebPackage */
        StrMap *providers;   /* virtual name -> the first installed provider, by name */
        StrMap *owners;      /* canonical path -> DebPackage, once every file list was read */
} DpkgDb;

/* Query dpkg. -ENOENT: dpkg-query is not there (not a Debian host). */
int dpkg_db_load(DpkgDb **ret);
DpkgDb *dpkg_db_free(DpkgDb *db);
DEFINE_TRIVIAL_CLEANUP_FUNC(DpkgDb *, dpkg_db_free);

/* An installed package by name, or the installed package that provides a virtual one. */
DebPackage *dpkg_db_find(DpkgDb *db, const char *name);

/* The package's files (p->files), once. */
int dpkg_db_load_files(DpkgDb *db, DebPackage *p);

/* The package owning a file (any path form; it is made canonical first); NULL when none does.
 * The first call reads every package's file list. */
DebPackage *dpkg_db_owner(DpkgDb *db, const char *path);

/* A path as the file lists are indexed: with merged /usr, /bin, /sbin, /lib* are spelled
 * /usr/bin, /usr/sbin, /usr/lib*. "." and ".." components and repeated slashes are resolved
 * lexically. */
int dpkg_canonical_path(const DpkgDb *db, const char *path, char **ret);

/* The packages p depends on (Pre-Depends and Depends), each group's first installed
 * alternative. A group with no installed alternative: -ENOPKG, with the group written to
 * *ret_missing. */
int dpkg_db_dependencies(DpkgDb *db, DebPackage *p, DebPackage ***ret, char **ret_missing);

/* SPDX-License-Identifier: MIT */
#pragma once

/* A project's bundle manifest, agentix-bundle.conf: what code a bundle holds. A key-file in the
 * style of systemd units, read with inih; the format is agentix-bundle(5). */

#include <stddef.h>
#include <stdio.h>

#include "strv.h"

typedef struct BundleModule {
        char *name;      /* the module's name: NAME.so in the module directory */
        char **sources;  /* C sources to compile (relative to the manifest's directory), or */
        char *file;      /* a shared object built elsewhere */
        char *cflags;    /* extra compiler flags, split on blanks */
        char **pkg_config; /* pkg-config packages whose cflags and libs the build uses */
} BundleModule;

typedef struct BundleCopy {
        char *source;    /* relative to the manifest's directory */
        char *dest;      /* relative to /nix/runtime */
} BundleCopy;

typedef struct BundleManifest {
        char *path;      /* the manifest file */
        char *dir;       /* its directory: relative paths start here */
        char *name, *version, *description, *platform;
        char **packages, **programs, **exclude_packages; /* NULL-terminated */
        BundleModule *modules;
        size_t n_modules;
        BundleCopy *copies;
        size_t n_copies;
        char **environment; /* KEY=VALUE, in order */
} BundleManifest;

/* Read and check `path`. On failure a one-line error naming the file and line goes to ret_error
 * (malloc'ed) and a negative errno is returned: -ENOENT when the file is missing, -EINVAL when
 * it is wrong. */
int bundle_manifest_load(const char *path, BundleManifest **ret, char **ret_error);
/* The same, from an open file (seekable); path names it in errors. */
int bundle_manifest_parse(FILE *f, const char *path, BundleManifest **ret, char **ret_error);
BundleManifest *bundle_manifest_free(BundleManifest *m);

/* Names allowed for a bundle (a Docker repository name component) and a module. */
bool bundle_name_is_valid(const char *s);
bool bundle_version_is_valid(const char *s);

DEFINE_TRIVIAL_CLEANUP_FUNC(BundleManifest *, bundle_manifest_free);

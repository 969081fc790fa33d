/* SPDX-License-Identifier: MIT */
#pragma once

/* A store path: one component of a bundle (a Debian source package's installed files, the
 * agentix runtime, a module, a program), copied into /nix/store/<hash>-<name>-<version> with
 * its ELF interpreter, library search paths and symlinks pointing into the store. */

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "elf-deps.h"
#include "strmap.h"
#include "strv.h"

#define STORE_DIR "/nix/store"
#define STORE_HASH_LEN 32

typedef struct StorePath StorePath;

typedef struct StoreRef {
        StorePath *path;
        char *dest;               /* a file or directory inside it */
} StoreRef;

/* A path written in a text file (Python source) that names a file of the bundle where the
 * build host had it: replaced, quotes kept, by where it is in the store. */
typedef struct TextRewrite {
        char *from;               /* "/usr/share/zoneinfo" */
        StoreRef to;              /* the store path and the dest in it */
} TextRewrite;

typedef struct StoreFile {
        char *dest;               /* inside the store path: "bin/bash" */
        char *source;             /* the file on the build host */
        mode_t mode;              /* lstat() of the source */
        uint64_t size;
        char *link_target;        /* symlinks: as on the host */
        StoreRef link;            /* symlinks: what it points at in the store (path NULL: dropped) */
        bool scanned;             /* ELF examined */
        ElfDeps *elf;             /* dynamic ELF objects of the bundle's machine */
        StoreRef interpreter;     /* executables: the loader in the store */
        StoreRef *lib_dirs;       /* directories of the libraries it needs */
        size_t n_lib_dirs;
        char *rewrite_from;       /* a compiled-in path (NUL-terminated in the file) replaced by */
        char *rewrite_to;         /* this one, no longer, padded with NULs */
        TextRewrite *text_rewrites; /* text files: paths replaced, of any length */
        size_t n_text_rewrites;
} StoreFile;

struct StorePath {
        char *name, *version;     /* store-safe spellings */
        char *source_package;     /* Debian source package, NULL for other components */
        char **packages;          /* "binary-package=version" it holds */
        StoreFile *files;
        size_t n_files;
        StrMap *by_dest;          /* dest -> index+1 into files (as a pointer-sized integer) */
        StorePath **refs;         /* other store paths it points into */
        size_t n_refs;
        bool required;            /* missing libraries of its files are errors, not warnings */
        uint8_t content_hash[32]; /* of its files alone */
        uint8_t hash[32];         /* with what it references: names it */
        int visit;                /* naming order: 0 new, 1 in progress, 2 named */
        char *basename;           /* "<hash>-<name>-<version>" once named */
        uint64_t total_size;
};

StorePath *store_path_new(const char *name, const char *version);
StorePath *store_path_free(StorePath *sp);

/* Add a host file at dest (lstat()ed now). A dest already present is kept as it was (0). */
int store_path_add_file(StorePath *sp, const char *source, const char *dest);
StoreFile *store_path_find(StorePath *sp, const char *dest);
int store_path_add_ref(StorePath *sp, StorePath *other);

/* "/nix/store/<basename>/<dest>" (dest may be NULL). */
char *store_ref_path(const StoreRef *r);

/* Name the store paths: hash each one's files (content_hash), then in dependency order its
 * content hash together with the names of what it references. Content hashes are cached in
 * hash_cache_dir (NULL: none) under what stat() says of the files, so that files unchanged
 * since the last build are not read again; *ret_hashed counts the store paths that were. */
int store_paths_name(StorePath **paths, size_t n, const char *hash_cache_dir, size_t *ret_hashed);

/* A name or version made store-safe: characters outside [A-Za-z0-9+._?=-] become '_'. */
char *store_safe_name(const char *s);

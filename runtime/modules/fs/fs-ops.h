/* SPDX-License-Identifier: MIT */
#pragma once

/* The file operations of the built-in "fs" module as plain C functions on C types.
 *
 * fs.c adapts them to msgpack arguments and results; everything here is usable (and unit
 * tested) without the worker. Each operation returns 0 when it produced a result — whose
 * `status` says whether the operation succeeded or which error the caller gets — and a
 * negative errno only when no result could be produced (out of memory). Results are
 * zero-initialised by the callee and must be released with their _done() function. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "fs-error.h"
#include "macro.h"

/* Checked by long walks (grep, glob) between files; true ends the walk early. */
typedef bool (*FsCancelled)(void *userdata);

/* ---- read ------------------------------------------------------------------------------ */

#define FS_READ_MAX_OUTPUT_BYTES (500u * 1024u)      /* page cap (deepagents MAX_OUTPUT_BYTES) */
#define FS_READ_MAX_BINARY_BYTES (500u * 1024u)      /* binary preview cap (MAX_BINARY_BYTES) */
#define FS_READ_MAX_LINE_COUNT_BYTES (1024u * 1024u) /* count all lines only up to this size */
#define FS_READ_MAX_LINE_LENGTH 5000u                /* characters per row (MAX_LINE_LENGTH) */
#define FS_READ_SNIFF_BYTES 8192u                    /* bytes checked for UTF-8 */

#define FS_READ_EMPTY_MESSAGE "System reminder: File exists but has empty contents"

typedef struct FsReadResult {
        FsStatus status;
        bool binary;             /* data holds the raw bytes of a non-UTF-8 file */
        uint8_t *data;           /* text: the numbered page, NUL-terminated; binary: the bytes */
        size_t size;
        int64_t total_lines;     /* -1: not known (large file, page ended before EOF) */
        int64_t start_line;      /* 1-based; 0 when no page (empty file, binary, no lines requested) */
        int64_t end_line;
        int64_t next_offset;     /* 0-based offset of the next page; -1 at EOF */
        bool truncated;          /* the page hit FS_READ_MAX_OUTPUT_BYTES */
        bool no_lines_requested; /* limit <= 0 */
} FsReadResult;

void fs_read_result_done(FsReadResult *r);

/* deepagents 0.7 read: offset = 0-based line index (negative clamps to 0), limit = line
 * count (<= 0: no lines). Lines are rendered "%6d\t<text>" (continuation rows "N.1", …
 * for lines over FS_READ_MAX_LINE_LENGTH characters) and joined with "\n". */
int fs_read(const char *path, int64_t offset, int64_t limit, FsReadResult *ret);
/* The same, giving up (io_error) when `cancelled` says so while skipping to a far offset. */
int fs_read_full(const char *path, int64_t offset, int64_t limit, FsCancelled cancelled, void *userdata,
                 FsReadResult *ret);

/* ---- write, upload, write_stream ------------------------------------------------------- */

/* The mode a written file gets: FS_MODE_DEFAULT keeps the mode of the file it replaces (a new
 * file gets 0666 minus the umask); any other value gives exactly these permission bits
 * (masked with FS_MODE_MASK: set-user-ID and set-group-ID are never set on request), umask or
 * not, whatever the file had before. */
#define FS_MODE_DEFAULT (-1)
#define FS_MODE_MASK 01777

/* Produces the new content of a file into fd. Returns 0 or a negative errno. */
typedef int (*FsContentWriter)(int fd, void *userdata);

/* A file being replaced atomically, for content that arrives piecemeal: a temporary file in the
 * target's directory (private, 0600, while incomplete) that commit renames over the target.
 * Freeing it without a successful commit removes the temporary file. */
typedef struct FsAtomicFile FsAtomicFile;

/* Check `path`, create missing parent directories, and open the temporary file. Symbolic links
 * in the last component are followed (the link's target is replaced). Without `overwrite`, an
 * existing file fails with already_exists (checked again, atomically, at commit). Returns 0 with
 * the status set (*ret only on FS_OK), or -ENOMEM. */
int fs_atomic_file_open(const char *path, bool overwrite, int mode, FsAtomicFile **ret, FsStatus *status);
/* Where the content goes (O_RDWR, positioned at the start). */
int fs_atomic_file_fd(FsAtomicFile *f);
/* fsync, give it its mode (and the owner of the file it replaces), rename it into place. A
 * target that cannot be renamed over (a bind-mounted file: EBUSY) is rewritten in place from the
 * temporary file instead. Returns 0 with the status set, or -ENOMEM. */
int fs_atomic_file_commit(FsAtomicFile *f, FsStatus *status);
FsAtomicFile *fs_atomic_file_free(FsAtomicFile *f);
DEFINE_TRIVIAL_CLEANUP_FUNC(FsAtomicFile *, fs_atomic_file_free);

/* Replace (or create) `path` atomically: a temporary file in the same directory gets the
 * content and is fsync()ed, takes over the mode and owner of the file it replaces, and is
 * renamed over it; nothing is left behind on failure and an existing file is untouched.
 * Symbolic links in the last component are followed (the link's target is replaced).
 * Missing parent directories are created. Without `overwrite`, an existing file fails with
 * already_exists (checked atomically with the rename). */
int fs_write_atomic(const char *path, bool overwrite, FsContentWriter writer, void *userdata, FsStatus *ret);
/* The same with a mode (FS_MODE_DEFAULT or permission bits). */
int fs_write_atomic_mode(const char *path, bool overwrite, int mode, FsContentWriter writer, void *userdata,
                         FsStatus *ret);

/* fs_write_atomic() with the content in memory. */
int fs_write(const char *path, const void *data, size_t size, bool overwrite, FsStatus *ret);
int fs_write_mode(const char *path, const void *data, size_t size, bool overwrite, int mode, FsStatus *ret);

/* fs_write_mode() with gzip content, inflated as it is written (fs-gunzip.c). Content that is
 * not gzip, or is cut short, is an io_error and more than FS_GUNZIP_MAX inflated too_large;
 * either way the target stays as it was. */
#define FS_GUNZIP_MAX (64ULL * 1024 * 1024 * 1024)
int fs_write_gunzip(const char *path, const void *data, size_t size, bool overwrite, int mode, FsStatus *ret);

/* ---- mkdir ------------------------------------------------------------------------------ */

/* mkdir -p: `path` and its missing parents (0777 minus the umask). An existing directory (or a
 * symbolic link to one) is success. Errors: invalid_path, permission_denied, not_a_directory
 * (the path or one of its parents exists and is not a directory), io_error. */
int fs_mkdir(const char *path, FsStatus *ret);

/* ---- stat, move, remove ----------------------------------------------------------------- */

typedef enum FsFileType {
        FS_TYPE_FILE,
        FS_TYPE_DIRECTORY,
        FS_TYPE_SYMLINK,
        FS_TYPE_OTHER,   /* a device, a FIFO, a socket */
} FsFileType;

typedef struct FsStatResult {
        FsStatus status;
        FsFileType type;        /* lstat(): a symbolic link is one, its target in symlink_target */
        unsigned mode;          /* permission bits */
        uint32_t uid, gid;
        uint64_t size;
        struct timespec mtime;
        char *symlink_target;   /* symbolic links only */
} FsStatResult;

void fs_stat_result_done(FsStatResult *r);

/* What lstat() says of path. Errors: invalid_path, file_not_found (also through a file),
 * permission_denied, io_error. */
int fs_stat(const char *path, FsStatResult *ret);

/* rename(2), making the destination's missing parents: a file (or link) at the destination is
 * replaced, an empty directory too; a directory that is not empty is already_exists. Errors:
 * invalid_path (also moving a directory into itself), file_not_found (the source),
 * permission_denied, not_a_directory (a destination parent), io_error (also across
 * filesystems). */
int fs_move(const char *source, const char *destination, FsStatus *ret);

/* rm -r: a file, a link (not what it points to) or a directory and all below it, not crossing
 * into other filesystems. "/" is invalid_path. Errors: file_not_found, permission_denied
 * (naming the first entry that could not go: what was removed before it stays removed),
 * io_error. */
int fs_remove(const char *path, FsStatus *ret);

/* ---- download --------------------------------------------------------------------------- */

/* Open a regular file for download; *ret_fd (O_CLOEXEC, owned by the caller), *ret_size and
 * *ret_mode (permission bits) are set only when the status is FS_OK. ret_mode may be NULL. */
int fs_download_open(const char *path, int *ret_fd, uint64_t *ret_size, unsigned *ret_mode, FsStatus *ret);

/* read_stream: items of at most this many bytes (the default, and the largest allowed). */
#define FS_READ_STREAM_CHUNK_DEFAULT (1024u * 1024u)
#define FS_READ_STREAM_CHUNK_MAX (16u * 1024u * 1024u)


/* ---- edit ------------------------------------------------------------------------------- */

#define FS_EDIT_MAX_FILE_BYTES (1024u * 1024u * 1024u) /* files edited in memory, at most this */

typedef struct FsEditResult {
        FsStatus status;
        uint64_t occurrences; /* replaced: 1, or every occurrence with replace_all */
} FsEditResult;

void fs_edit_result_done(FsEditResult *r);

int fs_edit(const char *path, const void *old, size_t old_len, const void *new, size_t new_len,
            bool replace_all, FsEditResult *ret);

/* ---- ls, glob --------------------------------------------------------------------------- */

typedef struct FsEntry {
        char *path;             /* absolute */
        bool is_dir;            /* lstat(): a symlink to a directory is not a directory */
        int mode;               /* permission bits (lstat), -1 when not known */
        uint64_t size;
        struct timespec mtime;
} FsEntry;

#define FS_LS_MAX_ENTRIES 100000u

typedef struct FsLsResult {
        FsStatus status;
        FsEntry *entries; /* sorted by name */
        size_t n_entries;
        bool truncated;   /* the directory had more than max_entries entries */
} FsLsResult;

void fs_ls_result_done(FsLsResult *r);

/* max_entries 0: FS_LS_MAX_ENTRIES. */
int fs_ls(const char *path, size_t max_entries, FsLsResult *ret);

/* ISO 8601 in UTC with microseconds, as Python's datetime.isoformat():
 * "2024-05-01T12:34:56.789012+00:00". */
#define FS_TIMESTAMP_MAX 64
void fs_format_timestamp(const struct timespec *ts, char buf[static FS_TIMESTAMP_MAX]);

#define FS_GLOB_MAX_MATCHES 10000u
#define FS_GLOB_TIMEOUT_USEC (5u * 1000000u)

typedef struct FsGlobOptions {
        size_t max_matches;     /* 0: FS_GLOB_MAX_MATCHES */
        uint64_t timeout_usec;  /* 0: FS_GLOB_TIMEOUT_USEC */
        FsCancelled cancelled;  /* optional */
        void *userdata;
} FsGlobOptions;

typedef struct FsGlobResult {
        FsStatus status;
        FsEntry *matches;       /* regular files and directories, sorted by path */
        size_t n_matches;
        bool truncated;         /* budget or match cap hit, or part of the tree was unreadable */
} FsGlobResult;

void fs_glob_result_done(FsGlobResult *r);

int fs_glob(const char *pattern, const char *root, const FsGlobOptions *opts, FsGlobResult *ret);

/* ---- grep ------------------------------------------------------------------------------- */

#define FS_GREP_TIMEOUT_USEC (15u * 1000000u)       /* deepagents DEFAULT_GREP_TIMEOUT */
#define FS_GREP_MAX_MATCHES 1000000u                /* whatever max_count says */
#define FS_GREP_MAX_OUTPUT_BYTES (64u * 1024u * 1024u)
#define FS_GREP_MAX_TEXT_BYTES (64u * 1024u)        /* a matching line's text is cut here */
#define FS_GREP_MAX_PATTERN_BYTES (64u * 1024u)
#define FS_GREP_BINARY_SNIFF 8192u                  /* a NUL in here: binary, skipped */

typedef struct FsGrepOptions {
        const char *pattern;    /* literal bytes */
        size_t pattern_len;
        const char *path;       /* file or directory; NULL: the current directory */
        const char *glob;       /* optional file filter (same rules as fs_glob) */
        int64_t max_count;      /* < 0: no cap (FS_GREP_MAX_MATCHES still applies) */
        uint64_t timeout_usec;  /* 0: FS_GREP_TIMEOUT_USEC */
        FsCancelled cancelled;  /* optional */
        void *userdata;
} FsGrepOptions;

typedef struct FsGrepMatch {
        size_t path;            /* offset of the NUL-terminated path in FsGrepResult.strings */
        uint64_t line;          /* 1-based */
        size_t text;            /* offset of the line's text in strings (valid UTF-8) */
        size_t text_len;
} FsGrepMatch;

typedef struct FsGrepResult {
        FsStatus status;
        char *strings;          /* paths and texts, addressed by offset */
        size_t strings_len;
        FsGrepMatch *matches;   /* files in path order (sorted per directory), lines ascending */
        size_t n_matches;
        bool truncated;         /* max_count, a budget, or cancellation ended the search */
} FsGrepResult;

void fs_grep_result_done(FsGrepResult *r);

static inline const char *fs_grep_match_path(const FsGrepResult *r, const FsGrepMatch *m) {
        return r->strings + m->path;
}
static inline const char *fs_grep_match_text(const FsGrepResult *r, const FsGrepMatch *m) {
        return r->strings + m->text;
}

int fs_grep(const FsGrepOptions *opts, FsGrepResult *ret);

/* ---- watch ----------------------------------------------------------------------------- */

/* fs::watch: changes below a path as {path, event} with event "created", "modified",
 * "deleted", "moved_from" or "moved_to" (fs-watch.c). */
typedef struct FsWatch FsWatch;
/* Called for each change; a negative return ends the read with it. */
typedef int (*FsWatchEmit)(void *userdata, const char *path, const char *event);

/* Watch path (a directory: with recursive, every directory below it too; or a file). A path
 * that does not exist is file_not_found; the inotify limits are io_error naming the sysctl. */
int fs_watch_new(const char *path, bool recursive, FsWatch **ret, FsStatus *status);
FsWatch *fs_watch_free(FsWatch *w);
DEFINE_TRIVIAL_CLEANUP_FUNC(FsWatch *, fs_watch_free);
/* Polls readable when changes wait. */
int fs_watch_fd(const FsWatch *w);
/* Emit every change waiting (never blocks). Lost events (a queue overflow) and the watch limit
 * are io_error in status; < 0 only for errors of the read or of emit. */
int fs_watch_read(FsWatch *w, FsWatchEmit emit, void *userdata, FsStatus *status);
/* The watched path itself was deleted or moved away: nothing more will come. */
bool fs_watch_root_gone(const FsWatch *w);

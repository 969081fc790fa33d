/* SPDX-License-Identifier: MIT */
#pragma once

/* Outcomes of one file operation as the caller sees them.
 *
 * The fs module reports per-operation failures in its result maps ({error: "<code>",
 * message: "<text>"}) instead of raising, like the deepagents file protocol does, so the
 * core functions return 0 with an FsStatus describing the outcome, and keep negative errno
 * returns for the cases where no result could be produced at all (out of memory). */

#include <stdbool.h>

typedef enum FsError {
        FS_OK = 0,
        FS_ERROR_FILE_NOT_FOUND,
        FS_ERROR_PERMISSION_DENIED,
        FS_ERROR_IS_DIRECTORY,
        FS_ERROR_NOT_A_DIRECTORY,
        FS_ERROR_INVALID_PATH,
        FS_ERROR_ALREADY_EXISTS,
        FS_ERROR_STRING_NOT_FOUND,
        FS_ERROR_MULTIPLE_OCCURRENCES,
        FS_ERROR_NOT_A_FILE,
        FS_ERROR_NOT_A_TEXT_FILE,
        FS_ERROR_INVALID_OFFSET,
        FS_ERROR_TOO_LARGE,
        FS_ERROR_IO,
        _FS_ERROR_MAX,
} FsError;

/* The wire code ("file_not_found", …); NULL for FS_OK. */
const char *fs_error_to_string(FsError e);

typedef struct FsStatus {
        FsError error;
        char *message; /* malloc()ed human text, NULL when there is nothing to add */
} FsStatus;

#define FS_STATUS_NULL ((FsStatus) {})

void fs_status_done(FsStatus *s);

static inline bool fs_status_ok(const FsStatus *s) {
        return s->error == FS_OK;
}

/* Record an outcome and its message. Returns 0, or -ENOMEM (the status is then left
 * with the error code set and no message, which is still reportable). */
int fs_status_set(FsStatus *s, FsError e, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Which object an errno refers to, so the message names it sensibly. */
typedef enum FsSubject {
        FS_SUBJECT_FILE,      /* the operation targets a file: missing → "File '…' not found" */
        FS_SUBJECT_DIRECTORY, /* the operation targets a directory (ls, grep, glob roots) */
} FsSubject;

/* Map a negative errno from a system call on `path` to a status: ENOENT → file_not_found,
 * EACCES/EPERM/EROFS → permission_denied, EISDIR → is_directory, ENOTDIR →
 * not_a_directory (file_not_found for FS_SUBJECT_FILE: a path through a file names
 * nothing), ENAMETOOLONG/ELOOP → invalid_path, EFBIG → too_large, anything else → io_error. */
int fs_status_from_errno(FsStatus *s, int r, const char *path, FsSubject subject);

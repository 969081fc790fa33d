/* SPDX-License-Identifier: MIT */
#include <stdarg.h>
#include <stdio.h>

#include "fs-error.h"
#include "macro.h"

static const char *const fs_error_table[_FS_ERROR_MAX] = {
        [FS_OK] = NULL,
        [FS_ERROR_FILE_NOT_FOUND] = "file_not_found",
        [FS_ERROR_PERMISSION_DENIED] = "permission_denied",
        [FS_ERROR_IS_DIRECTORY] = "is_directory",
        [FS_ERROR_NOT_A_DIRECTORY] = "not_a_directory",
        [FS_ERROR_INVALID_PATH] = "invalid_path",
        [FS_ERROR_ALREADY_EXISTS] = "already_exists",
        [FS_ERROR_STRING_NOT_FOUND] = "string_not_found",
        [FS_ERROR_MULTIPLE_OCCURRENCES] = "multiple_occurrences",
        [FS_ERROR_NOT_A_FILE] = "not_a_file",
        [FS_ERROR_NOT_A_TEXT_FILE] = "not_a_text_file",
        [FS_ERROR_INVALID_OFFSET] = "invalid_offset",
        [FS_ERROR_TOO_LARGE] = "too_large",
        [FS_ERROR_IO] = "io_error",
};

const char *fs_error_to_string(FsError e) {
        if ((unsigned) e >= _FS_ERROR_MAX)
                return "io_error";
        return fs_error_table[e];
}

void fs_status_done(FsStatus *s) {
        free(s->message);
        *s = FS_STATUS_NULL;
}

int fs_status_set(FsStatus *s, FsError e, const char *fmt, ...) {
        va_list ap;
        char *m = NULL;
        int k;

        free(s->message);
        s->message = NULL;
        s->error = e;
        if (!fmt)
                return 0;

        va_start(ap, fmt);
        k = vasprintf(&m, fmt, ap);
        va_end(ap);
        if (k < 0)
                return -ENOMEM;
        s->message = m;
        return 0;
}

int fs_status_from_errno(FsStatus *s, int r, const char *path, FsSubject subject) {
        char buf[256];

        r = r < 0 ? -r : r;
        switch (r) {
        case ENOENT:
                if (subject == FS_SUBJECT_FILE)
                        return fs_status_set(s, FS_ERROR_FILE_NOT_FOUND, "Error: File '%s' not found", path);
                return fs_status_set(s, FS_ERROR_FILE_NOT_FOUND, "Error: Path '%s' not found", path);
        case EACCES:
        case EPERM:
                return fs_status_set(s, FS_ERROR_PERMISSION_DENIED, "Error: Permission denied: '%s'", path);
        case EROFS:
                return fs_status_set(s, FS_ERROR_PERMISSION_DENIED,
                                     "Error: Permission denied: '%s' is on a read-only file system", path);
        case EISDIR:
                return fs_status_set(s, FS_ERROR_IS_DIRECTORY, "Error: '%s' is a directory", path);
        case ENOTDIR:
                if (subject == FS_SUBJECT_FILE)
                        return fs_status_set(s, FS_ERROR_FILE_NOT_FOUND,
                                             "Error: File '%s' not found (a parent is not a directory)", path);
                return fs_status_set(s, FS_ERROR_NOT_A_DIRECTORY, "Error: '%s' is not a directory", path);
        case ENAMETOOLONG:
                return fs_status_set(s, FS_ERROR_INVALID_PATH, "Error: Path too long: '%s'", path);
        case ELOOP:
                return fs_status_set(s, FS_ERROR_INVALID_PATH, "Error: Too many levels of symbolic links: '%s'", path);
        case EFBIG:
                return fs_status_set(s, FS_ERROR_TOO_LARGE, "Error: File too large: '%s'", path);
        default:
                return fs_status_set(s, FS_ERROR_IO, "Error: I/O error on '%s': %s", path,
                                     strerror_r(r, buf, sizeof(buf)));
        }
}

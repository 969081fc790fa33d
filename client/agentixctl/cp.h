/* SPDX-License-Identifier: MIT */
#pragma once

/* agentixctl cp: what the two directions share. cp.c decides what goes where (docker cp's
 * rules); cp-upload.c and cp-download.c move the bytes, many files per call (fs::upload,
 * fs::download) and several calls in flight, on one event loop. */

#include <stdbool.h>
#include <stdint.h>

#include "agentix.h"
#include "buffer.h"
#include "macro.h"
#include "progress.h"

/* Files up to this size travel in fs::upload/fs::download batches; larger ones are streamed
 * through sandbox::exec (cat), since one message holds at most 256 MiB. */
#define CP_BATCH_FILE_MAX (128ull * 1024 * 1024)
/* Files per batch at most (bounds the per-file bookkeeping of one call). */
#define CP_BATCH_FILES_MAX 1024u
/* Parts of a large file: this size, and at most CP_PARTS_MAX of them. */
#define CP_CHUNK_SIZE (4u * 1024 * 1024)
#define CP_PARTS_MAX 512u

typedef struct Cp {
        sd_event *event;
        agentix_client *client;
        uint64_t batch_size;     /* --batch-size: bytes per call */
        unsigned jobs;           /* --jobs: calls in flight */

        unsigned in_flight;
        bool aborted;            /* a call failed as a whole: start nothing new */
        int status;              /* the first failure's exit status, EXIT_OK while none */

        uint64_t files, dirs, bytes, skipped, failed;
        Progress progress;
} Cp;

/* A file to move: the path relative to the copy's root ("" for a single file), its size. */
typedef struct CpFile {
        char *rel;
        uint64_t size;
        mode_t mode;             /* upload: the local mode; download: 0 */
} CpFile;

typedef struct CpList {
        CpFile *files;
        size_t n_files, cap_files;
        char **dirs;             /* relative paths, parents before children ("" is the root) */
        size_t n_dirs, cap_dirs;
        uint64_t total_bytes;
} CpList;

int cp_list_add_file(CpList *l, const char *rel, uint64_t size, mode_t mode);
int cp_list_add_dir(CpList *l, const char *rel);
void cp_list_done(CpList *l);

/* root + "/" + rel, or root alone for rel "". */
char *cp_path_join(const char *root, const char *rel);

/* Report a failure of one file or of the whole copy: one line on stderr; the first one's status
 * becomes the copy's exit status. */
void cp_fail(Cp *cp, int status, const char *fmt, ...) _printf_(3, 4);
/* A file left out on purpose (not a regular file): a note on stderr unless -q. */
void cp_skip(Cp *cp, const char *fmt, ...) _printf_(2, 3);

/* Run a shell command line in the sandbox, blocking (mkdir, chmod, joining large files).
 * Returns 0, or a negative errno with the reason in e (a non-zero exit status becomes an
 * AGENTIX_E_REMOTE error quoting the first line of output). */
int cp_remote_command(Cp *cp, const char *command, agentix_error *e);

/* The two directions. src: the local path (upload) or the remote one (download); dst: where
 * the source itself goes (cp.c has resolved docker cp's "into the directory" rule already);
 * is_dir: the source is a directory. Both return when everything is done (cp->status says
 * how it went). */
void cp_upload(Cp *cp, const char *src, const char *dst, bool is_dir);
void cp_download(Cp *cp, const char *src, const char *dst, bool is_dir, agentix_entries *listing);

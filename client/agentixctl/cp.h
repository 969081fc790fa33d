/* SPDX-License-Identifier: MIT */
#pragma once

/* agentixctl cp: what the two directions share. cp.c decides what goes where (docker cp's
 * rules); cp-upload.c and cp-download.c move the bytes, on one event loop, with nothing but the
 * fs module in the sandbox: files in batches (fs::upload, fs::download, many files per call,
 * several calls in flight), larger files streamed in chunks (fs::write_stream, fs::read_stream),
 * empty directories made with fs::mkdir, modes carried by upload entries and download results. */

#include <stdbool.h>
#include <stdint.h>

#include "agentix.h"
#include "buffer.h"
#include "macro.h"
#include "progress.h"

/* The largest --batch-size. Files above the batch size are streamed (one message holds at most
 * what the server accepts: 256 MiB by default, less with agentix-server --max-message). */
#define CP_BATCH_FILE_MAX (128ull * 1024 * 1024)
/* Files per batch at most (bounds the per-file bookkeeping of one call). */
#define CP_BATCH_FILES_MAX 1024u
/* Streamed files travel in chunks of this size (or the batch size, when that is smaller). */
#define CP_STREAM_CHUNK (1024u * 1024u)
/* The largest --jobs. */
#define CP_JOBS_MAX 64u
/* Paths per fs::mkdir call. */
#define CP_MKDIR_BATCH_MAX 1024u

typedef struct Cp {
        sd_event *event;
        agentix_client *client;
        uint64_t batch_size;     /* --batch-size: bytes per call */
        unsigned jobs;           /* --jobs: calls in flight */

        unsigned in_flight;
        agentix_request *calls[CP_JOBS_MAX]; /* the calls in flight, to cancel on a signal */
        bool aborted;            /* a call failed as a whole, or a signal came: start nothing new */
        int signal;              /* the signal that interrupted the copy, 0: none */
        int status;              /* the first failure's exit status, EXIT_OK while none */

        uint64_t files, dirs, bytes, skipped, failed;
        Progress progress;
} Cp;

/* The chunk size of streamed files. */
static inline size_t cp_stream_chunk(const Cp *cp) {
        return (size_t) MIN(cp->batch_size, (uint64_t) CP_STREAM_CHUNK);
}

/* A file to move: the path relative to the copy's root ("" for a single file), its size, its
 * permission bits (-1: not known yet). */
typedef struct CpFile {
        char *rel;
        uint64_t size;
        int mode;
} CpFile;

typedef struct CpList {
        CpFile *files;
        size_t n_files, cap_files;
        char **dirs;             /* relative paths, parents before children ("" is the root) */
        size_t n_dirs, cap_dirs;
        uint64_t total_bytes;
} CpList;

int cp_list_add_file(CpList *l, const char *rel, uint64_t size, int mode);
int cp_list_add_dir(CpList *l, const char *rel);
void cp_list_done(CpList *l);

/* root + "/" + rel, or root alone for rel "". */
char *cp_path_join(const char *root, const char *rel);

/* Bookkeeping of the calls in flight (at most --jobs): started, and finished (from its done
 * handler). A signal cancels every call in flight, so that the sandbox drops what was half
 * written, and the copy ends with 128 + the signal's number. */
void cp_call_started(Cp *cp, agentix_request *r);
void cp_call_finished(Cp *cp, agentix_request *r);

/* Report a failure of one file or of the whole copy: one line on stderr; the first one's status
 * becomes the copy's exit status. */
void cp_fail(Cp *cp, int status, const char *fmt, ...) _printf_(3, 4);
/* A file left out on purpose (not a regular file): a note on stderr unless -q. */
void cp_skip(Cp *cp, const char *fmt, ...) _printf_(2, 3);

/* A call's error for a person. The stream functions raise fs errors with the code as their
 * type ("file_not_found"); those read like the per-file errors of the batch calls. */
const char *cp_error_reason(const agentix_error *e, char *buf, size_t size);
/* The "message" of an fs result map without "Error: ", or fallback; its length in *ret_len. */
const char *cp_result_message(const msgpack_object *map, const char *fallback, int *ret_len);

/* The two directions. src: the local path (upload) or the remote one (download); dst: where
 * the source itself goes (cp.c has resolved docker cp's "into the directory" rule already);
 * is_dir: the source is a directory, and for a download `listing` is its fs::ls result. Both
 * return when everything is done (cp->status says how it went). */
void cp_upload(Cp *cp, const char *src, const char *dst, bool is_dir);
void cp_download(Cp *cp, const char *src, const char *dst, bool is_dir, const msgpack_object *listing);

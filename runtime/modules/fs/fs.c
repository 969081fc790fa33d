/* SPDX-License-Identifier: MIT */
/* Built-in module "fs": the deepagents file contract in native C (no shell, no python3 in
 * the task image). This file is the descriptor table and the msgpack adapters; the
 * operations themselves are plain C in fs-*.c (fs-ops.h).
 *
 * Results are maps. A failure of the operation itself is reported in them — `error` (a
 * code: file_not_found, permission_denied, …) and `message` (deepagents wording) — and
 * never raised; only arguments of the wrong type are (by the worker, from the signatures).
 * The exceptions are read_stream and write_stream, whose items are the file's bytes (or,
 * at the end, a summary): with no result map to report in, they raise the code as the
 * error's type. */
#include <inttypes.h>
#include <limits.h>
#include <poll.h>

#include "agentix-module.h"
#include "fs-as-user.h"
#include "fs-ops.h"
#include "fs-path.h"
#include "fs-utf8.h"
#include "macro.h"

/* The agentix_call_* API is defined by the program running the worker. Weak references
 * keep programs that link the module registry without a worker (its unit tests: they
 * resolve callables but never run them) linkable; in the worker they bind normally. */
#pragma weak agentix_call_result
#pragma weak agentix_call_cancelled
#pragma weak agentix_call_remaining_ms
#pragma weak agentix_pack_bin_from_fd
#pragma weak agentix_call_raise
#pragma weak agentix_call_item_begin
#pragma weak agentix_call_item_end
#pragma weak agentix_call_inbox_next
#pragma weak agentix_call_wait_fd

/* download: file bytes per call, leaving room below the 256 MiB message limit for the
 * envelope, paths and per-file maps. */
#define FS_DOWNLOAD_BUDGET (255u * 1024u * 1024u)
/* grep and glob end this long before a call deadline, to return what they found. */
#define FS_DEADLINE_MARGIN_USEC (200u * 1000u)

/* ---- packing ------------------------------------------------------------------------------- */

static int pack_strn(msgpack_packer *pk, const void *p, size_t n) {
        _cleanup_buffer_ Buffer clean = BUFFER_NULL;
        int r;

        /* A str must be UTF-8 or Python clients fail to decode the whole result; names on
         * disk need not be, so the odd byte becomes U+FFFD. */
        if (!fs_utf8_is_valid(p, n, true)) {
                r = fs_utf8_append_sanitized(&clean, p, n);
                if (r < 0)
                        return r;
                p = buffer_data(&clean);
                n = clean.len;
        }
        if (msgpack_pack_str(pk, n) < 0 || msgpack_pack_str_body(pk, p, n) < 0)
                return -ENOMEM;
        return 0;
}

static int pack_str(msgpack_packer *pk, const char *s) {
        if (!s)
                return msgpack_pack_nil(pk) < 0 ? -ENOMEM : 0;
        return pack_strn(pk, s, strlen(s));
}

static int pack_key(msgpack_packer *pk, const char *key) {
        return pack_strn(pk, key, strlen(key));
}

static int pack_int_or_nil(msgpack_packer *pk, bool present, int64_t v) {
        return (present ? msgpack_pack_int64(pk, v) : msgpack_pack_nil(pk)) < 0 ? -ENOMEM : 0;
}

static int pack_bool(msgpack_packer *pk, bool v) {
        return (v ? msgpack_pack_true(pk) : msgpack_pack_false(pk)) < 0 ? -ENOMEM : 0;
}

/* "error": code|nil, "message": text|nil — the last two entries of every result map. */
static int pack_status(msgpack_packer *pk, const FsStatus *s) {
        int r;

        r = pack_key(pk, "error");
        r = r ?: pack_str(pk, fs_error_to_string(s->error));
        r = r ?: pack_key(pk, "message");
        r = r ?: pack_str(pk, s->message);
        return r;
}

/* One entry of ls or glob: {path, is_dir, size, modified_at, mode}. */
static int pack_entry(msgpack_packer *pk, const FsEntry *e) {
        char ts[FS_TIMESTAMP_MAX];
        int r;

        fs_format_timestamp(&e->mtime, ts);
        r = msgpack_pack_map(pk, 5) < 0 ? -ENOMEM : 0;
        r = r ?: pack_key(pk, "path");
        r = r ?: pack_str(pk, e->path);
        r = r ?: pack_key(pk, "is_dir");
        r = r ?: pack_bool(pk, e->is_dir);
        r = r ?: pack_key(pk, "size");
        r = r ?: (msgpack_pack_uint64(pk, e->size) < 0 ? -ENOMEM : 0);
        r = r ?: pack_key(pk, "modified_at");
        r = r ?: pack_str(pk, ts);
        r = r ?: pack_key(pk, "mode");
        r = r ?: pack_int_or_nil(pk, e->mode >= 0, e->mode);
        return r;
}

/* ---- arguments ----------------------------------------------------------------------------- */

static bool arg_bytes(const msgpack_object *o, const char **ret_p, size_t *ret_n) {
        if (o->type == MSGPACK_OBJECT_STR) {
                *ret_p = o->via.str.ptr;
                *ret_n = o->via.str.size;
                return true;
        }
        if (o->type == MSGPACK_OBJECT_BIN) {
                *ret_p = o->via.bin.ptr;
                *ret_n = o->via.bin.size;
                return true;
        }
        return false;
}

/* A path argument as a C string, or a status saying why it is not one. Returns 0 (then
 * either *ret is set or the status is invalid_path) or -ENOMEM. */
static int arg_path(const msgpack_object *o, char **ret, FsStatus *status) {
        const char *p;
        size_t n;
        int r;

        if (!arg_bytes(o, &p, &n))
                return fs_status_set(status, FS_ERROR_INVALID_PATH, "Error: Path must be a string");
        r = fs_path_check(p, n, status);
        if (r <= 0)
                return r;
        *ret = strndup(p, n);
        return *ret ? 0 : -ENOMEM;
}

/* A pattern argument as a C string (NUL bytes cannot match any name). */
static int arg_pattern(const msgpack_object *o, char **ret, FsStatus *status) {
        const char *p;
        size_t n;

        if (!arg_bytes(o, &p, &n))
                return fs_status_set(status, FS_ERROR_INVALID_PATH, "Error: Pattern must be a string");
        if (memchr(p, 0, n))
                return fs_status_set(status, FS_ERROR_INVALID_PATH, "Error: Pattern contains a NUL byte");
        *ret = strndup(p, n);
        return *ret ? 0 : -ENOMEM;
}

static int64_t arg_int(const msgpack_object *o) {
        if (o->type == MSGPACK_OBJECT_POSITIVE_INTEGER)
                return o->via.u64 > INT64_MAX ? INT64_MAX : (int64_t) o->via.u64;
        if (o->type == MSGPACK_OBJECT_NEGATIVE_INTEGER)
                return o->via.i64;
        return 0;
}

/* A mode argument: nil (FS_MODE_DEFAULT) or permission bits 0…07777. False if it is neither. */
static bool arg_mode(const msgpack_object *o, int *ret) {
        if (o->type == MSGPACK_OBJECT_NIL) {
                *ret = FS_MODE_DEFAULT;
                return true;
        }
        if (o->type != MSGPACK_OBJECT_POSITIVE_INTEGER || o->via.u64 > 07777)
                return false;
        *ret = (int) o->via.u64;
        return true;
}

/* uid and gid arguments: the account a call is made for. Both nil: the worker's. False if
 * either is not an id. */
static bool arg_owner(const msgpack_object *uid, const msgpack_object *gid, FsOwner *ret) {
        FsOwner o = FS_OWNER_NONE;

        if (uid->type == MSGPACK_OBJECT_POSITIVE_INTEGER && uid->via.u64 < UINT32_MAX)
                o.uid = (uid_t) uid->via.u64;
        else if (uid->type != MSGPACK_OBJECT_NIL)
                return false;
        if (gid->type == MSGPACK_OBJECT_POSITIVE_INTEGER && gid->via.u64 < UINT32_MAX)
                o.gid = (gid_t) gid->via.u64;
        else if (gid->type != MSGPACK_OBJECT_NIL)
                return false;
        *ret = o;
        return true;
}

static void as_user_done(FsAsUser *s) {
        fs_as_user_end(s);
        fs_new_owner = FS_OWNER_NONE;
}

/* The rest of the function runs as the account uid and gid name (fs-as-user.h): whatever path
 * it is given, through whatever links, it reaches only what that account may. What it makes is
 * the account's (fs-path.h). The worker's credentials come back when the function returns. A
 * worker that may not become the account (not root) refuses the call: permission_denied. */
#define AS_USER_SCOPE(call, fn, uid_arg, gid_arg)                                                              \
        _cleanup_(as_user_done) FsAsUser _as_user = FS_AS_USER_NULL;                                           \
        FsOwner _owner;                                                                                        \
        if (!arg_owner(uid_arg, gid_arg, &_owner))                                                             \
                return agentix_call_raise(call, "ValueError", fn "() arguments 'uid' and 'gid' must be ids or None"); \
        {                                                                                                      \
                int _r = fs_as_user_begin(_owner.uid, _owner.gid, &_as_user);                                  \
                if (_r < 0)                                                                                    \
                        return agentix_call_raise(call, "permission_denied",                                   \
                                                  "Error: the runtime cannot act as uid %u gid %u: %s",        \
                                                  (unsigned) _owner.uid, (unsigned) _owner.gid, strerror(-_r)); \
        }                                                                                                      \
        fs_new_owner = _owner

/* The functions that work on one file and have no result map to put a failure in (the stream
 * shapes) raise it instead: the type is the error code, the message the usual text. */
static int raise_status(agentix_call *call, const FsStatus *s) {
        const char *code = fs_error_to_string(s->error) ?: "io_error";

        return agentix_call_raise(call, code, "%s", s->message ?: code);
}

static bool call_cancelled(void *userdata) {
        return agentix_call_cancelled(userdata);
}

/* A walk's time budget: its own, or less when the call's deadline is nearer. */
static uint64_t walk_budget(agentix_call *call, uint64_t budget_usec) {
        int64_t ms = agentix_call_remaining_ms(call);

        if (ms >= 0) {
                uint64_t left = (uint64_t) ms * 1000u;
                left = left > FS_DEADLINE_MARGIN_USEC ? left - FS_DEADLINE_MARGIN_USEC : 1;
                budget_usec = MIN(budget_usec, left);
        }
        return budget_usec;
}

/* ---- read ---------------------------------------------------------------------------------- */

static int fs_read_impl(agentix_call *call, const msgpack_object *argv, size_t argc) {
        _cleanup_(fs_read_result_done) FsReadResult res = {};
        _cleanup_free_ char *path = NULL;
        msgpack_packer *pk;
        int r;

        r = arg_path(&argv[0], &path, &res.status);
        if (r < 0)
                return r;
        if (path) {
                r = fs_read_full(path, arg_int(&argv[1]), arg_int(&argv[2]), call_cancelled, call, &res);
                if (r < 0)
                        return r;
        }

        bool ok = fs_status_ok(&res.status), page = ok && !res.binary && res.start_line > 0;
        pk = agentix_call_result(call);
        r = msgpack_pack_map(pk, 10) < 0 ? -ENOMEM : 0;
        r = r ?: pack_key(pk, "content");
        if (ok && !res.binary)
                r = r ?: pack_strn(pk, res.data, res.size);
        else
                r = r ?: pack_str(pk, NULL);
        r = r ?: pack_key(pk, "encoding");
        r = r ?: pack_str(pk, !ok ? NULL : res.binary ? "bytes" : "utf-8");
        r = r ?: pack_key(pk, "data");
        if (ok && res.binary)
                r = r ?: (msgpack_pack_bin(pk, res.size) < 0 || msgpack_pack_bin_body(pk, res.data, res.size) < 0 ? -ENOMEM : 0);
        else
                r = r ?: pack_str(pk, NULL);
        r = r ?: pack_key(pk, "total_lines");
        r = r ?: pack_int_or_nil(pk, ok && !res.binary && res.total_lines >= 0, res.total_lines);
        r = r ?: pack_key(pk, "start_line");
        r = r ?: pack_int_or_nil(pk, page, res.start_line);
        r = r ?: pack_key(pk, "end_line");
        r = r ?: pack_int_or_nil(pk, page, res.end_line);
        r = r ?: pack_key(pk, "next_offset");
        r = r ?: pack_int_or_nil(pk, page && res.next_offset >= 0, res.next_offset);
        r = r ?: pack_key(pk, "truncated");
        r = r ?: pack_bool(pk, res.truncated);
        r = r ?: pack_status(pk, &res.status);
        return r;
}

/* ---- write, upload -------------------------------------------------------------------------- */

static int fs_write_impl(agentix_call *call, const msgpack_object *argv, size_t argc) {
        _cleanup_(fs_status_done) FsStatus status = FS_STATUS_NULL;
        _cleanup_free_ char *path = NULL;
        const char *data = NULL, *echo = NULL;
        size_t size = 0, echo_len = 0;
        msgpack_packer *pk;
        int r;

        (void) arg_bytes(&argv[0], &echo, &echo_len);
        (void) arg_bytes(&argv[1], &data, &size);
        r = arg_path(&argv[0], &path, &status);
        if (r < 0)
                return r;
        if (path) {
                r = fs_write(path, data, size, argv[2].type == MSGPACK_OBJECT_BOOLEAN && argv[2].via.boolean, &status);
                if (r < 0)
                        return r;
        }

        pk = agentix_call_result(call);
        r = msgpack_pack_map(pk, 4) < 0 ? -ENOMEM : 0;
        r = r ?: pack_key(pk, "path");
        r = r ?: pack_strn(pk, echo, echo_len);
        r = r ?: pack_key(pk, "bytes_written");
        r = r ?: pack_int_or_nil(pk, fs_status_ok(&status), (int64_t) size);
        r = r ?: pack_status(pk, &status);
        return r;
}

static int fs_upload_impl(agentix_call *call, const msgpack_object *argv, size_t argc) {
        const msgpack_object_array *files = &argv[0].via.array;
        msgpack_packer *pk = agentix_call_result(call);
        bool gzip;
        int r;

        AS_USER_SCOPE(call, "upload", &argv[1], &argv[2]);
        if (argv[3].type != MSGPACK_OBJECT_NIL &&
            !(argv[3].type == MSGPACK_OBJECT_STR && argv[3].via.str.size == 4 && memcmp(argv[3].via.str.ptr, "gzip", 4) == 0))
                return agentix_call_raise(call, "ValueError", "upload() argument 'encoding' must be \"gzip\" or None");
        gzip = argv[3].type == MSGPACK_OBJECT_STR;

        if (msgpack_pack_array(pk, files->size) < 0)
                return -ENOMEM;

        for (uint32_t i = 0; i < files->size; i++) {
                _cleanup_(fs_status_done) FsStatus status = FS_STATUS_NULL;
                _cleanup_free_ char *path = NULL;
                const msgpack_object *e = &files->ptr[i];
                const char *echo = NULL, *data = NULL;
                size_t echo_len = 0, size = 0;
                int mode = FS_MODE_DEFAULT;
                /* [path, content] or [path, content, mode] */
                bool well_formed = e->type == MSGPACK_OBJECT_ARRAY &&
                                   (e->via.array.size == 2 || e->via.array.size == 3) &&
                                   e->via.array.ptr[0].type == MSGPACK_OBJECT_STR &&
                                   arg_bytes(&e->via.array.ptr[1], &data, &size) &&
                                   (e->via.array.size == 2 || arg_mode(&e->via.array.ptr[2], &mode));

                if (!well_formed) {
                        r = fs_status_set(&status, FS_ERROR_INVALID_PATH, "invalid entry");
                        if (e->type == MSGPACK_OBJECT_ARRAY && e->via.array.size >= 1)
                                (void) arg_bytes(&e->via.array.ptr[0], &echo, &echo_len);
                } else {
                        (void) arg_bytes(&e->via.array.ptr[0], &echo, &echo_len);
                        r = arg_path(&e->via.array.ptr[0], &path, &status);
                        if (r >= 0 && path)
                                r = gzip ? fs_write_gunzip(path, data, size, /* overwrite= */ true, mode, &status)
                                         : fs_write_mode(path, data, size, /* overwrite= */ true, mode, &status);
                }
                if (r < 0)
                        return r;

                r = msgpack_pack_map(pk, 3) < 0 ? -ENOMEM : 0;
                r = r ?: pack_key(pk, "path");
                r = r ?: (echo ? pack_strn(pk, echo, echo_len) : pack_str(pk, NULL));
                r = r ?: pack_status(pk, &status);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* ---- write_stream ----------------------------------------------------------------------------- */

/* write_stream(path, mode=None, overwrite=True), bidi: the inbox's bytes items are the content,
 * in order; when the caller closes the inbox the file is renamed into place and {path, size}
 * is the one item. Until then it is a temporary file next to the target, removed whenever the
 * call ends otherwise (cancelled, a failure, the worker shutting down). */
static int fs_write_stream_impl(agentix_call *call, const msgpack_object *argv, size_t argc) {
        _cleanup_(fs_status_done) FsStatus status = FS_STATUS_NULL;
        _cleanup_(fs_atomic_file_freep) FsAtomicFile *f = NULL;
        _cleanup_free_ char *path = NULL;
        uint64_t size = 0;
        msgpack_packer *pk;
        int mode, r;

        if (!arg_mode(&argv[1], &mode))
                return agentix_call_raise(call, "ValueError", "write_stream() argument 'mode' must be between 0 and 0o7777");
        r = arg_path(&argv[0], &path, &status);
        if (r < 0)
                return r;
        if (!path)
                return raise_status(call, &status);

        r = fs_atomic_file_open(path, argv[2].type == MSGPACK_OBJECT_BOOLEAN && argv[2].via.boolean, mode, &f, &status);
        if (r < 0)
                return r;
        if (!f)
                return raise_status(call, &status);

        for (;;) {
                msgpack_object item;
                const char *data;
                size_t n;

                r = agentix_call_inbox_next(call, &item, -1);
                if (r < 0)
                        return r; /* cancelled: the temporary file goes with f */
                if (r == 0)
                        break;
                if (!arg_bytes(&item, &data, &n))
                        return agentix_call_raise(call, "TypeError", "write_stream() inbox items must be bytes");
                r = loop_write(fs_atomic_file_fd(f), data, n);
                if (r < 0) {
                        r = fs_status_from_errno(&status, r, path, FS_SUBJECT_FILE);
                        return r < 0 ? r : raise_status(call, &status);
                }
                size += n;
        }

        r = fs_atomic_file_commit(f, &status);
        if (r < 0)
                return r;
        if (!fs_status_ok(&status))
                return raise_status(call, &status);

        pk = agentix_call_item_begin(call);
        (void) msgpack_pack_map(pk, 2);
        (void) pack_key(pk, "path");
        (void) pack_strn(pk, argv[0].via.str.ptr, argv[0].via.str.size);
        (void) pack_key(pk, "size");
        (void) msgpack_pack_uint64(pk, size);
        return agentix_call_item_end(call);
}

/* ---- mkdir, stat, move, remove ---------------------------------------------------------------------- */

/* A batch of paths, each answered by one map {path, …, error, message}, in order. `one` packs
 * the map's own entries (their count first in *ret_n, then the entries). */
typedef int (*PathOp)(msgpack_packer *pk, const char *path, FsStatus *status);

static int stat_one(msgpack_packer *pk, const char *path, FsStatus *status) {
        static const char *const types[] = {
                [FS_TYPE_FILE] = "file", [FS_TYPE_DIRECTORY] = "directory",
                [FS_TYPE_SYMLINK] = "symlink", [FS_TYPE_OTHER] = "other",
        };
        _cleanup_(fs_stat_result_done) FsStatResult res = {};
        char ts[FS_TIMESTAMP_MAX];
        bool ok;
        int r;

        r = path ? fs_stat(path, &res) : 0;
        if (r < 0)
                return r;
        if (path) {
                fs_status_done(status);
                *status = res.status;
                res.status = FS_STATUS_NULL;
        }
        ok = path && fs_status_ok(status);
        fs_format_timestamp(&res.mtime, ts);
        r = pack_key(pk, "type");
        r = r ?: pack_str(pk, ok ? types[res.type] : NULL);
        r = r ?: pack_key(pk, "size");
        r = r ?: pack_int_or_nil(pk, ok, (int64_t) res.size);
        r = r ?: pack_key(pk, "mode");
        r = r ?: pack_int_or_nil(pk, ok, res.mode);
        r = r ?: pack_key(pk, "uid");
        r = r ?: pack_int_or_nil(pk, ok, res.uid);
        r = r ?: pack_key(pk, "gid");
        r = r ?: pack_int_or_nil(pk, ok, res.gid);
        r = r ?: pack_key(pk, "modified_at");
        r = r ?: pack_str(pk, ok ? ts : NULL);
        r = r ?: pack_key(pk, "symlink_target");
        r = r ?: pack_str(pk, ok ? res.symlink_target : NULL);
        return r;
}

static int remove_one(msgpack_packer *pk, const char *path, FsStatus *status) {
        return path ? fs_remove(path, status) : 0;
}

static int path_batch(agentix_call *call, const msgpack_object *paths_arg, PathOp op, uint32_t n_own) {
        const msgpack_object_array *paths = &paths_arg->via.array;
        msgpack_packer *pk = agentix_call_result(call);
        int r;

        if (msgpack_pack_array(pk, paths->size) < 0)
                return -ENOMEM;
        for (uint32_t i = 0; i < paths->size; i++) {
                _cleanup_(fs_status_done) FsStatus status = FS_STATUS_NULL;
                _cleanup_free_ char *path = NULL;
                const char *echo = NULL;
                size_t echo_len = 0;

                (void) arg_bytes(&paths->ptr[i], &echo, &echo_len);
                r = arg_path(&paths->ptr[i], &path, &status);
                if (r < 0)
                        return r;
                r = msgpack_pack_map(pk, 3 + n_own) < 0 ? -ENOMEM : 0;
                r = r ?: pack_key(pk, "path");
                r = r ?: (echo ? pack_strn(pk, echo, echo_len) : pack_str(pk, NULL));
                /* The operation runs (and packs its own entries) only on a usable path. */
                r = r ?: op(pk, path && fs_status_ok(&status) ? path : NULL, &status);
                r = r ?: pack_status(pk, &status);
                if (r < 0)
                        return r;
        }
        return 0;
}

static int fs_stat_impl(agentix_call *call, const msgpack_object *argv, size_t argc) {
        AS_USER_SCOPE(call, "stat", &argv[1], &argv[2]);
        return path_batch(call, &argv[0], stat_one, 7);
}

static int fs_remove_impl(agentix_call *call, const msgpack_object *argv, size_t argc) {
        AS_USER_SCOPE(call, "remove", &argv[1], &argv[2]);
        return path_batch(call, &argv[0], remove_one, 0);
}

static int mkdir_one(msgpack_packer *pk, const char *path, FsStatus *status) {
        return path ? fs_mkdir(path, status) : 0;
}

static int fs_mkdir_impl(agentix_call *call, const msgpack_object *argv, size_t argc) {
        AS_USER_SCOPE(call, "mkdir", &argv[1], &argv[2]);
        return path_batch(call, &argv[0], mkdir_one, 0);
}

static int fs_move_impl(agentix_call *call, const msgpack_object *argv, size_t argc) {
        _cleanup_(fs_status_done) FsStatus status = FS_STATUS_NULL;
        _cleanup_free_ char *source = NULL, *destination = NULL;
        msgpack_packer *pk;
        int r;

        AS_USER_SCOPE(call, "move", &argv[2], &argv[3]);
        r = arg_path(&argv[0], &source, &status);
        if (r >= 0 && source && fs_status_ok(&status))
                r = arg_path(&argv[1], &destination, &status);
        if (r >= 0 && source && destination && fs_status_ok(&status))
                r = fs_move(source, destination, &status);
        if (r < 0)
                return r;
        pk = agentix_call_result(call);
        r = msgpack_pack_map(pk, 3) < 0 ? -ENOMEM : 0;
        r = r ?: pack_key(pk, "path");
        r = r ?: pack_str(pk, fs_status_ok(&status) ? destination : NULL);
        r = r ?: pack_status(pk, &status);
        return r;
}

/* ---- download ------------------------------------------------------------------------------- */

static int fs_download_impl(agentix_call *call, const msgpack_object *argv, size_t argc) {
        const msgpack_object_array *paths = &argv[0].via.array;
        msgpack_packer *pk = agentix_call_result(call);
        uint64_t budget = FS_DOWNLOAD_BUDGET, content_budget = FS_DOWNLOAD_BUDGET;
        int r;

        AS_USER_SCOPE(call, "download", &argv[2], &argv[3]);
        /* max_bytes: the caller's own bound on the content of this response (its message limit
         * may be lower than ours); files beyond it are too_large, to be fetched otherwise. */
        if (!agentix_arg_is_nil(&argv[1]))
                content_budget = (uint64_t) MAX(arg_int(&argv[1]), (int64_t) 0);

        if (msgpack_pack_array(pk, paths->size) < 0)
                return -ENOMEM;

        for (uint32_t i = 0; i < paths->size; i++) {
                _cleanup_(fs_status_done) FsStatus status = FS_STATUS_NULL;
                _cleanup_free_ char *path = NULL;
                _cleanup_close_ int fd = -EBADF;
                const char *echo = NULL;
                size_t echo_len = 0;
                uint64_t size = 0;
                unsigned mode = 0;
                bool have_mode;

                (void) arg_bytes(&paths->ptr[i], &echo, &echo_len);
                r = arg_path(&paths->ptr[i], &path, &status);
                if (r >= 0 && path)
                        r = fs_download_open(path, &fd, &size, &mode, &status);
                if (r < 0)
                        return r;
                have_mode = fs_status_ok(&status);

                /* What this entry costs besides its bytes: the echoed path and the map. */
                uint64_t overhead = echo_len + 64;
                budget = budget > overhead ? budget - overhead : 0;
                if (fs_status_ok(&status) && (size > budget || size > content_budget)) {
                        fd = safe_close(fd);
                        r = fs_status_set(&status, FS_ERROR_TOO_LARGE,
                                          "Error: File '%s' (%" PRIu64 " bytes) does not fit in this response: "
                                          "%" PRIu64 " bytes left; download it separately",
                                          path, size, MIN(budget, content_budget));
                        if (r < 0)
                                return r;
                }

                r = msgpack_pack_map(pk, 5) < 0 ? -ENOMEM : 0;
                r = r ?: pack_key(pk, "path");
                r = r ?: (echo ? pack_strn(pk, echo, echo_len) : pack_str(pk, NULL));
                r = r ?: pack_key(pk, "content");
                if (r < 0)
                        return r;
                if (fs_status_ok(&status)) {
                        budget -= size;
                        content_budget -= size;
                        /* Read straight into the outgoing frame. Exactly `size` bytes whatever
                         * happens to the file meanwhile (zero-filled if it shrank), so the bin
                         * header stays true; a file that changed is reported, not trusted. */
                        r = agentix_pack_bin_from_fd(pk, fd, (size_t) size);
                        if (r == -ENOMEM || r == -EMSGSIZE)
                                return r;
                        if (r < 0) {
                                r = fs_status_set(&status, FS_ERROR_IO,
                                                  "Error: File '%s' changed or could not be read while it was "
                                                  "downloaded; content is not valid", path);
                                if (r < 0)
                                        return r;
                        }
                } else if (msgpack_pack_nil(pk) < 0)
                        return -ENOMEM;

                r = pack_status(pk, &status);
                /* The file's permission bits, also when it was too large to send. */
                r = r ?: pack_key(pk, "mode");
                r = r ?: pack_int_or_nil(pk, have_mode, mode);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* ---- read_stream ---------------------------------------------------------------------------- */

/* read_stream(path, chunk_size), stream: the file's bytes as items of at most chunk_size bytes
 * (none for an empty file) — as many as the file had when it was opened. */
static int fs_read_stream_impl(agentix_call *call, const msgpack_object *argv, size_t argc) {
        _cleanup_(fs_status_done) FsStatus status = FS_STATUS_NULL;
        _cleanup_free_ char *path = NULL;
        _cleanup_close_ int fd = -EBADF;
        int64_t chunk = arg_int(&argv[1]);
        uint64_t left = 0;
        int r;

        AS_USER_SCOPE(call, "read_stream", &argv[2], &argv[3]);
        if (chunk < 1 || chunk > FS_READ_STREAM_CHUNK_MAX)
                return agentix_call_raise(call, "ValueError", "read_stream() argument 'chunk_size' must be between 1 and %u",
                                          FS_READ_STREAM_CHUNK_MAX);
        r = arg_path(&argv[0], &path, &status);
        if (r >= 0 && path)
                r = fs_download_open(path, &fd, &left, NULL, &status);
        if (r < 0)
                return r;
        if (!fs_status_ok(&status))
                return raise_status(call, &status);

        while (left > 0) {
                size_t n = (size_t) MIN(left, (uint64_t) chunk);
                msgpack_packer *pk = agentix_call_item_begin(call);

                r = agentix_pack_bin_from_fd(pk, fd, n);
                if (r == -ENOMEM || r == -EMSGSIZE)
                        return agentix_call_item_end(call) ?: r; /* the call ends with it */
                if (r < 0) {
                        /* Do not send the zero-filled rest. */
                        r = fs_status_set(&status, FS_ERROR_IO,
                                          "Error: File '%s' changed or could not be read while it was read", path);
                        return r < 0 ? r : raise_status(call, &status);
                }
                r = agentix_call_item_end(call);
                if (r < 0)
                        return r;
                left -= n;
        }
        return 0;
}

/* ---- watch ---------------------------------------------------------------------------------- */

static int emit_change(void *userdata, const char *path, const char *event) {
        agentix_call *call = userdata;
        msgpack_packer *pk = agentix_call_item_begin(call);
        int r;

        r = msgpack_pack_map(pk, 2) < 0 ? -ENOMEM : 0;
        r = r ?: pack_key(pk, "path");
        r = r ?: pack_str(pk, path);
        r = r ?: pack_key(pk, "event");
        r = r ?: pack_str(pk, event);
        return agentix_call_item_end(call) ?: r;
}

/* watch(path, recursive=True), stream: one {path, event} per change until the call is
 * cancelled (or the path itself goes: the stream ends after saying so). Errors are raised with
 * the code as the type: file_not_found, io_error for inotify's limits and lost events. */
static int fs_watch_impl(agentix_call *call, const msgpack_object *argv, size_t argc) {
        _cleanup_(fs_status_done) FsStatus status = FS_STATUS_NULL;
        _cleanup_(fs_watch_freep) FsWatch *w = NULL;
        _cleanup_free_ char *path = NULL;
        bool recursive = argv[1].type == MSGPACK_OBJECT_BOOLEAN && argv[1].via.boolean;
        bool ready = argv[2].type == MSGPACK_OBJECT_BOOLEAN && argv[2].via.boolean;
        int r;

        AS_USER_SCOPE(call, "watch", &argv[3], &argv[4]);
        r = arg_path(&argv[0], &path, &status);
        if (r >= 0 && path)
                r = fs_watch_new(path, recursive, &w, &status);
        if (r < 0)
                return r;
        if (!fs_status_ok(&status))
                return raise_status(call, &status);
        if (ready) {
                /* The watches are set: a change from now on is seen (E2B's WatchDir says "start"). */
                msgpack_packer *pk = agentix_call_item_begin(call);

                r = msgpack_pack_map(pk, 1) < 0 ? -ENOMEM : 0;
                r = r ?: pack_key(pk, "ready");
                r = r ?: pack_bool(pk, true);
                r = agentix_call_item_end(call) ?: r;
                if (r < 0)
                        return r;
        }

        while (!fs_watch_root_gone(w)) {
                struct pollfd p[2] = {
                        { .fd = fs_watch_fd(w), .events = POLLIN },
                        { .fd = agentix_call_wait_fd(call), .events = POLLIN },
                };

                if (poll(p, 2, -1) < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                if (agentix_call_cancelled(call))
                        return -ECANCELED;
                r = fs_watch_read(w, emit_change, call, &status);
                if (r < 0)
                        return r;
                if (!fs_status_ok(&status))
                        return raise_status(call, &status);
        }
        return 0;
}

/* ---- edit ----------------------------------------------------------------------------------- */

static int fs_edit_impl(agentix_call *call, const msgpack_object *argv, size_t argc) {
        _cleanup_(fs_edit_result_done) FsEditResult res = {};
        _cleanup_free_ char *path = NULL;
        const char *old = NULL, *new = NULL, *echo = NULL;
        size_t old_len = 0, new_len = 0, echo_len = 0;
        msgpack_packer *pk;
        int r;

        (void) arg_bytes(&argv[0], &echo, &echo_len);
        (void) arg_bytes(&argv[1], &old, &old_len);
        (void) arg_bytes(&argv[2], &new, &new_len);
        r = arg_path(&argv[0], &path, &res.status);
        if (r < 0)
                return r;
        if (path) {
                r = fs_edit(path, old, old_len, new, new_len,
                            argv[3].type == MSGPACK_OBJECT_BOOLEAN && argv[3].via.boolean, &res);
                if (r < 0)
                        return r;
        }

        pk = agentix_call_result(call);
        r = msgpack_pack_map(pk, 4) < 0 ? -ENOMEM : 0;
        r = r ?: pack_key(pk, "path");
        r = r ?: pack_strn(pk, echo, echo_len);
        r = r ?: pack_key(pk, "occurrences");
        r = r ?: pack_int_or_nil(pk, fs_status_ok(&res.status), (int64_t) res.occurrences);
        r = r ?: pack_status(pk, &res.status);
        return r;
}

/* ---- ls ------------------------------------------------------------------------------------- */

static int fs_ls_impl(agentix_call *call, const msgpack_object *argv, size_t argc) {
        _cleanup_(fs_ls_result_done) FsLsResult res = {};
        _cleanup_free_ char *path = NULL;
        msgpack_packer *pk;
        int r;

        AS_USER_SCOPE(call, "ls", &argv[1], &argv[2]);
        r = arg_path(&argv[0], &path, &res.status);
        if (r < 0)
                return r;
        if (path) {
                r = fs_ls(path, 0, &res);
                if (r < 0)
                        return r;
        }

        bool ok = fs_status_ok(&res.status);
        pk = agentix_call_result(call);
        r = msgpack_pack_map(pk, 4) < 0 ? -ENOMEM : 0;
        r = r ?: pack_key(pk, "entries");
        if (ok) {
                r = r ?: (msgpack_pack_array(pk, res.n_entries) < 0 ? -ENOMEM : 0);
                for (size_t i = 0; i < res.n_entries && r >= 0; i++)
                        r = pack_entry(pk, &res.entries[i]);
        } else
                r = r ?: pack_str(pk, NULL);
        r = r ?: pack_key(pk, "truncated");
        r = r ?: pack_bool(pk, res.truncated);
        r = r ?: pack_status(pk, &res.status);
        return r;
}

/* ---- grep ----------------------------------------------------------------------------------- */

static int fs_grep_impl(agentix_call *call, const msgpack_object *argv, size_t argc) {
        _cleanup_(fs_grep_result_done) FsGrepResult res = {};
        _cleanup_free_ char *path = NULL, *glob = NULL;
        FsGrepOptions opts = {
                .max_count = -1,
                .timeout_usec = walk_budget(call, FS_GREP_TIMEOUT_USEC),
                .cancelled = call_cancelled,
                .userdata = call,
        };
        msgpack_packer *pk;
        int r = 0;

        (void) arg_bytes(&argv[0], &opts.pattern, &opts.pattern_len);
        if (!agentix_arg_is_nil(&argv[1]))
                r = arg_path(&argv[1], &path, &res.status);
        if (r >= 0 && fs_status_ok(&res.status) && !agentix_arg_is_nil(&argv[2]))
                r = arg_pattern(&argv[2], &glob, &res.status);
        if (r < 0)
                return r;
        if (!agentix_arg_is_nil(&argv[3]))
                opts.max_count = MAX(arg_int(&argv[3]), (int64_t) 0);
        opts.path = path;
        opts.glob = glob;

        if (fs_status_ok(&res.status)) {
                r = fs_grep(&opts, &res);
                if (r < 0)
                        return r;
        }

        bool ok = fs_status_ok(&res.status);
        pk = agentix_call_result(call);
        r = msgpack_pack_map(pk, 4) < 0 ? -ENOMEM : 0;
        r = r ?: pack_key(pk, "matches");
        if (ok) {
                r = r ?: (msgpack_pack_array(pk, res.n_matches) < 0 ? -ENOMEM : 0);
                for (size_t i = 0; i < res.n_matches && r >= 0; i++) {
                        const FsGrepMatch *m = &res.matches[i];
                        r = msgpack_pack_map(pk, 3) < 0 ? -ENOMEM : 0;
                        r = r ?: pack_key(pk, "path");
                        r = r ?: pack_str(pk, fs_grep_match_path(&res, m));
                        r = r ?: pack_key(pk, "line");
                        r = r ?: (msgpack_pack_uint64(pk, m->line) < 0 ? -ENOMEM : 0);
                        r = r ?: pack_key(pk, "text");
                        r = r ?: pack_strn(pk, fs_grep_match_text(&res, m), m->text_len);
                }
        } else
                r = r ?: pack_str(pk, NULL);
        r = r ?: pack_key(pk, "truncated");
        r = r ?: pack_bool(pk, res.truncated);
        r = r ?: pack_status(pk, &res.status);
        return r;
}

/* ---- glob ----------------------------------------------------------------------------------- */

static int fs_glob_impl(agentix_call *call, const msgpack_object *argv, size_t argc) {
        _cleanup_(fs_glob_result_done) FsGlobResult res = {};
        _cleanup_free_ char *pattern = NULL, *root = NULL;
        FsGlobOptions opts = {
                .timeout_usec = walk_budget(call, FS_GLOB_TIMEOUT_USEC),
                .cancelled = call_cancelled,
                .userdata = call,
        };
        msgpack_packer *pk;
        int r;

        r = arg_pattern(&argv[0], &pattern, &res.status);
        if (r >= 0 && fs_status_ok(&res.status))
                r = arg_path(&argv[1], &root, &res.status);
        if (r < 0)
                return r;
        if (fs_status_ok(&res.status)) {
                r = fs_glob(pattern, root, &opts, &res);
                if (r < 0)
                        return r;
        }

        bool ok = fs_status_ok(&res.status);
        pk = agentix_call_result(call);
        r = msgpack_pack_map(pk, 4) < 0 ? -ENOMEM : 0;
        r = r ?: pack_key(pk, "matches");
        if (ok) {
                r = r ?: (msgpack_pack_array(pk, res.n_matches) < 0 ? -ENOMEM : 0);
                for (size_t i = 0; i < res.n_matches && r >= 0; i++)
                        r = pack_entry(pk, &res.matches[i]);
        } else
                r = r ?: pack_str(pk, NULL);
        r = r ?: pack_key(pk, "truncated");
        r = r ?: pack_bool(pk, res.truncated);
        r = r ?: pack_status(pk, &res.status);
        return r;
}

/* ---- the table ------------------------------------------------------------------------------ */

static const agentix_function fs_functions[] = {
        {
                .name = "upload",
                .signature = "(files: list, uid: int? = None, gid: int? = None, encoding: str? = None) -> list",
                .impl = fs_upload_impl,
                .doc = "Write [[path, bytes, mode?], …] atomically, creating parents (as the account uid:gid when "
                       "given, which then owns what is made; with encoding \"gzip\", each content is inflated as it "
                       "is written); one {path, error} per file, in order.",
        },
        {
                .name = "download",
                .signature = "(paths: list[str], max_bytes: int? = None, uid: int? = None, gid: int? = None) -> list",
                .impl = fs_download_impl,
                .doc = "Read files; one {path, content, error, mode} per path, in order.",
        },
        {
                .name = "mkdir",
                .signature = "(paths: list[str], uid: int? = None, gid: int? = None) -> list",
                .impl = fs_mkdir_impl,
                .doc = "mkdir -p each path (as the account uid:gid when given, which then owns them); one {path, "
                       "error} per path, in order.",
        },
        {
                .name = "stat",
                .signature = "(paths: list[str], uid: int? = None, gid: int? = None) -> list",
                .impl = fs_stat_impl,
                .doc = "lstat each path: one {path, type, size, mode, uid, gid, modified_at, symlink_target, error} "
                       "per path, in order.",
        },
        {
                .name = "move",
                .signature = "(source: str, destination: str, uid: int? = None, gid: int? = None) -> map",
                .impl = fs_move_impl,
                .doc = "Rename source to destination (parents made; a file there is replaced): {path, error}.",
        },
        {
                .name = "remove",
                .signature = "(paths: list[str], uid: int? = None, gid: int? = None) -> list",
                .impl = fs_remove_impl,
                .doc = "rm -r each path (links, not their targets): one {path, error} per path, in order.",
        },
        {
                .name = "read_stream",
                .shape = AGENTIX_SHAPE_STREAM,
                .signature = "(path: str, chunk_size: int = 1048576, uid: int? = None, gid: int? = None) -> bytes",
                .impl = fs_read_stream_impl,
                .doc = "A file's bytes as items of at most chunk_size bytes (any size of file).",
        },
        {
                .name = "write_stream",
                .shape = AGENTIX_SHAPE_BIDI,
                .signature = "(path: str, mode: int? = None, overwrite: bool = True) -> map",
                .impl = fs_write_stream_impl,
                .doc = "Write the inbox's bytes items to a file, atomically when the inbox is closed; then {path, size}.",
        },
        {
                .name = "watch",
                .shape = AGENTIX_SHAPE_STREAM,
                .signature = "(path: str, recursive: bool = True, ready: bool = False, uid: int? = None, gid: int? = None) -> map",
                .impl = fs_watch_impl,
                .doc = "Changes below a path as {path, event} (created, modified, deleted, moved_from, moved_to), "
                       "new directories watched as they appear, until cancelled; with ready, a first {ready: true} "
                       "once the watches are set.",
        },
        {
                .name = "read",
                .signature = "(path: str, offset: int = 0, limit: int = 2000) -> map",
                .impl = fs_read_impl,
                .doc = "A page of numbered lines (offset: 0-based line, limit: line count), or a small binary file.",
        },
        {
                .name = "write",
                .signature = "(path: str, content: str | bytes, overwrite: bool = False) -> map",
                .impl = fs_write_impl,
                .doc = "Create (or with overwrite, replace) a file atomically.",
        },
        {
                .name = "edit",
                .signature = "(path: str, old: str, new: str, replace_all: bool = False) -> map",
                .impl = fs_edit_impl,
                .doc = "Replace a unique string (or every occurrence) in a text file.",
        },
        {
                .name = "ls",
                .signature = "(path: str, uid: int? = None, gid: int? = None) -> map",
                .impl = fs_ls_impl,
                .doc = "The entries of a directory with size and modification time.",
        },
        {
                .name = "grep",
                .signature = "(pattern: str, path: str? = None, glob: str? = None, max_count: int? = None) -> map",
                .impl = fs_grep_impl,
                .doc = "Lines containing a literal string, recursively.",
        },
        {
                .name = "glob",
                .signature = "(pattern: str, path: str = \"/\") -> map",
                .impl = fs_glob_impl,
                .doc = "Regular files and directories matching a glob pattern below a directory.",
        },
        {},
};

const agentix_module agentix_builtin_fs = {
        .abi = AGENTIX_MODULE_ABI,
        .name = "fs",
        .doc = "Files: the deepagents file contract (upload, download, read, write, edit, ls, grep, glob), plus mkdir, "
               "stat, move, remove, read_stream, write_stream and watch.",
        .functions = fs_functions,
};

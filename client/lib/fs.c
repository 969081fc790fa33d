/* SPDX-License-Identifier: MIT */
/* The fs::* helpers: C arguments packed for the fs module, results read by fs-result.c. */

#include <limits.h>

#include "envelope.h"
#include "error.h"
#include "fs-result.h"

/* Arguments under construction: positional args and keyword args, packed as they come. */
typedef struct FsArgs {
        Buffer args, kwargs;
        msgpack_packer a, k;
        int r;
} FsArgs;

static void fs_args_init(FsArgs *f, uint32_t n_args, uint32_t n_kwargs) {
        *f = (FsArgs) {};
        mp_packer_init_buffer(&f->a, &f->args);
        mp_packer_init_buffer(&f->k, &f->kwargs);
        f->r |= msgpack_pack_array(&f->a, n_args);
        f->r |= msgpack_pack_map(&f->k, n_kwargs);
}

static void fs_args_done(FsArgs *f) {
        buffer_done(&f->args);
        buffer_done(&f->kwargs);
}

static void fs_kw(FsArgs *f, const char *key) {
        f->r |= mp_pack_cstr(&f->k, key);
}

static void pack_bin(msgpack_packer *pk, const void *data, size_t size, int *r) {
        *r |= msgpack_pack_bin(pk, size);
        if (size > 0)
                *r |= msgpack_pack_bin_body(pk, data, size);
}

/* Call fs::<function> and hand back its result. */
static int fs_call(agentix_client *c, const char *function, FsArgs *f, msgpack_unpacked *ret,
                   agentix_error *ret_error) {
        char callable[32];

        if (f->r)
                return error_set(ret_error, AGENTIX_E_OVERFLOW, -ENOMEM, "out of memory");
        snprintf(callable, sizeof(callable), "fs::%s", function);
        return agentix_call(c, callable,
                            &(agentix_args) { .args = buffer_data(&f->args), .args_size = f->args.len,
                                              .kwargs = buffer_data(&f->kwargs), .kwargs_size = f->kwargs.len },
                            NULL, ret, ret_error);
}

#define _cleanup_fs_args_ _cleanup_(fs_args_done)

static int need(bool ok, const char *function, agentix_error *ret_error) {
        return ok ? 0 : error_set(ret_error, AGENTIX_E_INVALID, -EINVAL, "%s: a required argument is NULL", function);
}

AGENTIX_API int agentix_upload(agentix_client *c, const agentix_file *files, size_t n_files,
                               agentix_file_result **ret_results, agentix_error *ret_error) {
        _cleanup_fs_args_ FsArgs f = {};
        msgpack_unpacked result;
        int r;

        r = need((files || n_files == 0) && ret_results && n_files <= UINT32_MAX, "agentix_upload", ret_error);
        if (r < 0)
                return r;
        fs_args_init(&f, 1, 0);
        f.r |= msgpack_pack_array(&f.a, (uint32_t) n_files);
        for (size_t i = 0; i < n_files; i++) {
                if (!files[i].path || (!files[i].data && files[i].size > 0))
                        return error_set(ret_error, AGENTIX_E_INVALID, -EINVAL, "agentix_upload: file %zu has no path "
                                         "or no data", i);
                f.r |= msgpack_pack_array(&f.a, 2);
                f.r |= mp_pack_cstr(&f.a, files[i].path);
                pack_bin(&f.a, files[i].data, files[i].size, &f.r);
        }
        r = fs_call(c, "upload", &f, &result, ret_error);
        if (r < 0)
                return r;
        r = fs_result_files(&result.data, n_files, ret_results, ret_error);
        msgpack_unpacked_destroy(&result);
        return r;
}

AGENTIX_API int agentix_download(agentix_client *c, const char *const *paths, size_t n_paths,
                                 agentix_file_result **ret_results, agentix_error *ret_error) {
        _cleanup_fs_args_ FsArgs f = {};
        msgpack_unpacked result;
        int r;

        r = need((paths || n_paths == 0) && ret_results && n_paths <= UINT32_MAX, "agentix_download", ret_error);
        if (r < 0)
                return r;
        fs_args_init(&f, 1, 0);
        f.r |= msgpack_pack_array(&f.a, (uint32_t) n_paths);
        for (size_t i = 0; i < n_paths; i++) {
                if (!paths[i])
                        return error_set(ret_error, AGENTIX_E_INVALID, -EINVAL, "agentix_download: path %zu is NULL", i);
                f.r |= mp_pack_cstr(&f.a, paths[i]);
        }
        r = fs_call(c, "download", &f, &result, ret_error);
        if (r < 0)
                return r;
        r = fs_result_files(&result.data, n_paths, ret_results, ret_error);
        msgpack_unpacked_destroy(&result);
        return r;
}

AGENTIX_API int agentix_read(agentix_client *c, const char *path, int64_t offset, int64_t limit,
                             agentix_read_result *ret, agentix_error *ret_error) {
        _cleanup_fs_args_ FsArgs f = {};
        msgpack_unpacked result;
        int r;

        r = need(path && ret, "agentix_read", ret_error);
        if (r < 0)
                return r;
        fs_args_init(&f, 1, 2);
        f.r |= mp_pack_cstr(&f.a, path);
        fs_kw(&f, "offset");
        f.r |= msgpack_pack_int64(&f.k, offset);
        fs_kw(&f, "limit");
        f.r |= msgpack_pack_int64(&f.k, limit);
        r = fs_call(c, "read", &f, &result, ret_error);
        if (r < 0)
                return r;
        r = fs_result_read(&result.data, ret, ret_error);
        msgpack_unpacked_destroy(&result);
        return r;
}

/* Call a single-file function whose result only matters for its error (and one count). */
static int fs_call_checked(agentix_client *c, const char *function, FsArgs *f, const char *count_key,
                           int64_t *ret_count, agentix_error *ret_error) {
        msgpack_unpacked result;
        int r;

        r = fs_call(c, function, f, &result, ret_error);
        if (r < 0)
                return r;
        r = fs_result_check(&result.data, ret_error);
        if (r >= 0 && count_key) {
                const msgpack_object *v = mp_map_get(&result.data, count_key);
                if (!v || v->type != MSGPACK_OBJECT_POSITIVE_INTEGER)
                        r = error_set(ret_error, AGENTIX_E_PROTOCOL, -EPROTO, "fs::%s returned no %s", function,
                                      count_key);
                else
                        *ret_count = (int64_t) MIN(v->via.u64, (uint64_t) INT64_MAX);
        }
        msgpack_unpacked_destroy(&result);
        return r;
}

AGENTIX_API int agentix_write(agentix_client *c, const char *path, const void *content, size_t size, bool overwrite,
                              agentix_error *ret_error) {
        _cleanup_fs_args_ FsArgs f = {};
        int r;

        r = need(path && (content || size == 0), "agentix_write", ret_error);
        if (r < 0)
                return r;
        fs_args_init(&f, 2, 1);
        f.r |= mp_pack_cstr(&f.a, path);
        pack_bin(&f.a, content, size, &f.r);
        fs_kw(&f, "overwrite");
        f.r |= overwrite ? msgpack_pack_true(&f.k) : msgpack_pack_false(&f.k);
        return fs_call_checked(c, "write", &f, NULL, NULL, ret_error);
}

AGENTIX_API int agentix_edit(agentix_client *c, const char *path, const char *old_text, const char *new_text,
                             bool replace_all, unsigned *ret_occurrences, agentix_error *ret_error) {
        _cleanup_fs_args_ FsArgs f = {};
        int64_t n = 0;
        int r;

        r = need(path && old_text && new_text, "agentix_edit", ret_error);
        if (r < 0)
                return r;
        fs_args_init(&f, 3, 1);
        f.r |= mp_pack_cstr(&f.a, path);
        f.r |= mp_pack_cstr(&f.a, old_text);
        f.r |= mp_pack_cstr(&f.a, new_text);
        fs_kw(&f, "replace_all");
        f.r |= replace_all ? msgpack_pack_true(&f.k) : msgpack_pack_false(&f.k);
        r = fs_call_checked(c, "edit", &f, "occurrences", &n, ret_error);
        if (r >= 0 && ret_occurrences)
                *ret_occurrences = (unsigned) MIN(n, (int64_t) UINT_MAX);
        return r;
}

AGENTIX_API int agentix_ls(agentix_client *c, const char *path, agentix_entries *ret, agentix_error *ret_error) {
        _cleanup_fs_args_ FsArgs f = {};
        msgpack_unpacked result;
        int r;

        r = need(path && ret, "agentix_ls", ret_error);
        if (r < 0)
                return r;
        fs_args_init(&f, 1, 0);
        f.r |= mp_pack_cstr(&f.a, path);
        r = fs_call(c, "ls", &f, &result, ret_error);
        if (r < 0)
                return r;
        r = fs_result_entries(&result.data, "entries", ret, ret_error);
        msgpack_unpacked_destroy(&result);
        return r;
}

AGENTIX_API int agentix_glob(agentix_client *c, const char *pattern, const char *path, agentix_entries *ret,
                             agentix_error *ret_error) {
        _cleanup_fs_args_ FsArgs f = {};
        msgpack_unpacked result;
        int r;

        r = need(pattern && ret, "agentix_glob", ret_error);
        if (r < 0)
                return r;
        fs_args_init(&f, 1, path ? 1 : 0);
        f.r |= mp_pack_cstr(&f.a, pattern);
        if (path) {
                fs_kw(&f, "path");
                f.r |= mp_pack_cstr(&f.k, path);
        }
        r = fs_call(c, "glob", &f, &result, ret_error);
        if (r < 0)
                return r;
        r = fs_result_entries(&result.data, "matches", ret, ret_error);
        msgpack_unpacked_destroy(&result);
        return r;
}

AGENTIX_API int agentix_grep(agentix_client *c, const char *pattern, const char *path, const char *glob,
                             int64_t max_count, agentix_matches *ret, agentix_error *ret_error) {
        _cleanup_fs_args_ FsArgs f = {};
        msgpack_unpacked result;
        int r;

        r = need(pattern && ret, "agentix_grep", ret_error);
        if (r < 0)
                return r;
        fs_args_init(&f, 1, !!path + !!glob + (max_count >= 0));
        f.r |= mp_pack_cstr(&f.a, pattern);
        if (path) {
                fs_kw(&f, "path");
                f.r |= mp_pack_cstr(&f.k, path);
        }
        if (glob) {
                fs_kw(&f, "glob");
                f.r |= mp_pack_cstr(&f.k, glob);
        }
        if (max_count >= 0) {
                fs_kw(&f, "max_count");
                f.r |= msgpack_pack_int64(&f.k, max_count);
        }
        r = fs_call(c, "grep", &f, &result, ret_error);
        if (r < 0)
                return r;
        r = fs_result_matches(&result.data, ret, ret_error);
        msgpack_unpacked_destroy(&result);
        return r;
}

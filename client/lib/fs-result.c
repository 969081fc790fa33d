/* SPDX-License-Identifier: MIT */
#include "envelope.h"
#include "error.h"
#include "fs-result.h"
#include "value.h"

static int protocol_error(agentix_error *e, const char *what) {
        return error_set(e, AGENTIX_E_PROTOCOL, -EPROTO, "the fs module returned %s of an unexpected shape", what);
}

static int oom(agentix_error *e) {
        return error_set(e, AGENTIX_E_OVERFLOW, -ENOMEM, "out of memory");
}

/* -EPROTO/-ENOMEM from a value_* reader, as an error. */
static int read_error(int r, agentix_error *e, const char *what) {
        return r == -ENOMEM ? oom(e) : protocol_error(e, what);
}

int fs_result_check(const msgpack_object *map, agentix_error *ret_error) {
        const msgpack_object *code;

        if (!map || map->type != MSGPACK_OBJECT_MAP)
                return protocol_error(ret_error, "a result");
        code = mp_map_get(map, "error");
        if (!code || code->type == MSGPACK_OBJECT_NIL)
                return 0;
        return error_from_file(ret_error, code, mp_map_get(map, "message"));
}

AGENTIX_API void agentix_file_results_free(agentix_file_result *r, size_t n) {
        if (!r)
                return;
        for (size_t i = 0; i < n; i++) {
                free(r[i].path);
                free(r[i].content);
                free(r[i].error);
                free(r[i].message);
        }
        free(r);
}

int fs_result_files(const msgpack_object *list, size_t n, agentix_file_result **ret, agentix_error *ret_error) {
        agentix_file_result *a;
        int r;

        if (!list || list->type != MSGPACK_OBJECT_ARRAY || list->via.array.size != n)
                return protocol_error(ret_error, "a file list");
        a = calloc(n ?: 1, sizeof(*a));
        if (!a)
                return oom(ret_error);
        for (size_t i = 0; i < n; i++) {
                const msgpack_object *m = &list->via.array.ptr[i];
                char *content = NULL;

                if (m->type != MSGPACK_OBJECT_MAP) {
                        r = protocol_error(ret_error, "a file entry");
                        goto fail;
                }
                r = value_get_bytes(m, "path", &a[i].path, NULL);
                if (r >= 0)
                        r = value_get_bytes(m, "error", &a[i].error, NULL);
                if (r >= 0)
                        r = value_get_bytes(m, "message", &a[i].message, NULL);
                if (r >= 0)
                        r = value_get_bytes(m, "content", &content, &a[i].size);
                if (r < 0) {
                        r = read_error(r, ret_error, "a file entry");
                        goto fail;
                }
                a[i].content = content;
        }
        *ret = a;
        return 0;

fail:
        agentix_file_results_free(a, n);
        return r;
}

AGENTIX_API void agentix_read_result_done(agentix_read_result *r) {
        if (!r)
                return;
        free(r->content);
        free(r->data);
        free(r->message);
        *r = (agentix_read_result) {};
}

int fs_result_read(const msgpack_object *map, agentix_read_result *ret, agentix_error *ret_error) {
        agentix_read_result res = { .total_lines = -1, .next_offset = -1 };
        char *data = NULL;
        int r;

        r = fs_result_check(map, ret_error);
        if (r < 0)
                return r;

        r = value_get_bytes(map, "content", &res.content, &res.content_size);
        if (r >= 0)
                r = value_get_bytes(map, "data", &data, &res.data_size);
        res.data = data;
        if (r >= 0)
                r = value_get_bytes(map, "message", &res.message, NULL);
        if (r >= 0)
                r = value_get_int(map, "total_lines", -1, &res.total_lines);
        if (r >= 0)
                r = value_get_int(map, "start_line", 0, &res.start_line);
        if (r >= 0)
                r = value_get_int(map, "end_line", 0, &res.end_line);
        if (r >= 0)
                r = value_get_int(map, "next_offset", -1, &res.next_offset);
        if (r >= 0)
                r = value_get_bool(map, "truncated", false, &res.truncated);
        if (r < 0) {
                agentix_read_result_done(&res);
                return read_error(r, ret_error, "a read result");
        }
        *ret = res;
        return 0;
}

AGENTIX_API void agentix_entries_done(agentix_entries *e) {
        if (!e)
                return;
        for (size_t i = 0; i < e->n_entries; i++) {
                free(e->entries[i].path);
                free(e->entries[i].modified_at);
        }
        free(e->entries);
        *e = (agentix_entries) {};
}

int fs_result_entries(const msgpack_object *map, const char *key, agentix_entries *ret, agentix_error *ret_error) {
        agentix_entries res = {};
        const msgpack_object *list;
        int r;

        r = fs_result_check(map, ret_error);
        if (r < 0)
                return r;
        list = mp_map_get(map, key);
        if (!list || list->type != MSGPACK_OBJECT_ARRAY)
                return protocol_error(ret_error, "a listing");
        r = value_get_bool(map, "truncated", false, &res.truncated);
        if (r < 0)
                return protocol_error(ret_error, "a listing");

        res.entries = calloc(list->via.array.size ?: 1, sizeof(*res.entries));
        if (!res.entries)
                return oom(ret_error);
        for (uint32_t i = 0; i < list->via.array.size; i++) {
                const msgpack_object *m = &list->via.array.ptr[i];
                agentix_entry *e = &res.entries[i];
                int64_t size, mode;

                res.n_entries++;
                if (m->type != MSGPACK_OBJECT_MAP) {
                        r = -EPROTO;
                        break;
                }
                r = value_get_bytes(m, "path", &e->path, NULL);
                if (r >= 0 && !e->path)
                        r = -EPROTO;
                if (r >= 0)
                        r = value_get_bool(m, "is_dir", false, &e->is_dir);
                if (r >= 0)
                        r = value_get_int(m, "size", 0, &size);
                if (r >= 0)
                        e->size = size < 0 ? 0 : (uint64_t) size;
                if (r >= 0)
                        r = value_get_bytes(m, "modified_at", &e->modified_at, NULL);
                if (r >= 0)
                        r = value_get_int(m, "mode", -1, &mode);
                if (r >= 0)
                        e->mode = mode >= 0 && mode <= 07777 ? (int) mode : -1;
                if (r < 0)
                        break;
        }
        if (r < 0) {
                agentix_entries_done(&res);
                return read_error(r, ret_error, "a listing entry");
        }
        *ret = res;
        return 0;
}

AGENTIX_API void agentix_matches_done(agentix_matches *m) {
        if (!m)
                return;
        for (size_t i = 0; i < m->n_matches; i++) {
                free(m->matches[i].path);
                free(m->matches[i].text);
        }
        free(m->matches);
        *m = (agentix_matches) {};
}

int fs_result_matches(const msgpack_object *map, agentix_matches *ret, agentix_error *ret_error) {
        agentix_matches res = {};
        const msgpack_object *list;
        int r;

        r = fs_result_check(map, ret_error);
        if (r < 0)
                return r;
        list = mp_map_get(map, "matches");
        if (!list || list->type != MSGPACK_OBJECT_ARRAY || value_get_bool(map, "truncated", false, &res.truncated) < 0)
                return protocol_error(ret_error, "grep matches");

        res.matches = calloc(list->via.array.size ?: 1, sizeof(*res.matches));
        if (!res.matches)
                return oom(ret_error);
        for (uint32_t i = 0; i < list->via.array.size; i++) {
                const msgpack_object *m = &list->via.array.ptr[i];
                agentix_match *x = &res.matches[i];
                int64_t line;

                res.n_matches++;
                if (m->type != MSGPACK_OBJECT_MAP) {
                        r = -EPROTO;
                        break;
                }
                r = value_get_bytes(m, "path", &x->path, NULL);
                if (r >= 0 && !x->path)
                        r = -EPROTO;
                if (r >= 0)
                        r = value_get_int(m, "line", 0, &line);
                if (r >= 0 && line < 0)
                        r = -EPROTO;
                if (r >= 0)
                        x->line = (uint64_t) line;
                if (r >= 0)
                        r = value_get_bytes(m, "text", &x->text, NULL);
                if (r >= 0 && !x->text)
                        x->text = strdup("");
                if (r >= 0 && !x->text)
                        r = -ENOMEM;
                if (r < 0)
                        break;
        }
        if (r < 0) {
                agentix_matches_done(&res);
                return read_error(r, ret_error, "a grep match");
        }
        *ret = res;
        return 0;
}

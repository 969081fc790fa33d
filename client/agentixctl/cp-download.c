/* SPDX-License-Identifier: MIT */
/* cp, sandbox → here: walk the remote tree with fs::ls (--jobs listings in flight), make the
 * directories here as they are found, then fetch the files with fs::download in batches of
 * about --batch-size bytes (by the sizes ls reported), --jobs calls in flight, writing each
 * file as its batch arrives. Files above CP_BATCH_FILE_MAX, and any the server finds too large
 * for one message, are streamed with sandbox::exec running cat. */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agentixctl.h"
#include "cp.h"
#include "envelope.h"
#include "fail.h"
#include "shell-quote.h"

typedef struct Download {
        Cp *cp;
        const char *src, *dst;
        CpList list;

        size_t next_dir;        /* list.dirs[next_dir…] are still to be listed */
        size_t next_file;       /* list.files[next_file…] are still to be fetched */
        size_t *streams;        /* files to fetch with cat: too large for a batch */
        size_t n_streams, next_stream;
        bool walking;
} Download;

typedef struct Job {
        Download *d;
        agentix_request *request;
        size_t dir;             /* ls: the directory's index */
        size_t *files;          /* download: indices into list.files */
        size_t n;
        uint64_t bytes;
        /* cat: */
        int fd;
        char *local;
        uint64_t written;
        bool have_exit;
        int exit_code;
        char err[512];
        size_t err_len;
} Job;

static void job_free(Job *j) {
        if (!j)
                return;
        agentix_request_unref(j->request);
        safe_close(j->fd);
        free(j->files);
        free(j->local);
        free(j);
}

static Job *job_new(Download *d) {
        Job *j = calloc(1, sizeof(Job));

        if (!j)
                return NULL;
        j->d = d;
        j->fd = -EBADF;
        return j;
}

static const char *message_text(const msgpack_object *map, const char *fallback, int *ret_len) {
        const msgpack_object *m = mp_map_get(map, "message");
        const char *text = fallback;
        int len = (int) strlen(fallback);

        if (m && m->type == MSGPACK_OBJECT_STR) {
                text = m->via.str.ptr;
                len = (int) m->via.str.size;
                if (len >= 7 && strneq(text, "Error: ", 7)) {
                        text += 7;
                        len -= 7;
                }
        }
        *ret_len = len;
        return text;
}

static int make_local_dir(Download *d, const char *rel) {
        _cleanup_free_ char *path = cp_path_join(d->dst, rel);
        struct stat st;

        if (!path)
                return -ENOMEM;
        if (mkdir(path, 0777) < 0) {
                if (errno != EEXIST || stat(path, &st) < 0 || !S_ISDIR(st.st_mode)) {
                        cp_fail(d->cp, EXIT_IOERR, "cannot create the directory '%s': %m", path);
                        return 0;
                }
        }
        return 0;
}

/* One entry of a listing: a directory to walk, or a file to fetch. */
static int add_entry(Download *d, const char *dir_rel, const char *path, size_t path_len, bool is_dir, uint64_t size) {
        _cleanup_free_ char *rel = NULL;
        const char *name = memrchr(path, '/', path_len);
        size_t name_len;
        int r;

        name = name ? name + 1 : path;
        name_len = path_len - (size_t) (name - path);
        if (name_len == 0 || memchr(name, 0, name_len))
                return 0;
        if (asprintf(&rel, "%s%s%.*s", dir_rel, *dir_rel ? "/" : "", (int) name_len, name) < 0)
                return -ENOMEM;
        if (is_dir) {
                r = cp_list_add_dir(&d->list, rel);
                if (r < 0)
                        return r;
                return make_local_dir(d, rel);
        }
        return cp_list_add_file(&d->list, rel, size, 0);
}

static void pump(Download *d);

static void on_ls_done(agentix_request *r, const msgpack_object *result, const agentix_error *e, void *userdata) {
        Job *j = userdata;
        Download *d = j->d;
        Cp *cp = d->cp;
        _cleanup_free_ char *dir_rel = strdup(d->list.dirs[j->dir]);
        _cleanup_free_ char *remote = cp_path_join(d->src, d->list.dirs[j->dir]);
        const msgpack_object *entries, *err, *trunc;
        char why[1024];

        cp->in_flight--;
        if (!dir_rel || !remote) {
                cp->aborted = true;
                cp_fail(cp, EXIT_SOFTWARE, "out of memory");
                goto finish;
        }
        if (e && e->kind != AGENTIX_E_NONE) {
                cp->aborted = true;
                cp_fail(cp, exit_status_from_error(e), "listing %s failed: %s", remote, error_reason(e, why, sizeof(why)));
                goto finish;
        }
        if (!result) {
                cp->aborted = true;
                cp_fail(cp, EXIT_PROTOCOL, "fs::ls answered nothing");
                goto finish;
        }
        err = mp_map_get(result, "error");
        if (err && err->type != MSGPACK_OBJECT_NIL) {
                int len;
                const char *text = message_text(result, remote, &len);

                cp_fail(cp, EXIT_FAILED, "%.*s", len, text);
                goto finish;
        }
        entries = mp_map_get(result, "entries");
        if (!entries || entries->type != MSGPACK_OBJECT_ARRAY) {
                cp->aborted = true;
                cp_fail(cp, EXIT_PROTOCOL, "fs::ls answered something unexpected");
                goto finish;
        }
        trunc = mp_map_get(result, "truncated");
        if (trunc && trunc->type == MSGPACK_OBJECT_BOOLEAN && trunc->via.boolean)
                cp_fail(cp, EXIT_FAILED, "%s has more entries than the server lists: not all were copied", remote);

        for (uint32_t i = 0; i < entries->via.array.size; i++) {
                const msgpack_object *en = &entries->via.array.ptr[i], *is_dir = mp_map_get(en, "is_dir");
                const char *path;
                size_t path_len;
                int64_t size = 0;

                if (mp_map_get_str(en, "path", &path, &path_len) < 0)
                        continue;
                (void) mp_map_get_int(en, "size", &size);
                if (add_entry(d, dir_rel, path, path_len, is_dir && is_dir->type == MSGPACK_OBJECT_BOOLEAN && is_dir->via.boolean,
                              size > 0 ? (uint64_t) size : 0) < 0) {
                        cp->aborted = true;
                        cp_fail(cp, EXIT_SOFTWARE, "out of memory");
                        break;
                }
        }

finish:
        job_free(j);
        pump(d);
}

static int start_ls(Download *d) {
        _cleanup_buffer_ Buffer args = BUFFER_NULL;
        _cleanup_free_ char *remote = NULL;
        msgpack_packer pk;
        Job *j;
        int r;

        remote = cp_path_join(d->src, d->list.dirs[d->next_dir]);
        if (!remote)
                return -ENOMEM;
        mp_packer_init_buffer(&pk, &args);
        if (msgpack_pack_array(&pk, 1) < 0 || mp_pack_cstr(&pk, remote) < 0)
                return -ENOMEM;
        j = job_new(d);
        if (!j)
                return -ENOMEM;
        j->dir = d->next_dir++;

        agentix_args a = { .args = buffer_data(&args), .args_size = args.len };
        agentix_call_options o = { .shape = AGENTIX_CALL_UNARY };
        agentix_request_handlers h = { .done = on_ls_done };
        r = agentix_call_async(d->cp->client, "fs::ls", &a, &o, &h, j, &j->request);
        if (r < 0) {
                job_free(j);
                return r;
        }
        d->cp->in_flight++;
        return 0;
}

/* ---- files ---------------------------------------------------------------------------------- */

static int add_stream(Download *d, size_t file) {
        size_t *s = reallocarray(d->streams, d->n_streams + 1, sizeof(size_t));

        if (!s)
                return -ENOMEM;
        d->streams = s;
        s[d->n_streams++] = file;
        return 0;
}

static void write_file(Download *d, const CpFile *f, const void *data, size_t size) {
        _cleanup_free_ char *local = cp_path_join(d->dst, f->rel);
        _cleanup_close_ int fd = -EBADF;
        int r;

        if (!local) {
                cp_fail(d->cp, EXIT_SOFTWARE, "out of memory");
                return;
        }
        fd = open(local, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOCTTY, 0666);
        if (fd < 0) {
                cp_fail(d->cp, EXIT_IOERR, "cannot create '%s': %m", local);
                return;
        }
        r = loop_write(fd, data, size);
        if (r >= 0 && close(TAKE_FD(fd)) < 0)
                r = -errno;
        if (r < 0) {
                cp_fail(d->cp, EXIT_IOERR, "cannot write '%s': %s", local, strerror(-r));
                return;
        }
        d->cp->files++;
        d->cp->bytes += size;
}

static void on_download_done(agentix_request *r, const msgpack_object *result, const agentix_error *e, void *userdata) {
        Job *j = userdata;
        Download *d = j->d;
        Cp *cp = d->cp;
        uint64_t before_files = cp->files, before_bytes = cp->bytes;
        char why[1024];

        cp->in_flight--;
        if (e && e->kind != AGENTIX_E_NONE) {
                cp->aborted = true;
                cp_fail(cp, exit_status_from_error(e), "download from %s failed: %s", d->src,
                        error_reason(e, why, sizeof(why)));
                goto finish;
        }
        if (!result || result->type != MSGPACK_OBJECT_ARRAY || result->via.array.size != j->n) {
                cp->aborted = true;
                cp_fail(cp, EXIT_PROTOCOL, "fs::download answered something unexpected");
                goto finish;
        }
        for (size_t i = 0; i < j->n; i++) {
                const msgpack_object *o = &result->via.array.ptr[i], *err = mp_map_get(o, "error"),
                                     *content = mp_map_get(o, "content");
                const CpFile *f = &d->list.files[j->files[i]];

                if (err && err->type != MSGPACK_OBJECT_NIL) {
                        _cleanup_free_ char *remote = cp_path_join(d->src, f->rel);
                        int len;
                        const char *text = message_text(o, strna(remote), &len);

                        if (mp_str_eq(err, "too_large")) {
                                /* Grew past what one message holds: stream it instead. */
                                if (add_stream(d, j->files[i]) < 0)
                                        cp_fail(cp, EXIT_SOFTWARE, "out of memory");
                        } else if (mp_str_eq(err, "is_directory") || mp_str_eq(err, "not_a_file"))
                                cp_skip(cp, "skipping %.*s (a symbolic link to a directory, or a special file)", len, text);
                        else
                                cp_fail(cp, EXIT_FAILED, "%.*s", len, text);
                        continue;
                }
                if (!content || (content->type != MSGPACK_OBJECT_BIN && content->type != MSGPACK_OBJECT_STR)) {
                        cp_fail(cp, EXIT_PROTOCOL, "fs::download sent no content for %s", f->rel);
                        continue;
                }
                write_file(d, f, content->via.bin.ptr, content->via.bin.size);
        }

finish:
        progress_add(&cp->progress, cp->bytes - before_bytes, cp->files - before_files);
        job_free(j);
        pump(d);
}

static int start_download_batch(Download *d) {
        Cp *cp = d->cp;
        _cleanup_buffer_ Buffer args = BUFFER_NULL;
        msgpack_packer pk;
        size_t n = 0;
        uint64_t bytes = 0;
        Job *j;
        int r;

        /* Which files: up to batch_size bytes by the listed sizes; large ones go to streams. */
        j = job_new(d);
        if (!j)
                return -ENOMEM;
        j->files = calloc(CP_BATCH_FILES_MAX, sizeof(size_t));
        if (!j->files) {
                job_free(j);
                return -ENOMEM;
        }
        while (d->next_file < d->list.n_files && n < CP_BATCH_FILES_MAX) {
                const CpFile *f = &d->list.files[d->next_file];

                if (f->size > CP_BATCH_FILE_MAX) {
                        if (add_stream(d, d->next_file) < 0) {
                                job_free(j);
                                return -ENOMEM;
                        }
                        d->next_file++;
                        continue;
                }
                if (n > 0 && bytes + f->size > cp->batch_size)
                        break;
                j->files[n++] = d->next_file++;
                bytes += f->size;
        }
        if (n == 0) {
                job_free(j);
                return 0;
        }
        j->n = n;
        j->bytes = bytes;

        mp_packer_init_buffer(&pk, &args);
        r = msgpack_pack_array(&pk, 1) | msgpack_pack_array(&pk, n);
        for (size_t i = 0; i < n && r >= 0; i++) {
                _cleanup_free_ char *remote = cp_path_join(d->src, d->list.files[j->files[i]].rel);
                r = remote ? mp_pack_cstr(&pk, remote) : -ENOMEM;
        }
        if (r < 0) {
                job_free(j);
                return -ENOMEM;
        }

        agentix_args a = { .args = buffer_data(&args), .args_size = args.len };
        agentix_call_options o = { .shape = AGENTIX_CALL_UNARY };
        agentix_request_handlers h = { .done = on_download_done };
        r = agentix_call_async(cp->client, "fs::download", &a, &o, &h, j, &j->request);
        if (r < 0) {
                job_free(j);
                return r;
        }
        cp->in_flight++;
        return 1;
}

/* ---- large files: cat through sandbox::exec ------------------------------------------------- */

static void on_cat_item(agentix_request *r, const msgpack_object *v, void *userdata) {
        Job *j = userdata;
        Cp *cp = j->d->cp;
        const msgpack_object *stream = mp_map_get(v, "stream"), *data = mp_map_get(v, "data");
        int64_t code;
        int k;

        if (stream && data && (data->type == MSGPACK_OBJECT_BIN || data->type == MSGPACK_OBJECT_STR)) {
                if (mp_str_eq(stream, "stderr")) {
                        size_t n = MIN((size_t) data->via.bin.size, sizeof(j->err) - 1 - j->err_len);
                        memcpy(j->err + j->err_len, data->via.bin.ptr, n);
                        j->err_len += n;
                        j->err[j->err_len] = 0;
                        return;
                }
                if (j->fd < 0)
                        return;
                k = loop_write(j->fd, data->via.bin.ptr, data->via.bin.size);
                if (k < 0) {
                        cp_fail(cp, EXIT_IOERR, "cannot write '%s': %s", j->local, strerror(-k));
                        j->fd = safe_close(j->fd);
                        (void) agentix_request_cancel(j->request);
                        return;
                }
                j->written += data->via.bin.size;
                cp->bytes += data->via.bin.size;
                progress_add(&cp->progress, data->via.bin.size, 0);
                return;
        }
        if (mp_map_get_int(v, "exit_code", &code) >= 0) {
                j->have_exit = true;
                j->exit_code = (int) code;
        }
}

static void on_cat_done(agentix_request *r, const msgpack_object *result, const agentix_error *e, void *userdata) {
        Job *j = userdata;
        Download *d = j->d;
        Cp *cp = d->cp;
        bool ok = false;
        char why[1024];

        cp->in_flight--;
        if (e && e->kind != AGENTIX_E_NONE)
                cp_fail(cp, exit_status_from_error(e), "cannot stream %s: %s", j->local, error_reason(e, why, sizeof(why)));
        else if (!j->have_exit)
                cp_fail(cp, EXIT_PROTOCOL, "cannot stream %s: the call ended without an exit status", j->local);
        else if (j->exit_code != 0)
                cp_fail(cp, EXIT_FAILED, "cannot stream %s (cat exited with status %d)%s%.*s", j->local, j->exit_code,
                        j->err_len ? ": " : "", (int) strcspn(j->err, "\n"), j->err);
        else if (j->fd >= 0) {
                if (close(TAKE_FD(j->fd)) < 0)
                        cp_fail(cp, EXIT_IOERR, "cannot write '%s': %m", j->local);
                else
                        ok = true;
        }
        if (ok) {
                cp->files++;
                progress_add(&cp->progress, 0, 1);
        } else if (j->local)
                (void) unlink(j->local); /* no half files */
        job_free(j);
        pump(d);
}

static int start_cat(Download *d) {
        Cp *cp = d->cp;
        const CpFile *f = &d->list.files[d->streams[d->next_stream++]];
        _cleanup_free_ char *remote = cp_path_join(d->src, f->rel), *quoted = NULL, *command = NULL;
        _cleanup_buffer_ Buffer kwargs = BUFFER_NULL;
        msgpack_packer pk;
        Job *j;
        int r;

        if (!remote || !(quoted = shell_quote(remote)) || asprintf(&command, "cat -- %s", quoted) < 0)
                return -ENOMEM;
        j = job_new(d);
        if (!j)
                return -ENOMEM;
        j->local = cp_path_join(d->dst, f->rel);
        if (!j->local) {
                job_free(j);
                return -ENOMEM;
        }
        j->fd = open(j->local, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOCTTY, 0666);
        if (j->fd < 0) {
                cp_fail(cp, EXIT_IOERR, "cannot create '%s': %m", j->local);
                free(j->local);
                j->local = NULL;
                job_free(j);
                return 0;
        }

        mp_packer_init_buffer(&pk, &kwargs);
        r = msgpack_pack_map(&pk, 3);
        r |= mp_pack_cstr(&pk, "command") | mp_pack_cstr(&pk, command);
        r |= mp_pack_cstr(&pk, "timeout") | msgpack_pack_double(&pk, 0);
        r |= mp_pack_cstr(&pk, "max_output") | msgpack_pack_int64(&pk, INT64_MAX);
        if (r != 0) {
                job_free(j);
                return -ENOMEM;
        }
        agentix_args a = { .kwargs = buffer_data(&kwargs), .kwargs_size = kwargs.len };
        agentix_call_options o = { .shape = AGENTIX_CALL_STREAM };
        agentix_request_handlers h = { .item = on_cat_item, .done = on_cat_done };
        r = agentix_call_async(cp->client, "sandbox::exec", &a, &o, &h, j, &j->request);
        if (r < 0) {
                job_free(j);
                return r;
        }
        cp->in_flight++;
        return 1;
}

/* ---- driving it ------------------------------------------------------------------------------ */

static void pump(Download *d) {
        Cp *cp = d->cp;
        int r = 0;

        while (!cp->aborted && cp->in_flight < cp->jobs && r >= 0) {
                if (d->walking) {
                        if (d->next_dir >= d->list.n_dirs)
                                break; /* wait for the listings in flight: they may add more */
                        r = start_ls(d);
                } else if (d->next_file < d->list.n_files) {
                        r = start_download_batch(d);
                } else if (d->next_stream < d->n_streams) {
                        r = start_cat(d);
                } else
                        break;
        }
        if (r < 0) {
                cp->aborted = true;
                cp_fail(cp, r == -ENOMEM ? EXIT_SOFTWARE : EXIT_UNAVAILABLE, "cannot start a download: %s", strerror(-r));
        }
}

static int run(Download *d) {
        Cp *cp = d->cp;

        pump(d);
        while (cp->in_flight > 0) {
                int r = sd_event_run(cp->event, UINT64_MAX);
                if (r < 0) {
                        cp_fail(cp, EXIT_SOFTWARE, "event loop failed: %s", strerror(-r));
                        return r;
                }
        }
        return 0;
}

void cp_download(Cp *cp, const char *src, const char *dst, bool is_dir, agentix_entries *listing) {
        Download d = { .cp = cp, .src = src, .dst = dst };

        if (is_dir) {
                /* The root: made here, listed already (cp.c asked to learn it is a directory). */
                if (cp_list_add_dir(&d.list, "") < 0 || make_local_dir(&d, "") < 0)
                        goto oom;
                if (cp->status != EXIT_OK)
                        goto finish;
                d.next_dir = 1;
                if (listing->truncated)
                        cp_fail(cp, EXIT_FAILED, "%s has more entries than the server lists: not all were copied", src);
                for (size_t i = 0; i < listing->n_entries; i++) {
                        const agentix_entry *en = &listing->entries[i];
                        if (add_entry(&d, "", en->path, strlen(en->path), en->is_dir, en->size) < 0)
                                goto oom;
                }
                d.walking = true;
                if (run(&d) < 0 || cp->aborted)
                        goto finish;
                d.walking = false;
                cp->dirs = d.list.n_dirs;
        } else if (cp_list_add_file(&d.list, "", 0, 0) < 0)
                goto oom;

        progress_init(&cp->progress, d.list.total_bytes, d.list.n_files, arg_quiet);
        (void) run(&d);
        goto finish;

oom:
        cp_fail(cp, EXIT_SOFTWARE, "out of memory");
finish:
        free(d.streams);
        cp_list_done(&d.list);
}

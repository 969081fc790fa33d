/* SPDX-License-Identifier: MIT */
/* cp, sandbox → here: walk the remote tree with fs::ls (--jobs listings in flight), make the
 * directories here as they are found, then fetch the files: up to --batch-size with
 * fs::download in batches of about --batch-size bytes (by the sizes ls reported, and never more
 * content than that per response: max_bytes), --jobs calls in flight, writing each file as its
 * batch arrives; larger files, and any that grew past what a batch may hold, are streamed with
 * fs::read_stream. Each file gets the mode it has in the sandbox. Nothing but agentix-server is
 * needed there. */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agentixctl.h"
#include "cp.h"
#include "envelope.h"
#include "fail.h"

typedef struct Download {
        Cp *cp;
        const char *src, *dst;
        CpList list;

        size_t next_dir;        /* list.dirs[next_dir…] are still to be listed */
        size_t next_file;       /* list.files[next_file…] are still to be fetched */
        size_t *streams;        /* files to fetch with fs::read_stream */
        size_t n_streams, next_stream;
        bool walking;
} Download;

typedef struct Job {
        Download *d;
        agentix_request *request;
        size_t dir;             /* ls: the directory's index */
        size_t *files;          /* download: indices into list.files */
        size_t n;
        /* read_stream: */
        size_t file;
        int fd;
        char *local;
        bool failed;            /* reported already; the file is removed at the end */
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
static int add_entry(Download *d, const char *dir_rel, const char *path, size_t path_len, bool is_dir, uint64_t size,
                     int mode) {
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
        return cp_list_add_file(&d->list, rel, size, mode);
}

/* The entries of one fs::ls result (remote: the directory listed, for messages). Returns 0,
 * or -ENOMEM, -EPROTO after reporting. */
static int add_listing(Download *d, const char *dir_rel, const char *remote, const msgpack_object *result) {
        Cp *cp = d->cp;
        const msgpack_object *entries, *err, *trunc;

        if (!result || result->type != MSGPACK_OBJECT_MAP) {
                cp_fail(cp, EXIT_PROTOCOL, "fs::ls answered something unexpected");
                return -EPROTO;
        }
        err = mp_map_get(result, "error");
        if (err && err->type != MSGPACK_OBJECT_NIL) {
                int len;
                const char *text = cp_result_message(result, remote, &len);

                cp_fail(cp, EXIT_FAILED, "%.*s", len, text);
                return 0;
        }
        entries = mp_map_get(result, "entries");
        if (!entries || entries->type != MSGPACK_OBJECT_ARRAY) {
                cp_fail(cp, EXIT_PROTOCOL, "fs::ls answered something unexpected");
                return -EPROTO;
        }
        trunc = mp_map_get(result, "truncated");
        if (trunc && trunc->type == MSGPACK_OBJECT_BOOLEAN && trunc->via.boolean)
                cp_fail(cp, EXIT_FAILED, "%s has more entries than the server lists: not all were copied", remote);

        for (uint32_t i = 0; i < entries->via.array.size; i++) {
                const msgpack_object *en = &entries->via.array.ptr[i], *is_dir = mp_map_get(en, "is_dir");
                const char *path;
                size_t path_len;
                int64_t size = 0, mode = -1;
                int r;

                if (mp_map_get_str(en, "path", &path, &path_len) < 0)
                        continue;
                (void) mp_map_get_int(en, "size", &size);
                if (mp_map_get_int(en, "mode", &mode) < 0 || mode < 0 || mode > 07777)
                        mode = -1;
                r = add_entry(d, dir_rel, path, path_len, is_dir && is_dir->type == MSGPACK_OBJECT_BOOLEAN && is_dir->via.boolean,
                              size > 0 ? (uint64_t) size : 0, (int) mode);
                if (r < 0) {
                        cp_fail(cp, EXIT_SOFTWARE, "out of memory");
                        return r;
                }
        }
        return 0;
}

static void pump(Download *d);

static void on_ls_done(agentix_request *r, const msgpack_object *result, const agentix_error *e, void *userdata) {
        Job *j = userdata;
        Download *d = j->d;
        Cp *cp = d->cp;
        _cleanup_free_ char *dir_rel = strdup(d->list.dirs[j->dir]);
        _cleanup_free_ char *remote = cp_path_join(d->src, d->list.dirs[j->dir]);
        char why[1024];

        cp_call_finished(cp, r);
        if (!dir_rel || !remote) {
                cp->aborted = true;
                cp_fail(cp, EXIT_SOFTWARE, "out of memory");
        } else if (e && e->kind != AGENTIX_E_NONE) {
                cp->aborted = true;
                cp_fail(cp, exit_status_from_error(e), "listing %s failed: %s", remote, error_reason(e, why, sizeof(why)));
        } else if (add_listing(d, dir_rel, remote, result) < 0)
                cp->aborted = true;

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
        cp_call_started(d->cp, j->request);
        return 0;
}

/* ---- files up to the batch size: fs::download -------------------------------------------------- */

static int add_stream(Download *d, size_t file) {
        size_t *s = reallocarray(d->streams, d->n_streams + 1, sizeof(size_t));

        if (!s)
                return -ENOMEM;
        d->streams = s;
        s[d->n_streams++] = file;
        return 0;
}

/* Give a finished local file its mode (permission bits; -1: leave it as created) and close it.
 * Returns 0 or a negative errno. */
static int finish_local_file(int fd, int mode) {
        _cleanup_close_ int f = fd;

        if (mode >= 0 && fchmod(f, (mode_t) mode & 0777) < 0)
                return -errno;
        return close(TAKE_FD(f)) < 0 ? -errno : 0;
}

static void write_file(Download *d, const CpFile *f, const void *data, size_t size, int mode) {
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
        if (r >= 0)
                r = finish_local_file(TAKE_FD(fd), mode);
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

        cp_call_finished(cp, r);
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
                CpFile *f = &d->list.files[j->files[i]];
                int64_t mode;

                /* The mode now, rather than when it was listed. */
                if (mp_map_get_int(o, "mode", &mode) >= 0 && mode >= 0 && mode <= 07777)
                        f->mode = (int) mode;

                if (err && err->type != MSGPACK_OBJECT_NIL) {
                        _cleanup_free_ char *remote = cp_path_join(d->src, f->rel);
                        int len;
                        const char *text = cp_result_message(o, strna(remote), &len);

                        if (mp_str_eq(err, "too_large")) {
                                /* Larger than a batch may hold (it grew, or it is the single file
                                 * asked for without knowing its size): stream it instead. */
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
                write_file(d, f, content->via.bin.ptr, content->via.bin.size, f->mode);
        }

finish:
        progress_add(&cp->progress, cp->bytes - before_bytes, cp->files - before_files);
        job_free(j);
        pump(d);
}

static int start_download_batch(Download *d) {
        Cp *cp = d->cp;
        _cleanup_buffer_ Buffer args = BUFFER_NULL, kwargs = BUFFER_NULL;
        msgpack_packer pk;
        size_t n = 0;
        uint64_t bytes = 0;
        Job *j;
        int r;

        /* Which files: up to batch_size bytes by the listed sizes; the large ones are streams
         * already (cp_download()). */
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

                if (f->size > cp->batch_size) {
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

        /* args = [paths], kwargs = {max_bytes}: no response larger than a batch, whatever
         * happened to the files since they were listed. */
        mp_packer_init_buffer(&pk, &args);
        r = msgpack_pack_array(&pk, 1) < 0 || msgpack_pack_array(&pk, n) < 0 ? -ENOMEM : 0;
        for (size_t i = 0; i < n && r >= 0; i++) {
                _cleanup_free_ char *remote = cp_path_join(d->src, d->list.files[j->files[i]].rel);
                r = remote && mp_pack_cstr(&pk, remote) >= 0 ? 0 : -ENOMEM;
        }
        mp_packer_init_buffer(&pk, &kwargs);
        if (r >= 0)
                r = msgpack_pack_map(&pk, 1) < 0 || mp_pack_cstr(&pk, "max_bytes") < 0 ||
                    msgpack_pack_uint64(&pk, cp->batch_size) < 0 ? -ENOMEM : 0;
        if (r < 0) {
                job_free(j);
                return -ENOMEM;
        }

        agentix_args a = { .args = buffer_data(&args), .args_size = args.len,
                           .kwargs = buffer_data(&kwargs), .kwargs_size = kwargs.len };
        agentix_call_options o = { .shape = AGENTIX_CALL_UNARY };
        agentix_request_handlers h = { .done = on_download_done };
        r = agentix_call_async(cp->client, "fs::download", &a, &o, &h, j, &j->request);
        if (r < 0) {
                job_free(j);
                return r;
        }
        cp_call_started(cp, j->request);
        return 1;
}

/* ---- files above the batch size: fs::read_stream ---------------------------------------------- */

static void on_stream_item(agentix_request *r, const msgpack_object *v, void *userdata) {
        Job *j = userdata;
        Cp *cp = j->d->cp;
        int k;

        if (j->failed)
                return;
        if (v->type != MSGPACK_OBJECT_BIN) {
                cp_fail(cp, EXIT_PROTOCOL, "fs::read_stream sent something other than bytes for '%s'", j->local);
                j->failed = true;
                (void) agentix_request_cancel(j->request);
                return;
        }
        k = loop_write(j->fd, v->via.bin.ptr, v->via.bin.size);
        if (k < 0) {
                cp_fail(cp, EXIT_IOERR, "cannot write '%s': %s", j->local, strerror(-k));
                j->failed = true;
                (void) agentix_request_cancel(j->request);
                return;
        }
        cp->bytes += v->via.bin.size;
        progress_add(&cp->progress, v->via.bin.size, 0);
}

static void on_stream_done(agentix_request *r, const msgpack_object *result, const agentix_error *e, void *userdata) {
        Job *j = userdata;
        Download *d = j->d;
        Cp *cp = d->cp;
        const CpFile *f = &d->list.files[j->file];
        char why[1024];
        int k;

        cp_call_finished(cp, r);
        if (j->failed)
                ; /* said already why */
        else if (e && e->kind == AGENTIX_E_REMOTE && e->type &&
                 (streq(e->type, "is_directory") || streq(e->type, "not_a_file"))) {
                cp_skip(cp, "skipping %s (a symbolic link to a directory, or a special file)",
                        cp_error_reason(e, why, sizeof(why)));
                j->failed = true;
        } else if (e && (e->kind == AGENTIX_E_REMOTE || e->kind == AGENTIX_E_FILE)) {
                cp_fail(cp, EXIT_FAILED, "%s", cp_error_reason(e, why, sizeof(why)));
                j->failed = true;
        } else if (e && e->kind != AGENTIX_E_NONE) {
                cp->aborted = true;
                cp_fail(cp, exit_status_from_error(e), "cannot stream %s: %s", j->local, cp_error_reason(e, why, sizeof(why)));
                j->failed = true;
        } else {
                k = finish_local_file(TAKE_FD(j->fd), f->mode);
                if (k < 0) {
                        cp_fail(cp, EXIT_IOERR, "cannot write '%s': %s", j->local, strerror(-k));
                        j->failed = true;
                } else {
                        cp->files++;
                        progress_add(&cp->progress, 0, 1);
                }
        }
        if (j->failed)
                (void) unlink(j->local); /* no half files */
        job_free(j);
        pump(d);
}

static int start_stream(Download *d) {
        Cp *cp = d->cp;
        size_t file = d->streams[d->next_stream++];
        const CpFile *f = &d->list.files[file];
        _cleanup_free_ char *remote = cp_path_join(d->src, f->rel);
        _cleanup_buffer_ Buffer args = BUFFER_NULL;
        msgpack_packer pk;
        Job *j;
        int r;

        if (!remote)
                return -ENOMEM;
        j = job_new(d);
        if (!j)
                return -ENOMEM;
        j->file = file;
        j->local = cp_path_join(d->dst, f->rel);
        if (!j->local) {
                job_free(j);
                return -ENOMEM;
        }
        j->fd = open(j->local, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOCTTY, 0666);
        if (j->fd < 0) {
                cp_fail(cp, EXIT_IOERR, "cannot create '%s': %m", j->local);
                job_free(j);
                return 0;
        }

        mp_packer_init_buffer(&pk, &args);
        if (msgpack_pack_array(&pk, 2) < 0 || mp_pack_cstr(&pk, remote) < 0 ||
            msgpack_pack_uint64(&pk, cp_stream_chunk(cp)) < 0) {
                job_free(j);
                return -ENOMEM;
        }
        agentix_args a = { .args = buffer_data(&args), .args_size = args.len };
        agentix_call_options o = { .shape = AGENTIX_CALL_STREAM };
        agentix_request_handlers h = { .item = on_stream_item, .done = on_stream_done };
        r = agentix_call_async(cp->client, "fs::read_stream", &a, &o, &h, j, &j->request);
        if (r < 0) {
                (void) unlink(j->local);
                job_free(j);
                return r;
        }
        cp_call_started(cp, j->request);
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
                } else if (d->next_stream < d->n_streams) {
                        /* Streams first: the large files take longest. */
                        r = start_stream(d);
                } else if (d->next_file < d->list.n_files) {
                        r = start_download_batch(d);
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

void cp_download(Cp *cp, const char *src, const char *dst, bool is_dir, const msgpack_object *listing) {
        Download d = { .cp = cp, .src = src, .dst = dst };

        if (is_dir) {
                /* The root: made here, listed already (cp.c asked to learn it is a directory). */
                if (cp_list_add_dir(&d.list, "") < 0 || make_local_dir(&d, "") < 0)
                        goto oom;
                if (cp->status != EXIT_OK)
                        goto finish;
                d.next_dir = 1;
                if (add_listing(&d, "", src, listing) < 0)
                        goto finish;
                d.walking = true;
                if (run(&d) < 0 || cp->aborted)
                        goto finish;
                d.walking = false;
                cp->dirs = d.list.n_dirs;
                /* Files listed above the batch size go straight to streams. */
                for (size_t i = 0; i < d.list.n_files; i++)
                        if (d.list.files[i].size > cp->batch_size && add_stream(&d, i) < 0)
                                goto oom;
        } else if (cp_list_add_file(&d.list, "", 0, -1) < 0)
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

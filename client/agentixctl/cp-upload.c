/* SPDX-License-Identifier: MIT */
/* cp, here → sandbox: walk the local tree, then send it with --jobs calls in flight: files up to
 * --batch-size go with fs::upload in batches of about --batch-size bytes, each file read straight
 * into the message being built (so memory stays at jobs × batch size), with its mode; larger
 * files are streamed with fs::write_stream, chunk by chunk as the server's inbox window allows;
 * directories that hold nothing are made with fs::mkdir (fs::upload makes the parents of files).
 * Nothing but agentix-server is needed in the sandbox. */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agentixctl.h"
#include "cp.h"
#include "envelope.h"
#include "fail.h"

#define WALK_DEPTH_MAX 256

typedef struct Upload {
        Cp *cp;
        const char *src, *dst;
        CpList list;
        char **empty_dirs;      /* relative paths that hold nothing: made with fs::mkdir */
        size_t n_empty_dirs, next_empty_dir;

        size_t next_small;      /* list.files[next_small…]: the next file to batch */
        size_t next_large;      /* list.files[next_large…]: the next file to stream */

        /* The message being built. libagentix copies a call's arguments (and inbox items)
         * before it returns, so one buffer serves every batch, and its pages stay mapped
         * (fresh 8 MiB buffers cost a page fault and a page clear per 4 KiB). */
        Buffer message;
} Upload;

typedef struct Batch {
        Upload *u;
        agentix_request *request;
        size_t *files;          /* indices into list.files */
        size_t n;
        uint64_t bytes;
} Batch;

/* One large file on its way through fs::write_stream. */
typedef struct Stream {
        Upload *u;
        agentix_request *request;
        size_t file;
        char *local, *remote;
        int fd;
        uint64_t sent;          /* bytes handed to libagentix */
        Buffer chunk;           /* the next item, kept while the inbox window is full */
        bool chunk_ready;
        bool reported;          /* a failure was reported already: the call's end adds nothing */
        bool have_size;
        uint64_t size;          /* what the server says it wrote */
} Stream;

/* ---- the local walk -------------------------------------------------------------------------- */

static int add_empty_dir(Upload *u, const char *rel) {
        char **d = reallocarray(u->empty_dirs, u->n_empty_dirs + 1, sizeof(char *));
        if (!d)
                return -ENOMEM;
        u->empty_dirs = d;
        d[u->n_empty_dirs] = strdup(rel);
        if (!d[u->n_empty_dirs])
                return -ENOMEM;
        u->n_empty_dirs++;
        return 0;
}

/* Walk the directory open as dir_fd (its path below the root: rel). Returns the number of files
 * found below it, or -ENOMEM (everything else is reported per entry and skipped). */
static int64_t walk(Upload *u, int dir_fd, const char *rel, unsigned depth) {
        Cp *cp = u->cp;
        int64_t files = 0;
        size_t subdirs = 0;
        DIR *d;

        d = fdopendir(dir_fd);
        if (!d) {
                safe_close(dir_fd);
                cp_fail(cp, EXIT_IOERR, "cannot read '%s/%s': %m", u->src, rel);
                return 0;
        }
        for (;;) {
                _cleanup_free_ char *child = NULL;
                struct dirent *de;
                struct stat st;

                errno = 0;
                de = readdir(d);
                if (!de) {
                        if (errno != 0)
                                cp_fail(cp, EXIT_IOERR, "cannot read '%s/%s': %m", u->src, rel);
                        break;
                }
                if (streq(de->d_name, ".") || streq(de->d_name, ".."))
                        continue;
                child = *rel ? NULL : strdup(de->d_name);
                if (*rel && asprintf(&child, "%s/%s", rel, de->d_name) < 0)
                        child = NULL;
                if (!child) {
                        closedir(d);
                        return -ENOMEM;
                }

                if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
                        cp_fail(cp, EXIT_IOERR, "cannot access '%s/%s': %m", u->src, child);
                        continue;
                }
                if (S_ISLNK(st.st_mode)) {
                        /* Links to files are copied as files; to directories, skipped (no loops,
                         * no surprises outside the tree). */
                        if (fstatat(dirfd(d), de->d_name, &st, 0) < 0) {
                                cp_skip(cp, "skipping '%s/%s': a dangling symbolic link", u->src, child);
                                continue;
                        }
                        if (!S_ISREG(st.st_mode)) {
                                cp_skip(cp, "skipping '%s/%s': a symbolic link to a directory or special file", u->src,
                                        child);
                                continue;
                        }
                }
                if (S_ISREG(st.st_mode)) {
                        if (cp_list_add_file(&u->list, child, (uint64_t) st.st_size, (int) (st.st_mode & 0777)) < 0) {
                                closedir(d);
                                return -ENOMEM;
                        }
                        files++;
                } else if (S_ISDIR(st.st_mode)) {
                        int fd;
                        int64_t k;

                        if (depth >= WALK_DEPTH_MAX) {
                                cp_fail(cp, EXIT_IOERR, "'%s/%s': directories nested too deep", u->src, child);
                                continue;
                        }
                        fd = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
                        if (fd < 0) {
                                cp_fail(cp, EXIT_IOERR, "cannot open '%s/%s': %m", u->src, child);
                                continue;
                        }
                        subdirs++;
                        if (cp_list_add_dir(&u->list, child) < 0) {
                                safe_close(fd);
                                closedir(d);
                                return -ENOMEM;
                        }
                        k = walk(u, fd, child, depth + 1);
                        if (k < 0) {
                                closedir(d);
                                return k;
                        }
                        files += k;
                } else
                        cp_skip(cp, "skipping '%s/%s': not a regular file or directory", u->src, child);
        }
        closedir(d);

        /* A directory without files anywhere below: mkdir -p of the deepest ones makes it. */
        if (files == 0 && subdirs == 0 && add_empty_dir(u, rel) < 0)
                return -ENOMEM;
        return files;
}

static bool is_large(const Upload *u, size_t i) {
        return u->list.files[i].size > u->cp->batch_size;
}

static void pump(Upload *u);

/* ---- empty directories: fs::mkdir ------------------------------------------------------------- */

typedef struct MkdirJob {
        Upload *u;
        agentix_request *request;
        size_t n;
} MkdirJob;

static void on_mkdir_done(agentix_request *r, const msgpack_object *result, const agentix_error *e, void *userdata) {
        MkdirJob *j = userdata;
        Upload *u = j->u;
        Cp *cp = u->cp;
        char why[1024];

        cp_call_finished(cp, r);
        if (e && e->kind != AGENTIX_E_NONE) {
                cp->aborted = true;
                cp_fail(cp, exit_status_from_error(e), "cannot make directories in %s: %s", u->dst,
                        cp_error_reason(e, why, sizeof(why)));
        } else if (!result || result->type != MSGPACK_OBJECT_ARRAY || result->via.array.size != j->n) {
                cp->aborted = true;
                cp_fail(cp, EXIT_PROTOCOL, "fs::mkdir answered something unexpected");
        } else
                for (size_t i = 0; i < j->n; i++) {
                        const msgpack_object *o = &result->via.array.ptr[i], *err = mp_map_get(o, "error");
                        int len;

                        if (err && err->type != MSGPACK_OBJECT_NIL) {
                                const char *text = cp_result_message(o, "cannot make a directory", &len);
                                cp_fail(cp, EXIT_FAILED, "%.*s", len, text);
                        }
                }
        agentix_request_unref(j->request);
        free(j);
        pump(u);
}

static int start_mkdir(Upload *u) {
        _cleanup_buffer_ Buffer args = BUFFER_NULL;
        size_t n = MIN(u->n_empty_dirs - u->next_empty_dir, (size_t) CP_MKDIR_BATCH_MAX);
        msgpack_packer pk;
        MkdirJob *j;
        int r;

        mp_packer_init_buffer(&pk, &args);
        r = msgpack_pack_array(&pk, 1) < 0 || msgpack_pack_array(&pk, n) < 0 ? -ENOMEM : 0;
        for (size_t i = 0; i < n && r >= 0; i++) {
                _cleanup_free_ char *remote = cp_path_join(u->dst, u->empty_dirs[u->next_empty_dir + i]);
                r = remote && mp_pack_cstr(&pk, remote) >= 0 ? 0 : -ENOMEM;
        }
        if (r < 0)
                return r;
        j = calloc(1, sizeof(MkdirJob));
        if (!j)
                return -ENOMEM;
        *j = (MkdirJob) { .u = u, .n = n };

        r = agentix_call_async(u->cp->client, "fs::mkdir",
                               &(agentix_args) { .args = buffer_data(&args), .args_size = args.len },
                               &(agentix_call_options) { .shape = AGENTIX_CALL_UNARY },
                               &(agentix_request_handlers) { .done = on_mkdir_done }, j, &j->request);
        if (r < 0) {
                free(j);
                return r;
        }
        u->next_empty_dir += n;
        cp_call_started(u->cp, j->request);
        return 0;
}

/* ---- files up to the batch size: fs::upload -------------------------------------------------- */

static void batch_free(Batch *b) {
        if (!b)
                return;
        agentix_request_unref(b->request);
        free(b->files);
        free(b);
}

/* Append one file as [path, bin, mode] to the message, reading the bytes straight into it. A
 * file that cannot be read is reported and left out (the buffer is rolled back). Returns 1
 * when added, 0 when left out, -ENOMEM. */
static int pack_file(Upload *u, size_t i, Buffer *b) {
        const CpFile *f = &u->list.files[i];
        _cleanup_free_ char *local = cp_path_join(u->src, f->rel), *remote = cp_path_join(u->dst, f->rel);
        _cleanup_close_ int fd = -EBADF;
        size_t start = b->len;
        msgpack_packer pk;
        struct stat st;
        uint64_t got = 0;

        if (!local || !remote)
                return -ENOMEM;
        fd = open(local, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        if (fd < 0 || fstat(fd, &st) < 0) {
                cp_fail(u->cp, EXIT_IOERR, "cannot read '%s': %m", local);
                return 0;
        }
        if ((uint64_t) st.st_size != f->size) {
                cp_fail(u->cp, EXIT_IOERR, "'%s' changed while it was copied", local);
                return 0;
        }

        mp_packer_init_buffer(&pk, b);
        if (msgpack_pack_array(&pk, 3) < 0 || mp_pack_cstr(&pk, remote) < 0)
                return -ENOMEM;
        /* bin32 header, then the bytes read in place. */
        uint8_t hdr[5] = { 0xc6, (uint8_t) (f->size >> 24), (uint8_t) (f->size >> 16), (uint8_t) (f->size >> 8),
                           (uint8_t) f->size };
        if (buffer_append(b, hdr, sizeof(hdr)) < 0 || buffer_reserve(b, f->size) < 0)
                return -ENOMEM;
        while (got < f->size) {
                ssize_t n = pread(fd, buffer_data(b) + b->len + got, f->size - got, (off_t) got);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0) {
                        if (n < 0)
                                cp_fail(u->cp, EXIT_IOERR, "cannot read '%s': %m", local);
                        else
                                cp_fail(u->cp, EXIT_IOERR, "'%s' changed while it was copied", local);
                        b->len = start;
                        return 0;
                }
                got += (uint64_t) n;
        }
        b->len += f->size;
        if (msgpack_pack_int(&pk, f->mode) < 0)
                return -ENOMEM;
        return 1;
}

static void on_batch_done(agentix_request *r, const msgpack_object *result, const agentix_error *e, void *userdata) {
        Batch *b = userdata;
        Upload *u = b->u;
        Cp *cp = u->cp;
        uint64_t files = 0;

        cp_call_finished(cp, r);
        if (e && e->kind != AGENTIX_E_NONE) {
                char why[1024];

                /* The whole call failed: nothing of this batch is known to be there. */
                cp->aborted = true;
                cp_fail(cp, exit_status_from_error(e), "upload to %s failed: %s", u->dst, error_reason(e, why, sizeof(why)));
        } else if (!result || result->type != MSGPACK_OBJECT_ARRAY || result->via.array.size != b->n) {
                cp->aborted = true;
                cp_fail(cp, EXIT_PROTOCOL, "fs::upload answered something unexpected");
        } else
                for (size_t i = 0; i < b->n; i++) {
                        const msgpack_object *o = &result->via.array.ptr[i], *err = mp_map_get(o, "error");

                        if (err && err->type != MSGPACK_OBJECT_NIL) {
                                _cleanup_free_ char *remote = cp_path_join(u->dst, u->list.files[b->files[i]].rel);
                                int len;
                                const char *text = cp_result_message(o, strna(remote), &len);

                                cp_fail(cp, EXIT_FAILED, "%.*s", len, text);
                        } else
                                files++;
                }

        progress_add(&cp->progress, b->bytes, files);
        cp->files += files;
        cp->bytes += b->bytes;
        batch_free(b);
        pump(u);
}

/* The next small file from i on, or n_files. */
static size_t next_small(const Upload *u, size_t i) {
        while (i < u->list.n_files && is_large(u, i))
                i++;
        return i;
}

static int start_batch(Upload *u) {
        Cp *cp = u->cp;
        Buffer *msg = &u->message;
        Batch *b;
        size_t count_at;
        int r;

        b = calloc(1, sizeof(Batch));
        if (!b)
                return -ENOMEM;
        b->u = u;
        b->files = calloc(CP_BATCH_FILES_MAX, sizeof(size_t));
        if (!b->files) {
                batch_free(b);
                return -ENOMEM;
        }

        /* args = [files]: a one-element array, then an array32 whose count is patched at the end. */
        uint8_t head[6] = { 0x91, 0xdd, 0, 0, 0, 0 };
        buffer_clear(msg);
        if (buffer_append(msg, head, sizeof(head)) < 0) {
                batch_free(b);
                return -ENOMEM;
        }
        count_at = 2;

        for (u->next_small = next_small(u, u->next_small); u->next_small < u->list.n_files && b->n < CP_BATCH_FILES_MAX;
             u->next_small = next_small(u, u->next_small)) {
                size_t i = u->next_small;
                uint64_t size = u->list.files[i].size;

                if (b->n > 0 && b->bytes + size > cp->batch_size)
                        break;
                u->next_small++;
                r = pack_file(u, i, msg);
                if (r < 0) {
                        batch_free(b);
                        return r;
                }
                if (r == 0)
                        continue;
                b->files[b->n++] = i;
                b->bytes += size;
        }
        if (b->n == 0) {
                batch_free(b);
                return 0;
        }
        uint8_t *count = buffer_data(msg) + count_at;
        count[0] = (uint8_t) (b->n >> 24);
        count[1] = (uint8_t) (b->n >> 16);
        count[2] = (uint8_t) (b->n >> 8);
        count[3] = (uint8_t) b->n;

        agentix_args args = { .args = buffer_data(msg), .args_size = msg->len };
        agentix_call_options o = { .shape = AGENTIX_CALL_UNARY };
        agentix_request_handlers h = { .done = on_batch_done };
        r = agentix_call_async(cp->client, "fs::upload", &args, &o, &h, b, &b->request);
        if (r < 0) {
                batch_free(b);
                return r;
        }
        cp_call_started(cp, b->request);
        return 1;
}

/* ---- files above the batch size: fs::write_stream -------------------------------------------- */

static void stream_free(Stream *s) {
        if (!s)
                return;
        agentix_request_unref(s->request);
        safe_close(s->fd);
        buffer_done(&s->chunk);
        free(s->local);
        free(s->remote);
        free(s);
}

/* Give up on a stream from our side (the local file let us down): report it, and cancel the
 * call so the server drops its temporary file. Its done handler finishes the job. */
static void stream_abandon(Stream *s) {
        s->reported = true;
        (void) agentix_request_cancel(s->request);
}

/* Read the next chunk into s->chunk as one msgpack bin item. Returns 0, or -EIO after reporting
 * (the file could not be read or shrank). */
static int stream_read_chunk(Stream *s) {
        Cp *cp = s->u->cp;
        uint64_t size = s->u->list.files[s->file].size;
        size_t n = (size_t) MIN(size - s->sent, (uint64_t) cp_stream_chunk(cp)), got = 0;
        uint8_t hdr[5] = { 0xc6, (uint8_t) (n >> 24), (uint8_t) (n >> 16), (uint8_t) (n >> 8), (uint8_t) n };

        buffer_clear(&s->chunk);
        if (buffer_append(&s->chunk, hdr, sizeof(hdr)) < 0 || buffer_reserve(&s->chunk, n) < 0) {
                cp_fail(cp, EXIT_SOFTWARE, "out of memory");
                return -ENOMEM;
        }
        while (got < n) {
                ssize_t k = pread(s->fd, buffer_data(&s->chunk) + s->chunk.len + got, n - got, (off_t) (s->sent + got));
                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0) {
                        cp_fail(cp, EXIT_IOERR, "cannot read '%s': %m", s->local);
                        return -EIO;
                }
                if (k == 0) {
                        cp_fail(cp, EXIT_IOERR, "'%s' changed while it was copied", s->local);
                        return -EIO;
                }
                got += (size_t) k;
        }
        s->chunk.len += n;
        s->chunk_ready = true;
        return 0;
}

/* Send chunks while the inbox window has room; close the inbox after the last. */
static void stream_feed(Stream *s) {
        Cp *cp = s->u->cp;
        uint64_t size = s->u->list.files[s->file].size;
        int r;

        while (s->sent < size) {
                if (!s->chunk_ready && stream_read_chunk(s) < 0) {
                        stream_abandon(s);
                        return;
                }
                r = agentix_request_send(s->request, buffer_data(&s->chunk), s->chunk.len);
                if (r == -EAGAIN)
                        return; /* the writable handler calls again */
                if (r < 0) {
                        cp_fail(cp, EXIT_UNAVAILABLE, "cannot send '%s': %s", s->local, strerror(-r));
                        stream_abandon(s);
                        return;
                }
                size_t n = s->chunk.len - 5;
                s->chunk_ready = false;
                s->sent += n;
                progress_add(&cp->progress, n, 0);
        }
        r = agentix_request_close_inbox(s->request);
        if (r < 0) {
                cp_fail(cp, EXIT_UNAVAILABLE, "cannot finish '%s': %s", s->local, strerror(-r));
                stream_abandon(s);
        }
}

static void on_stream_writable(agentix_request *r, void *userdata) {
        stream_feed(userdata);
}

static void on_stream_item(agentix_request *r, const msgpack_object *v, void *userdata) {
        Stream *s = userdata;
        int64_t size;

        if (mp_map_get_int(v, "size", &size) >= 0 && size >= 0) {
                s->have_size = true;
                s->size = (uint64_t) size;
        }
}

static void on_stream_done(agentix_request *r, const msgpack_object *result, const agentix_error *e, void *userdata) {
        Stream *s = userdata;
        Upload *u = s->u;
        Cp *cp = u->cp;
        const CpFile *f = &u->list.files[s->file];
        char why[1024];

        cp_call_finished(cp, r);
        if (s->reported)
                ; /* said already why */
        else if (e && (e->kind == AGENTIX_E_REMOTE || e->kind == AGENTIX_E_FILE))
                cp_fail(cp, EXIT_FAILED, "%s", cp_error_reason(e, why, sizeof(why)));
        else if (e && e->kind != AGENTIX_E_NONE) {
                cp->aborted = true;
                cp_fail(cp, exit_status_from_error(e), "upload to %s failed: %s", s->remote,
                        cp_error_reason(e, why, sizeof(why)));
        } else if (!s->have_size || s->size != f->size)
                cp_fail(cp, EXIT_PROTOCOL, "fs::write_stream wrote %s bytes of '%s', not %llu",
                        s->have_size ? "a different number of" : "an unknown number of", s->remote,
                        (unsigned long long) f->size);
        else {
                cp->files++;
                cp->bytes += f->size;
                progress_add(&cp->progress, 0, 1);
        }
        stream_free(s);
        pump(u);
}

static int start_stream(Upload *u, size_t i) {
        Cp *cp = u->cp;
        const CpFile *f = &u->list.files[i];
        _cleanup_buffer_ Buffer args = BUFFER_NULL, kwargs = BUFFER_NULL;
        msgpack_packer pk;
        struct stat st;
        Stream *s;
        int r;

        s = calloc(1, sizeof(Stream));
        if (!s)
                return -ENOMEM;
        *s = (Stream) { .u = u, .file = i, .fd = -EBADF };
        s->local = cp_path_join(u->src, f->rel);
        s->remote = cp_path_join(u->dst, f->rel);
        if (!s->local || !s->remote) {
                stream_free(s);
                return -ENOMEM;
        }
        s->fd = open(s->local, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        if (s->fd < 0 || fstat(s->fd, &st) < 0) {
                cp_fail(cp, EXIT_IOERR, "cannot read '%s': %m", s->local);
                stream_free(s);
                return 0;
        }
        if ((uint64_t) st.st_size != f->size) {
                cp_fail(cp, EXIT_IOERR, "'%s' changed while it was copied", s->local);
                stream_free(s);
                return 0;
        }

        mp_packer_init_buffer(&pk, &args);
        r = msgpack_pack_array(&pk, 1) < 0 || mp_pack_cstr(&pk, s->remote) < 0 ? -ENOMEM : 0;
        mp_packer_init_buffer(&pk, &kwargs);
        if (r >= 0)
                r = msgpack_pack_map(&pk, 1) < 0 || mp_pack_cstr(&pk, "mode") < 0 || msgpack_pack_int(&pk, f->mode) < 0
                        ? -ENOMEM : 0;
        if (r < 0) {
                stream_free(s);
                return r;
        }
        r = agentix_call_async(cp->client, "fs::write_stream",
                               &(agentix_args) { .args = buffer_data(&args), .args_size = args.len,
                                                 .kwargs = buffer_data(&kwargs), .kwargs_size = kwargs.len },
                               &(agentix_call_options) { .shape = AGENTIX_CALL_BIDI },
                               &(agentix_request_handlers) { .item = on_stream_item, .done = on_stream_done }, s,
                               &s->request);
        if (r < 0) {
                stream_free(s);
                return r;
        }
        agentix_request_set_writable_handler(s->request, on_stream_writable, s);
        cp_call_started(cp, s->request);
        /* The done handler may run from in here (a failure cancels): s is not ours after it. */
        stream_feed(s);
        return 1;
}

/* ---- driving it ------------------------------------------------------------------------------ */

static void pump(Upload *u) {
        Cp *cp = u->cp;

        while (!cp->aborted && cp->in_flight < cp->jobs) {
                int r;

                /* Directories first (one call makes many), then the large files, which take
                 * longest, while the remaining jobs carry batches. */
                if (u->next_empty_dir < u->n_empty_dirs)
                        r = start_mkdir(u);
                else {
                        while (u->next_large < u->list.n_files && !is_large(u, u->next_large))
                                u->next_large++;
                        if (u->next_large < u->list.n_files)
                                r = start_stream(u, u->next_large++);
                        else if (next_small(u, u->next_small) < u->list.n_files)
                                r = start_batch(u);
                        else
                                break;
                }
                if (r < 0) {
                        cp->aborted = true;
                        cp_fail(cp, r == -ENOMEM ? EXIT_SOFTWARE : EXIT_UNAVAILABLE, "cannot start an upload: %s",
                                strerror(-r));
                }
        }
}

void cp_upload(Cp *cp, const char *src, const char *dst, bool is_dir) {
        Upload u = { .cp = cp, .src = src, .dst = dst };
        int r = 0;

        if (is_dir) {
                int fd = open(src, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                int64_t k;

                if (fd < 0) {
                        cp_fail(cp, EXIT_IOERR, "cannot open '%s': %m", src);
                        goto finish;
                }
                k = walk(&u, fd, "", 0);
                if (k < 0) {
                        r = (int) k;
                        goto finish;
                }
                cp->dirs = u.list.n_dirs + 1;
        } else {
                struct stat st;

                if (stat(src, &st) < 0) {
                        cp_fail(cp, EXIT_IOERR, "cannot access '%s': %m", src);
                        goto finish;
                }
                r = cp_list_add_file(&u.list, "", (uint64_t) st.st_size, (int) (st.st_mode & 0777));
                if (r < 0)
                        goto finish;
        }

        progress_init(&cp->progress, u.list.total_bytes, u.list.n_files, arg_quiet);

        pump(&u);
        while (cp->in_flight > 0) {
                r = sd_event_run(cp->event, UINT64_MAX);
                if (r < 0) {
                        cp_fail(cp, EXIT_SOFTWARE, "event loop failed: %s", strerror(-r));
                        goto finish;
                }
        }
        r = 0;

finish:
        if (r == -ENOMEM)
                cp_fail(cp, EXIT_SOFTWARE, "out of memory");
        else if (r < 0 && cp->status == EXIT_OK)
                cp_fail(cp, EXIT_UNAVAILABLE, "upload failed: %s", strerror(-r));
        buffer_done(&u.message);
        for (size_t i = 0; i < u.n_empty_dirs; i++)
                free(u.empty_dirs[i]);
        free(u.empty_dirs);
        cp_list_done(&u.list);
}

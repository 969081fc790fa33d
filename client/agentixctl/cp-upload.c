/* SPDX-License-Identifier: MIT */
/* cp, here → sandbox: walk the local tree, then send it with fs::upload in batches of about
 * --batch-size bytes, --jobs calls in flight, each file read straight into the message being
 * built (so memory stays at jobs × batch size). Files above CP_BATCH_FILE_MAX go up in
 * CP_CHUNK_SIZE parts, uploaded like small files and joined in the sandbox with cat. Empty
 * directories (fs::upload only makes the parents of files) and executable bits follow with
 * mkdir -p and chmod. */
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
#include "shell-quote.h"

#define WALK_DEPTH_MAX 256
#define REMOTE_COMMAND_MAX (96u * 1024u)

/* One part of the transfer: a whole file, or a chunk of a large one (written to its own part
 * file next to the target, joined later). */
typedef struct Piece {
        size_t file;            /* index into list.files */
        uint64_t offset, size;
        char *remote;           /* where fs::upload writes it */
        bool failed;
} Piece;

typedef struct Upload {
        Cp *cp;
        const char *src, *dst;
        bool is_dir;
        CpList list;
        char **empty_dirs;      /* relative paths that hold nothing: made with mkdir -p */
        size_t n_empty_dirs;

        Piece *pieces;
        size_t n_pieces, next;
        bool *file_failed;      /* per file: some piece failed */

        /* The message being built. libagentix copies a call's arguments before
         * agentix_call_async() returns, so one buffer serves every batch, and its pages stay
         * mapped (fresh 8 MiB buffers cost a page fault and a page clear per 4 KiB). */
        Buffer message;
} Upload;

typedef struct Batch {
        Upload *u;
        agentix_request *request;
        size_t *pieces;         /* indices of the pieces it carries */
        size_t n;
        uint64_t bytes;
} Batch;

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
                        if (cp_list_add_file(&u->list, child, (uint64_t) st.st_size, st.st_mode) < 0) {
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

/* ---- pieces and batches ---------------------------------------------------------------------- */

/* Parts of a large file: CP_CHUNK_SIZE, or larger for huge files, so that the part names fit
 * in one command line when they are joined. */
static uint64_t chunk_size(uint64_t size) {
        return MAX((uint64_t) CP_CHUNK_SIZE, (size + CP_PARTS_MAX - 1) / CP_PARTS_MAX);
}

static int plan_pieces(Upload *u) {
        size_t n = 0;

        for (size_t i = 0; i < u->list.n_files; i++) {
                uint64_t size = u->list.files[i].size;
                n += size > CP_BATCH_FILE_MAX ? (size + chunk_size(size) - 1) / chunk_size(size) : 1;
        }
        u->pieces = calloc(MAX(n, (size_t) 1), sizeof(Piece));
        u->file_failed = calloc(MAX(u->list.n_files, (size_t) 1), sizeof(bool));
        if (!u->pieces || !u->file_failed)
                return -ENOMEM;

        for (size_t i = 0; i < u->list.n_files; i++) {
                const CpFile *f = &u->list.files[i];
                _cleanup_free_ char *target = cp_path_join(u->dst, f->rel);

                if (!target)
                        return -ENOMEM;
                if (f->size <= CP_BATCH_FILE_MAX) {
                        u->pieces[u->n_pieces++] = (Piece) { .file = i, .size = f->size, .remote = TAKE_PTR(target) };
                        continue;
                }
                uint64_t chunk = chunk_size(f->size);
                for (uint64_t off = 0, k = 0; off < f->size; off += chunk, k++) {
                        Piece *p = &u->pieces[u->n_pieces];

                        *p = (Piece) { .file = i, .offset = off, .size = MIN(chunk, f->size - off) };
                        if (asprintf(&p->remote, "%s.agentixctl-part-%u-%06llu", target, (unsigned) getpid(),
                                     (unsigned long long) k) < 0)
                                return -ENOMEM;
                        u->n_pieces++;
                }
        }
        return 0;
}

static void batch_free(Batch *b) {
        if (!b)
                return;
        agentix_request_unref(b->request);
        free(b->pieces);
        free(b);
}

static void piece_failed(Upload *u, Piece *p) {
        p->failed = true;
        u->file_failed[p->file] = true;
}

/* Append one piece as [path, bin] to the message, reading the bytes straight into it. A piece
 * that cannot be read is reported and left out (the buffer is rolled back). Returns 1 when
 * added, 0 when left out, -ENOMEM. */
static int pack_piece(Upload *u, Piece *p, Buffer *b) {
        const CpFile *f = &u->list.files[p->file];
        _cleanup_free_ char *local = cp_path_join(u->src, f->rel);
        _cleanup_close_ int fd = -EBADF;
        size_t start = b->len;
        msgpack_packer pk;
        struct stat st;
        uint64_t got = 0;

        if (!local)
                return -ENOMEM;
        fd = open(local, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        if (fd < 0 || fstat(fd, &st) < 0) {
                cp_fail(u->cp, EXIT_IOERR, "cannot read '%s': %m", local);
                piece_failed(u, p);
                return 0;
        }
        if ((uint64_t) st.st_size != f->size) {
                cp_fail(u->cp, EXIT_IOERR, "'%s' changed while it was copied", local);
                piece_failed(u, p);
                return 0;
        }

        mp_packer_init_buffer(&pk, b);
        if (msgpack_pack_array(&pk, 2) < 0 || mp_pack_cstr(&pk, p->remote) < 0)
                return -ENOMEM;
        /* bin32 header, then the bytes read in place. */
        uint8_t hdr[5] = { 0xc6, (uint8_t) (p->size >> 24), (uint8_t) (p->size >> 16), (uint8_t) (p->size >> 8),
                           (uint8_t) p->size };
        if (buffer_append(b, hdr, sizeof(hdr)) < 0 || buffer_reserve(b, p->size) < 0)
                return -ENOMEM;
        while (got < p->size) {
                ssize_t n = pread(fd, buffer_data(b) + b->len + got, p->size - got, (off_t) (p->offset + got));
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0) {
                        if (n < 0)
                                cp_fail(u->cp, EXIT_IOERR, "cannot read '%s': %m", local);
                        else
                                cp_fail(u->cp, EXIT_IOERR, "'%s' changed while it was copied", local);
                        b->len = start;
                        piece_failed(u, p);
                        return 0;
                }
                got += (uint64_t) n;
        }
        b->len += p->size;
        return 1;
}

static void pump(Upload *u);

static void on_batch_done(agentix_request *r, const msgpack_object *result, const agentix_error *e, void *userdata) {
        Batch *b = userdata;
        Upload *u = b->u;
        Cp *cp = u->cp;
        uint64_t files = 0;

        cp->in_flight--;
        if (e && e->kind != AGENTIX_E_NONE) {
                char why[1024];

                /* The whole call failed: nothing of this batch is known to be there. */
                for (size_t i = 0; i < b->n; i++)
                        piece_failed(u, &u->pieces[b->pieces[i]]);
                cp->aborted = true;
                cp_fail(cp, exit_status_from_error(e), "upload to %s failed: %s", u->dst, error_reason(e, why, sizeof(why)));
        } else if (!result || result->type != MSGPACK_OBJECT_ARRAY || result->via.array.size != b->n) {
                for (size_t i = 0; i < b->n; i++)
                        piece_failed(u, &u->pieces[b->pieces[i]]);
                cp->aborted = true;
                cp_fail(cp, EXIT_PROTOCOL, "fs::upload answered something unexpected");
        } else
                for (size_t i = 0; i < b->n; i++) {
                        const msgpack_object *o = &result->via.array.ptr[i], *err = mp_map_get(o, "error");
                        Piece *p = &u->pieces[b->pieces[i]];

                        if (err && err->type != MSGPACK_OBJECT_NIL) {
                                const msgpack_object *m = mp_map_get(o, "message");
                                const char *text = p->remote;
                                int len = (int) strlen(p->remote);

                                if (m && m->type == MSGPACK_OBJECT_STR) {
                                        text = m->via.str.ptr;
                                        len = (int) m->via.str.size;
                                        if (len >= 7 && strneq(text, "Error: ", 7)) {
                                                text += 7;
                                                len -= 7;
                                        }
                                }
                                cp_fail(cp, EXIT_FAILED, "%.*s", len, text);
                                piece_failed(u, p);
                        } else if (p->offset + p->size == u->list.files[p->file].size && p->offset == 0)
                                files++; /* a whole file; large ones count once joined */
                }

        progress_add(&cp->progress, b->bytes, files);
        cp->files += files;
        cp->bytes += b->bytes;
        batch_free(b);
        pump(u);
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
        b->pieces = calloc(CP_BATCH_FILES_MAX, sizeof(size_t));
        if (!b->pieces) {
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

        while (u->next < u->n_pieces && b->n < CP_BATCH_FILES_MAX) {
                Piece *p = &u->pieces[u->next];

                if (b->n > 0 && b->bytes + p->size > cp->batch_size)
                        break;
                u->next++;
                r = pack_piece(u, p, msg);
                if (r < 0) {
                        batch_free(b);
                        return r;
                }
                if (r == 0)
                        continue;
                b->pieces[b->n++] = (size_t) (p - u->pieces);
                b->bytes += p->size;
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
        cp->in_flight++;
        return 1;
}

static void pump(Upload *u) {
        Cp *cp = u->cp;

        while (!cp->aborted && cp->in_flight < cp->jobs && u->next < u->n_pieces) {
                int r = start_batch(u);
                if (r < 0) {
                        cp->aborted = true;
                        cp_fail(cp, r == -ENOMEM ? EXIT_SOFTWARE : EXIT_UNAVAILABLE, "cannot start an upload: %s",
                                strerror(-r));
                }
        }
}

/* ---- after the bytes: join large files, make empty directories, restore executable bits ----- */

/* Run prefix… + as many items as fit in one command line, until all items are done. */
static int run_batched(Upload *u, const char *const *prefix, size_t n_prefix, char **items, size_t n_items,
                       const char *what) {
        Cp *cp = u->cp;
        size_t i = 0;

        while (i < n_items) {
                _cleanup_free_ char **words = calloc(n_prefix + n_items - i + 1, sizeof(char *));
                agentix_error e = AGENTIX_ERROR_NULL;
                size_t n = 0, len = 0, first = i;
                int r;

                if (!words)
                        return -ENOMEM;
                for (size_t k = 0; k < n_prefix; k++) {
                        words[n++] = (char *) prefix[k];
                        len += strlen(prefix[k]) + 1;
                }
                while (i < n_items && (i == first || len + strlen(items[i]) * 4 + 3 < REMOTE_COMMAND_MAX)) {
                        len += strlen(items[i]) * 4 + 3; /* worst case of quoting */
                        words[n++] = items[i++];
                }
                _cleanup_free_ char *command = shell_quote_argv(words, n);
                if (!command)
                        return -ENOMEM;
                r = cp_remote_command(cp, command, &e);
                if (r < 0) {
                        char why[1024];

                        cp_fail(cp, e.kind == AGENTIX_E_REMOTE ? EXIT_FAILED : exit_status_from_error(&e), "%s: %s", what,
                                error_reason(&e, why, sizeof(why)));
                        agentix_error_done(&e);
                        if (e.kind != AGENTIX_E_REMOTE)
                                return r;
                }
        }
        return 0;
}

static int join_large_files(Upload *u) {
        Cp *cp = u->cp;

        for (size_t i = 0; i < u->n_pieces;) {
                const CpFile *f = &u->list.files[u->pieces[i].file];
                size_t first = i, n;

                if (f->size <= CP_BATCH_FILE_MAX) {
                        i++;
                        continue;
                }
                while (i < u->n_pieces && u->pieces[i].file == u->pieces[first].file)
                        i++;
                n = i - first;

                /* set -- <parts>; cat "$@" > tmp && mv tmp target; rm parts — one command line,
                 * the part names quoted once. */
                _cleanup_free_ char *target = cp_path_join(u->dst, f->rel), *tmp = NULL, *command = NULL,
                                    *qtarget = NULL, *qtmp = NULL, *qparts = NULL;
                agentix_error e = AGENTIX_ERROR_NULL;
                char **parts;
                int r;

                if (!target || asprintf(&tmp, "%s.agentixctl-tmp-%u", target, (unsigned) getpid()) < 0)
                        return -ENOMEM;
                parts = calloc(n, sizeof(char *));
                if (!parts)
                        return -ENOMEM;
                for (size_t k = 0; k < n; k++)
                        parts[k] = u->pieces[first + k].remote;
                qparts = shell_quote_argv(parts, n);
                free(parts);
                qtarget = shell_quote(target);
                qtmp = shell_quote(tmp);
                if (!qparts || !qtarget || !qtmp)
                        return -ENOMEM;
                if (u->file_failed[u->pieces[first].file])
                        r = asprintf(&command, "rm -f -- %s", qparts);
                else
                        r = asprintf(&command, "set -- %s; cat -- \"$@\" > %s && mv -f -- %s %s; s=$?; rm -f -- \"$@\"; exit $s",
                                     qparts, qtmp, qtmp, qtarget);
                if (r < 0)
                        return -ENOMEM;
                r = cp_remote_command(cp, command, &e);
                if (r < 0) {
                        char why[1024];

                        cp_fail(cp, e.kind == AGENTIX_E_REMOTE ? EXIT_FAILED : exit_status_from_error(&e),
                                "cannot assemble %s in the sandbox (needs cat and mv): %s", target,
                                error_reason(&e, why, sizeof(why)));
                        agentix_error_done(&e);
                        continue;
                }
                if (!u->file_failed[u->pieces[first].file]) {
                        cp->files++;
                        progress_add(&cp->progress, 0, 1);
                }
        }
        return 0;
}

static int make_empty_dirs(Upload *u) {
        _cleanup_free_ char **paths = NULL;
        const char *prefix[] = { "mkdir", "-p", "--" };
        int r;

        if (u->n_empty_dirs == 0)
                return 0;
        paths = calloc(u->n_empty_dirs, sizeof(char *));
        if (!paths)
                return -ENOMEM;
        for (size_t i = 0; i < u->n_empty_dirs; i++)
                if (!(paths[i] = cp_path_join(u->dst, u->empty_dirs[i]))) {
                        r = -ENOMEM;
                        goto finish;
                }
        r = run_batched(u, prefix, ELEMENTSOF(prefix), paths, u->n_empty_dirs,
                        "cannot make empty directories in the sandbox (needs mkdir)");
finish:
        for (size_t i = 0; i < u->n_empty_dirs; i++)
                free(paths[i]);
        return r;
}

/* fs::upload makes files 0666 minus the umask: give executables their mode back, one chmod per
 * distinct mode. */
static int restore_modes(Upload *u) {
        _cleanup_free_ char **paths = NULL;
        bool done[07777 + 1] = {};
        int r = 0;

        for (size_t i = 0; i < u->list.n_files && r >= 0; i++) {
                mode_t mode = u->list.files[i].mode & 07777;
                char mode_text[8];
                size_t n = 0;

                if (!(mode & 0111) || u->file_failed[i] || done[mode])
                        continue;
                done[mode] = true;

                if (!paths) {
                        paths = calloc(u->list.n_files, sizeof(char *));
                        if (!paths)
                                return -ENOMEM;
                }
                for (size_t k = i; k < u->list.n_files; k++)
                        if ((u->list.files[k].mode & 07777) == mode && !u->file_failed[k])
                                if (!(paths[n++] = cp_path_join(u->dst, u->list.files[k].rel))) {
                                        r = -ENOMEM;
                                        break;
                                }
                snprintf(mode_text, sizeof(mode_text), "%o", (unsigned) mode);
                const char *prefix[] = { "chmod", mode_text, "--" };
                if (r >= 0)
                        r = run_batched(u, prefix, ELEMENTSOF(prefix), paths, n,
                                        "cannot restore executable modes in the sandbox (needs chmod)");
                for (size_t k = 0; k < n; k++)
                        free(paths[k]);
        }
        return r;
}

/* ---- the whole upload ------------------------------------------------------------------------ */

void cp_upload(Cp *cp, const char *src, const char *dst, bool is_dir) {
        Upload u = { .cp = cp, .src = src, .dst = dst, .is_dir = is_dir };
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
                r = cp_list_add_file(&u.list, "", (uint64_t) st.st_size, st.st_mode);
                if (r < 0)
                        goto finish;
        }

        r = plan_pieces(&u);
        if (r < 0)
                goto finish;
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
        if (cp->aborted)
                goto finish;

        r = join_large_files(&u);
        if (r >= 0)
                r = make_empty_dirs(&u);
        if (r >= 0)
                r = restore_modes(&u);

finish:
        if (r == -ENOMEM)
                cp_fail(cp, EXIT_SOFTWARE, "out of memory");
        else if (r < 0 && cp->status == EXIT_OK)
                cp_fail(cp, EXIT_UNAVAILABLE, "upload failed: %s", strerror(-r));
        for (size_t i = 0; i < u.n_pieces; i++)
                free(u.pieces[i].remote);
        free(u.pieces);
        free(u.file_failed);
        buffer_done(&u.message);
        for (size_t i = 0; i < u.n_empty_dirs; i++)
                free(u.empty_dirs[i]);
        free(u.empty_dirs);
        cp_list_done(&u.list);
}

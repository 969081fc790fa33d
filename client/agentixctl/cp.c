/* SPDX-License-Identifier: MIT */
/* agentixctl cp SRC DST: files and directories between here and the sandbox, with docker cp's
 * rules for where things land, and what the two directions share. */
#include <getopt.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agentixctl.h"
#include "cp.h"
#include "fail.h"
#include "format-util.h"
#include "fs-util.h"
#include "output.h"
#include "parse-util.h"
#include "envelope.h"
#include "remote-path.h"

static void help(void) {
        printf("Usage: agentixctl cp [OPTIONS] SRC DST\n"
               "\n"
               "Copy a file or a directory (recursively) between here and the sandbox. Exactly\n"
               "one of SRC and DST is remote, written :PATH (an absolute path in the sandbox).\n"
               "Like docker cp: a directory DST that exists receives SRC inside it (SRC/. copies\n"
               "the contents instead); one that does not exist becomes the copy, in a directory\n"
               "that must exist unless --parents is given.\n"
               "Contents and file modes (permission bits) are copied exactly, both ways;\n"
               "owners and times are not. Symbolic links to files are copied as files, links to\n"
               "directories and special files are skipped. Needs nothing in the sandbox but\n"
               "agentix-server (no shell, no coreutils).\n"
               "\n"
               "  -h --help               Show this help\n"
               "     --batch-size=BYTES   Bytes of files per call (default 8388608)\n"
               "     --jobs=N             Calls in flight at once (default 4)\n"
               "     --json               Print {files, directories, bytes, skipped, failed,\n"
               "                          seconds} at the end\n"
               "  -p --parents            Make DST's missing parent directories (docker cp\n"
               "                          fails there)\n"
               "  -q --quiet              No progress bar, summary or notes on stderr\n"
               "\n"
               "See agentixctl(1).\n");
}

/* ---- shared helpers ------------------------------------------------------------------------ */

int cp_list_add_file(CpList *l, const char *rel, uint64_t size, int mode) {
        char *copy;

        if (l->n_files == l->cap_files) {
                size_t cap = MAX(l->cap_files * 2, (size_t) 64);
                CpFile *f = reallocarray(l->files, cap, sizeof(CpFile));
                if (!f)
                        return -ENOMEM;
                l->files = f;
                l->cap_files = cap;
        }
        copy = strdup(rel);
        if (!copy)
                return -ENOMEM;
        l->files[l->n_files++] = (CpFile) { .rel = copy, .size = size, .mode = mode };
        l->total_bytes += size;
        return 0;
}

int cp_list_add_dir(CpList *l, const char *rel) {
        char *copy;

        if (l->n_dirs == l->cap_dirs) {
                size_t cap = MAX(l->cap_dirs * 2, (size_t) 16);
                char **d = reallocarray(l->dirs, cap, sizeof(char *));
                if (!d)
                        return -ENOMEM;
                l->dirs = d;
                l->cap_dirs = cap;
        }
        copy = strdup(rel);
        if (!copy)
                return -ENOMEM;
        l->dirs[l->n_dirs++] = copy;
        return 0;
}

void cp_list_done(CpList *l) {
        for (size_t i = 0; i < l->n_files; i++)
                free(l->files[i].rel);
        free(l->files);
        for (size_t i = 0; i < l->n_dirs; i++)
                free(l->dirs[i]);
        free(l->dirs);
        *l = (CpList) {};
}

char *cp_path_join(const char *root, const char *rel) {
        char *p;

        if (!*rel)
                return strdup(root);
        if (asprintf(&p, "%s%s%s", root, root[strlen(root) - 1] == '/' ? "" : "/", rel) < 0)
                return NULL;
        return p;
}

static void cp_vreport(Cp *cp, const char *fmt, va_list ap) {
        char line[4096];

        vsnprintf(line, sizeof(line), fmt, ap);
        line[strcspn(line, "\r\n")] = 0;
        /* Off the progress bar's line first. */
        if (cp->progress.drawn) {
                fputs("\r\033[K", stderr);
                cp->progress.drawn = false;
        }
        fflush(stdout);
        fprintf(stderr, "agentixctl: cp: %s\n", line);
}

void cp_fail(Cp *cp, int status, const char *fmt, ...) {
        va_list ap;

        /* After a signal, calls end cancelled: that is no news. */
        if (cp->signal != 0)
                return;
        va_start(ap, fmt);
        cp_vreport(cp, fmt, ap);
        va_end(ap);
        cp->failed++;
        if (cp->status == EXIT_OK)
                cp->status = status;
}

void cp_skip(Cp *cp, const char *fmt, ...) {
        va_list ap;

        cp->skipped++;
        if (arg_quiet)
                return;
        va_start(ap, fmt);
        cp_vreport(cp, fmt, ap);
        va_end(ap);
}

void cp_call_started(Cp *cp, agentix_request *r) {
        for (size_t i = 0; i < ELEMENTSOF(cp->calls); i++)
                if (!cp->calls[i]) {
                        cp->calls[i] = r;
                        break;
                }
        cp->in_flight++;
}

void cp_call_finished(Cp *cp, agentix_request *r) {
        for (size_t i = 0; i < ELEMENTSOF(cp->calls); i++)
                if (cp->calls[i] == r) {
                        cp->calls[i] = NULL;
                        break;
                }
        cp->in_flight--;
}

static int on_signal(sd_event_source *src, const struct signalfd_siginfo *si, void *userdata) {
        Cp *cp = userdata;
        agentix_request *calls[ELEMENTSOF(cp->calls)];

        /* A second signal: do not wait for the server any longer. */
        if (cp->signal != 0)
                exit(128 + (int) si->ssi_signo);
        cp->signal = (int) si->ssi_signo;
        cp->aborted = true;
        /* A cancel may end its call at once, which changes cp->calls: go through a copy. */
        memcpy(calls, cp->calls, sizeof(calls));
        for (size_t i = 0; i < ELEMENTSOF(calls); i++)
                if (calls[i])
                        (void) agentix_request_cancel(calls[i]);
        return 0;
}

const char *cp_error_reason(const agentix_error *e, char *buf, size_t size) {
        agentix_error as_file = *e;

        /* fs codes are lower-case words, exception names are not. */
        if (e->kind == AGENTIX_E_REMOTE && e->type && e->type[0] >= 'a' && e->type[0] <= 'z')
                as_file.kind = AGENTIX_E_FILE;
        return error_reason(&as_file, buf, size);
}

const char *cp_result_message(const msgpack_object *map, const char *fallback, int *ret_len) {
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

/* ---- where things go ------------------------------------------------------------------------ */

typedef enum PathKind {
        PATH_MISSING,
        PATH_FILE,
        PATH_DIR,
} PathKind;

/* The last component of a path without trailing slashes ("" for "/"). */
static char *last_component(const char *path) {
        size_t n = strlen(path);
        const char *start;

        while (n > 1 && path[n - 1] == '/')
                n--;
        if (n == 1 && path[0] == '/')
                return strdup("");
        start = memrchr(path, '/', n);
        start = start ? start + 1 : path;
        return strndup(start, n - (size_t) (start - path));
}

/* "dir/." (or "dir/./"): docker cp's "the contents, not the directory". */
static bool means_contents(const char *path) {
        size_t n = strlen(path);

        while (n > 1 && path[n - 1] == '/')
                n--;
        return (n >= 2 && path[n - 1] == '.' && path[n - 2] == '/') || (n == 1 && path[0] == '.');
}

static bool ends_with_slash(const char *path) {
        size_t n = strlen(path);
        return n > 0 && path[n - 1] == '/';
}

/* The directory a path is in, trailing slashes ignored: "/a/b/" → "/a", "/a" → "/", "a" → ".". */
static char *parent_path(const char *path) {
        size_t n = strlen(path);
        const char *slash;

        while (n > 1 && path[n - 1] == '/')
                n--;
        slash = memrchr(path, '/', n);
        if (!slash)
                return strdup(".");
        while (slash > path && slash[-1] == '/')
                slash--;
        return slash == path ? strdup("/") : strndup(path, (size_t) (slash - path));
}

/* What a remote path is, asking fs::ls; a directory's listing (the fs::ls result) is kept in
 * ret_listing when that is given. Returns an exit status. */
static int remote_kind(Cp *cp, const char *path, PathKind *ret, msgpack_unpacked *ret_listing) {
        _cleanup_buffer_ Buffer args = BUFFER_NULL;
        agentix_error e = AGENTIX_ERROR_NULL;
        msgpack_unpacked result;
        const msgpack_object *code;
        msgpack_packer pk;
        int r, status = EXIT_OK;

        mp_packer_init_buffer(&pk, &args);
        if (msgpack_pack_array(&pk, 1) < 0 || mp_pack_cstr(&pk, path) < 0)
                return fail(EXIT_SOFTWARE, "out of memory");
        r = agentix_call(cp->client, "fs::ls", &(agentix_args) { .args = buffer_data(&args), .args_size = args.len }, NULL,
                         &result, &e);
        if (r < 0) {
                status = fail_agentix(&e, "cp: %s", path);
                agentix_error_done(&e);
                return status;
        }
        if (result.data.type != MSGPACK_OBJECT_MAP || !(code = mp_map_get(&result.data, "error"))) {
                msgpack_unpacked_destroy(&result);
                return fail(EXIT_PROTOCOL, "cp: %s: fs::ls answered something unexpected", path);
        }
        if (code->type == MSGPACK_OBJECT_NIL) {
                *ret = PATH_DIR;
                if (ret_listing) {
                        *ret_listing = result;
                        return EXIT_OK;
                }
        } else if (mp_str_eq(code, "not_a_directory"))
                *ret = PATH_FILE;
        else if (mp_str_eq(code, "file_not_found"))
                *ret = PATH_MISSING;
        else {
                int len;
                const char *text = cp_result_message(&result.data, "error", &len);
                status = fail(EXIT_FAILED, "cp: %s: %.*s", path, len, text);
        }
        msgpack_unpacked_destroy(&result);
        return status;
}

static PathKind local_kind(const char *path) {
        struct stat st;

        if (stat(path, &st) < 0)
                return PATH_MISSING;
        return S_ISDIR(st.st_mode) ? PATH_DIR : PATH_FILE;
}

/* docker cp's rule for a DST that does not exist: it is made, in a directory that does; one
 * written as a directory (a trailing slash) must exist. --parents lifts both. */
static int check_remote_parent(Cp *cp, const char *dst) {
        _cleanup_free_ char *parent = parent_path(dst);
        PathKind kind;
        int status;

        if (!parent)
                return fail(EXIT_SOFTWARE, "cp: out of memory");
        if (ends_with_slash(dst) && !streq(dst, "/"))
                return fail(EXIT_FAILED, "cp: destination directory '%s' does not exist in the sandbox (-p makes it)",
                            dst);
        status = remote_kind(cp, parent, &kind, NULL);
        if (status != EXIT_OK)
                return status;
        if (kind != PATH_DIR)
                return fail(EXIT_FAILED, "cp: '%s' is not a directory in the sandbox (-p makes it)", parent);
        return EXIT_OK;
}

static int check_local_parent(const char *dst) {
        _cleanup_free_ char *parent = parent_path(dst);

        if (!parent)
                return fail(EXIT_SOFTWARE, "cp: out of memory");
        if (ends_with_slash(dst))
                return fail(EXIT_FAILED, "cp: destination directory '%s' does not exist (-p makes it)", dst);
        if (local_kind(parent) != PATH_DIR)
                return fail(EXIT_FAILED, "cp: '%s' is not a directory (-p makes it)", parent);
        return EXIT_OK;
}

/* --parents here: what fs::upload does in the sandbox (a DST written with a trailing slash is
 * a directory to make as well). */
static int make_local_parents(const char *dst) {
        _cleanup_free_ char *dir = ends_with_slash(dst) ? strdup(dst) : parent_path(dst);
        int r;

        if (!dir)
                return fail(EXIT_SOFTWARE, "cp: out of memory");
        r = mkdir_parents(dir);
        if (r < 0)
                return fail_errno(EXIT_IOERR, r, "cp: cannot make the directory '%s': %m", dir);
        return EXIT_OK;
}

/* docker cp's rule: where does SRC itself land, given what DST is? Returns an exit status. */
static int resolve_target(const char *src, bool src_is_dir, const char *dst, PathKind dst_kind, char **ret) {
        _cleanup_free_ char *base = last_component(src);
        char *t;

        if (!base)
                return fail(EXIT_SOFTWARE, "out of memory");
        if (src_is_dir) {
                if (dst_kind == PATH_FILE)
                        return fail(EXIT_FAILED, "cp: cannot copy a directory onto the file '%s'", dst);
                /* An existing directory receives SRC inside it, unless SRC says "/." or is "/". */
                if (dst_kind == PATH_DIR && !means_contents(src) && *base && !streq(base, "."))
                        t = cp_path_join(dst, base);
                else
                        t = strdup(dst);
        } else {
                if (dst_kind == PATH_DIR || (dst_kind == PATH_MISSING && ends_with_slash(dst)))
                        t = cp_path_join(dst, base);
                else
                        t = strdup(dst);
        }
        if (!t)
                return fail(EXIT_SOFTWARE, "out of memory");
        *ret = t;
        return EXIT_OK;
}

/* ---- the command ---------------------------------------------------------------------------- */

static int print_summary(Cp *cp, uint64_t elapsed_usec) {
        double sec = (double) elapsed_usec / 1e6;
        char b[FORMAT_BYTES_MAX], r[FORMAT_BYTES_MAX];

        if (arg_json)
                /* Milliseconds are plenty, and read better than a double's 17 digits. */
                return print_json_flags(json_pack("{s:I,s:I,s:I,s:I,s:I,s:f}", "files", (json_int_t) cp->files, "directories",
                                            (json_int_t) cp->dirs, "bytes", (json_int_t) cp->bytes, "skipped",
                                            (json_int_t) cp->skipped, "failed", (json_int_t) cp->failed, "seconds",
                                            (double) (elapsed_usec / 1000) / 1000.0),
                                        JSON_REAL_PRECISION(12));
        if (!arg_quiet && isatty(STDERR_FILENO))
                fprintf(stderr, "Copied %llu file%s (%s) in %.1f s (%s/s)%s\n", (unsigned long long) cp->files,
                        cp->files == 1 ? "" : "s", format_bytes(cp->bytes, b), sec,
                        format_bytes(sec > 0 ? (uint64_t) ((double) cp->bytes / sec) : cp->bytes, r),
                        cp->failed ? ", with errors" : "");
        return EXIT_OK;
}

enum {
        ARG_BATCH_SIZE = ARG_COMMON_END,
        ARG_JOBS,
};

int verb_cp(int argc, char *argv[]) {
        static const struct option options[] = {
                COMMON_LONG_OPTIONS,
                { "batch-size", required_argument, NULL, ARG_BATCH_SIZE },
                { "jobs", required_argument, NULL, ARG_JOBS },
                { "parents", no_argument, NULL, 'p' },
                {}
        };
        _cleanup_(remote_path_done) RemotePath src = {}, dst = {};
        _cleanup_free_ char *target = NULL;
        msgpack_unpacked listing;
        bool have_listing = false;
        Cp cp = { .batch_size = 8u * 1024 * 1024, .jobs = 4 };
        int64_t v;
        PathKind kind;
        uint64_t start;
        bool parents = false;
        int c, r, status;

        while ((c = getopt_long(argc, argv, "+:p" COMMON_OPTIONS, options, NULL)) >= 0) {
                switch (c) {
                        COMMON_OPTION_CASES("cp", help, argv);
                case 'p':
                        parents = true;
                        break;
                case ARG_BATCH_SIZE:
                        if (parse_int64(optarg, 1, &v) < 0 || (uint64_t) v > CP_BATCH_FILE_MAX)
                                return fail_usage("cp", "invalid --batch-size '%s': 1 to %llu bytes", optarg,
                                                  (unsigned long long) CP_BATCH_FILE_MAX);
                        cp.batch_size = (uint64_t) v;
                        break;
                case ARG_JOBS:
                        if (parse_int64(optarg, 1, &v) < 0 || v > CP_JOBS_MAX)
                                return fail_usage("cp", "invalid --jobs '%s': 1 to 64", optarg);
                        cp.jobs = (unsigned) v;
                        break;
                }
        }
        if (argc - optind != 2)
                return fail_usage("cp", "expected SRC DST");
        if (remote_path_parse(argv[optind], &src) < 0)
                return fail_usage("cp", "invalid sandbox ID in '%s'", argv[optind]);
        if (remote_path_parse(argv[optind + 1], &dst) < 0)
                return fail_usage("cp", "invalid sandbox ID in '%s'", argv[optind + 1]);
        if (src.remote == dst.remote)
                return fail_usage("cp", "exactly one of SRC and DST must be remote (:PATH)");
        if (src.sandbox || dst.sandbox)
                return fail_usage("cp", "sandbox IDs (ID:PATH) need agentd, which this agentixctl does not use yet; "
                                  "give the sandbox with --url and write :PATH");
        RemotePath *remote = src.remote ? &src : &dst;
        if (remote->path[0] != '/')
                return fail_usage("cp", "remote paths are absolute: ':%s'", remote->path);
        if (!*(src.remote ? dst.path : src.path))
                return fail_usage("cp", "empty local path");

        r = sd_event_new(&cp.event);
        if (r < 0)
                return fail_errno(EXIT_SOFTWARE, r, "cp: cannot set up an event loop: %m");

        ctl_catch_stop_signals(cp.event, on_signal, &cp);

        if (!src.remote) {
                struct stat st;

                /* The local side first: a missing file should not cost a connection. */
                if (stat(src.path, &st) < 0) {
                        status = fail_errno(EXIT_IOERR, errno, "cp: cannot access '%s': %m", src.path);
                        goto finish;
                }
                if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode)) {
                        status = fail(EXIT_IOERR, "cp: '%s' is not a regular file or directory", src.path);
                        goto finish;
                }
                status = ctl_connect(cp.event, 0, &cp.client);
                if (status != EXIT_OK)
                        goto finish;
                status = remote_kind(&cp, dst.path, &kind, NULL);
                if (status != EXIT_OK)
                        goto finish;
                if (kind == PATH_MISSING && !parents) {
                        status = check_remote_parent(&cp, dst.path);
                        if (status != EXIT_OK)
                                goto finish;
                }
                status = resolve_target(src.path, S_ISDIR(st.st_mode), dst.path, kind, &target);
                if (status != EXIT_OK)
                        goto finish;
                start = now_usec();
                cp_upload(&cp, src.path, target, S_ISDIR(st.st_mode));
        } else {
                status = ctl_connect(cp.event, 0, &cp.client);
                if (status != EXIT_OK)
                        goto finish;
                status = remote_kind(&cp, src.path, &kind, &listing);
                if (status != EXIT_OK)
                        goto finish;
                have_listing = kind == PATH_DIR;
                if (kind == PATH_MISSING) {
                        status = fail(EXIT_FAILED, "cp: Path '%s' not found in the sandbox", src.path);
                        goto finish;
                }
                if (local_kind(dst.path) == PATH_MISSING) {
                        status = parents ? make_local_parents(dst.path) : check_local_parent(dst.path);
                        if (status != EXIT_OK)
                                goto finish;
                }
                status = resolve_target(src.path, kind == PATH_DIR, dst.path, local_kind(dst.path), &target);
                if (status != EXIT_OK)
                        goto finish;
                start = now_usec();
                cp_download(&cp, src.path, target, kind == PATH_DIR, have_listing ? &listing.data : NULL);
        }
        progress_finish(&cp.progress);

        if (cp.signal != 0) {
                status = 128 + cp.signal;
                goto finish;
        }
        status = print_summary(&cp, now_usec() - start);
        if (status == EXIT_OK)
                status = cp.status;

finish:
        if (have_listing)
                msgpack_unpacked_destroy(&listing);
        agentix_client_unref(cp.client);
        sd_event_unref(cp.event);
        return status;
}

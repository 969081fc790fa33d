/* SPDX-License-Identifier: MIT */
/* fs.glob: the regular files and directories below a root whose paths match a pattern
 * (deepagents' contract, see fs-pattern.h: BaseSandbox lists matching directories too, with
 * is_dir), bounded by time and match count. */
#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>

#include "fs-ops.h"
#include "fs-path.h"
#include "fs-pattern.h"
#include "fs-walk.h"
#include "macro.h"

void fs_glob_result_done(FsGlobResult *r) {
        fs_status_done(&r->status);
        for (size_t i = 0; i < r->n_matches; i++)
                free(r->matches[i].path);
        free(r->matches);
        *r = (FsGlobResult) {};
}

typedef struct GlobWalk {
        FsWalk walk;
        const FsPattern *pattern;
        char *real_root;
        FsGlobResult *res;
        size_t cap;
        size_t max_matches;
} GlobWalk;

/* Record a match (st: what it is, links followed); 0, or -ENOMEM. Past the cap, the walk ends
 * and the result says it was cut short. */
static int add_match(GlobWalk *g, const char *path, const struct stat *st) {
        FsEntry *e;

        if (g->res->n_matches >= g->max_matches) {
                fs_walk_stop(&g->walk);
                return 0;
        }
        if (g->res->n_matches == g->cap) {
                size_t ncap = MAX(g->cap * 2, (size_t) 64);
                FsEntry *n = reallocarray(g->res->matches, ncap, sizeof(FsEntry));
                if (!n)
                        return -ENOMEM;
                g->res->matches = n;
                g->cap = ncap;
        }
        e = &g->res->matches[g->res->n_matches];
        *e = (FsEntry) {
                .is_dir = S_ISDIR(st->st_mode),
                .mode = (int) (st->st_mode & 07777),
                .size = (uint64_t) st->st_size,
                .mtime = st->st_mtim,
        };
        e->path = strdup(path);
        if (!e->path)
                return -ENOMEM;
        g->res->n_matches++;
        return 0;
}

static int glob_on_directory(FsWalk *w, int dir_fd, const char *name, void *parent_ctx, void **ret_child_ctx) {
        GlobWalk *g = (GlobWalk *) w;
        FsPatternStates *child;
        struct stat st;
        int r;

        /* The directory itself, when its path matches. */
        if (fs_pattern_states_match_file(g->pattern, parent_ctx, name) &&
            fstatat(dir_fd, name, &st, AT_SYMLINK_NOFOLLOW) >= 0) {
                r = add_match(g, (const char *) buffer_data(&w->path), &st);
                if (r < 0 || w->stopped)
                        return r;
        }

        child = malloc(sizeof(FsPatternStates));
        if (!child)
                return -ENOMEM;
        r = fs_pattern_states_advance(g->pattern, parent_ctx, name, child);
        if (r < 0) {
                free(child);
                return r;
        }
        if (!fs_pattern_states_alive(g->pattern, child)) {
                fs_pattern_states_done(child);
                free(child);
                return 0;
        }
        *ret_child_ctx = child;
        return 1;
}

static void glob_free_ctx(void *ctx) {
        if (!ctx)
                return;
        fs_pattern_states_done(ctx);
        free(ctx);
}

static int glob_on_file(FsWalk *w, int dir_fd, const char *name, unsigned char type, void *dir_ctx) {
        GlobWalk *g = (GlobWalk *) w;
        const char *path = (const char *) buffer_data(&w->path);
        struct stat st;

        if (!fs_pattern_states_match_file(g->pattern, dir_ctx, name))
                return 0;

        if (type == DT_LNK) {
                /* A link counts as what it points to (a file or a directory, as find -L sees it;
                 * never entered), as long as that stays below the root. */
                _cleanup_free_ char *real = realpath(path, NULL);
                if (!real || !fs_path_is_below(real, g->real_root))
                        return 0;
                if (stat(real, &st) < 0)
                        return 0;
        } else if (fstatat(dir_fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return 0;
        if (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode))
                return 0;
        return add_match(g, path, &st);
}

static int entry_compare(const void *a, const void *b) {
        return strcmp(((const FsEntry *) a)->path, ((const FsEntry *) b)->path);
}

static int glob_impl(const char *pattern, const char *root, const FsGlobOptions *opts, FsGlobResult *res) {
        _cleanup_(fs_pattern_freep) FsPattern *p = NULL;
        _cleanup_(fs_pattern_states_done) FsPatternStates initial = {};
        _cleanup_close_ int fd = -EBADF;
        GlobWalk g = {};
        int r;

        r = fs_path_check(root, strlen(root), &res->status);
        if (r <= 0)
                return r;

        r = fs_pattern_compile(pattern, &p);
        if (r == -EINVAL)
                return fs_status_set(&res->status, FS_ERROR_INVALID_PATH,
                                     "Error: Path traversal not allowed in glob pattern '%s'", pattern);
        if (r == -E2BIG)
                return fs_status_set(&res->status, FS_ERROR_TOO_LARGE,
                                     "Error: Glob pattern is too broad (more than %u brace expansions or %u bytes)",
                                     FS_PATTERN_MAX_EXPANSIONS, FS_PATTERN_MAX_LENGTH);
        if (r < 0)
                return r;

        fd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return fs_status_from_errno(&res->status, -errno, root, FS_SUBJECT_DIRECTORY);

        r = fs_pattern_states_initial(p, &initial);
        if (r < 0)
                return r;

        g = (GlobWalk) {
                .walk = {
                        .deadline_usec = now_usec() + (opts && opts->timeout_usec ? opts->timeout_usec : FS_GLOB_TIMEOUT_USEC),
                        .cancelled = opts ? opts->cancelled : NULL,
                        .userdata = opts ? opts->userdata : NULL,
                        .on_directory = glob_on_directory,
                        .free_ctx = glob_free_ctx,
                        .on_file = glob_on_file,
                },
                .pattern = p,
                .res = res,
                .max_matches = opts && opts->max_matches ? opts->max_matches : FS_GLOB_MAX_MATCHES,
        };
        g.real_root = realpath(root, NULL);
        if (!g.real_root) {
                r = errno == ENOMEM ? -ENOMEM : fs_status_from_errno(&res->status, -errno, root, FS_SUBJECT_DIRECTORY);
                goto finish;
        }

        if (fs_pattern_states_alive(p, &initial))
                r = fs_walk_run(&g.walk, root, fd, &initial);
        if (r < 0)
                goto finish;

        res->truncated = g.walk.incomplete;
        if (res->n_matches > 0)
                qsort(res->matches, res->n_matches, sizeof(FsEntry), entry_compare);

finish:
        free(g.real_root);
        fs_walk_done(&g.walk);
        return r;
}

int fs_glob(const char *pattern, const char *root, const FsGlobOptions *opts, FsGlobResult *ret) {
        _cleanup_(fs_glob_result_done) FsGlobResult res = {};
        int r;

        r = glob_impl(pattern, root, opts, &res);
        if (r < 0)
                return r;
        *ret = res;
        res = (FsGlobResult) {};
        return 0;
}

/* SPDX-License-Identifier: MIT */
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <sys/stat.h>

#include "fs-util.h"
#include "runtime-tree.h"

static int write_text(const char *path, const char *text) {
        _cleanup_close_ int fd = -EBADF;
        char dir[PATH_MAX];
        int r;

        snprintf(dir, sizeof(dir), "%s", path);
        *strrchr(dir, '/') = 0;
        r = mkdir_parents(dir);
        if (r < 0)
                return r;
        fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd < 0)
                return negative_errno();
        return loop_write(fd, text, strlen(text));
}

static int write_link(const char *root, const char *name, const char *target) {
        char path[PATH_MAX], dir[PATH_MAX];
        int r;

        snprintf(path, sizeof(path), "%s/%s", root, name);
        snprintf(dir, sizeof(dir), "%s", path);
        *strrchr(dir, '/') = 0;
        r = mkdir_parents(dir);
        if (r < 0)
                return r;
        return symlink(target, path) < 0 ? negative_errno() : 0;
}

static int write_links(const RuntimeTree *t, const char *root) {
        int r = 0;

        for (size_t i = 0; r >= 0 && i < t->c->n_links; i++) {
                _cleanup_free_ char *target = store_ref_path(&t->c->links[i].target);
                if (!target)
                        return -ENOMEM;
                r = write_link(root, t->c->links[i].path, target);
        }
        for (size_t i = 0; r >= 0 && i < t->c->n_paths; i++) {
                StorePath *sp = t->c->paths[i];
                for (size_t k = 0; r >= 0 && k < sp->n_files; k++)
                        if (strneq(sp->files[k].dest, "lib/agentix/modules/", 20)) {
                                StoreRef ref = { .path = sp, .dest = sp->files[k].dest };
                                _cleanup_free_ char *target = store_ref_path(&ref);
                                if (!target)
                                        return -ENOMEM;
                                r = write_link(root, sp->files[k].dest, target);
                        }
        }
        if (r < 0)
                return r;
        /* The server's module directory, even with no modules. */
        {
                char dir[PATH_MAX];
                snprintf(dir, sizeof(dir), "%s/lib/agentix/modules", root);
                return mkdir_parents(dir);
        }
}

static int write_environment(const RuntimeTree *t, const char *root) {
        _cleanup_free_ char *text = NULL;
        char path[PATH_MAX];
        size_t len = 0;

        for (char *const *e = t->env; e && *e; e++)
                len += strlen(*e) + 1;
        text = calloc(1, len + 128);
        if (!text)
                return -ENOMEM;
        strcpy(text, "# Set by agentix-server for everything it runs (agentixctl build).\n");
        for (char *const *e = t->env; e && *e; e++)
                strcat(strcat(text, *e), "\n");
        snprintf(path, sizeof(path), "%s/etc/environment", root);
        return write_text(path, text);
}

static int write_manifest(const RuntimeTree *t, const char *root) {
        _cleanup_free_ char *text = NULL;
        json_t *paths = json_array(), *j;
        char path[PATH_MAX];

        for (size_t i = 0; paths && i < t->c->n_paths; i++) {
                StorePath *sp = t->c->paths[i];
                json_t *pkgs = json_array();
                for (char **p = sp->packages; pkgs && p && *p; p++)
                        json_array_append_new(pkgs, json_string(*p));
                json_array_append_new(paths, json_pack("{s:s+, s:s, s:s, s:s?, s:o, s:I}", "path", STORE_DIR "/",
                                                       sp->basename, "name", sp->name, "version", sp->version, "source",
                                                       sp->source_package, "packages", pkgs, "size",
                                                       (json_int_t) sp->total_size));
        }
        j = json_pack("{s:s, s:s, s:s?, s:s, s:s, s:o}", "name", t->m->name, "version", t->m->version, "description",
                      t->m->description, "platform", t->platform, "agentix", AGENTIX_VERSION, "store_paths", paths);
        text = j ? json_dumps(j, JSON_INDENT(2) | JSON_SORT_KEYS) : NULL;
        json_decref(j);
        if (!text)
                return -ENOMEM;
        snprintf(path, sizeof(path), "%s/manifest.json", root);
        return write_text(path, text);
}

static int copy_files(const RuntimeTree *t, const char *root, char **ret_error) {
        for (size_t i = 0; i < t->m->n_copies; i++) {
                const BundleCopy *c = &t->m->copies[i];
                char from[PATH_MAX], to[PATH_MAX], dir[PATH_MAX];
                struct stat st;
                int r;

                if (c->source[0] == '/')
                        snprintf(from, sizeof(from), "%s", c->source);
                else
                        snprintf(from, sizeof(from), "%s/%s", t->m->dir, c->source);
                snprintf(to, sizeof(to), "%s/%s", root, c->dest);
                if (stat(from, &st) < 0 || !S_ISREG(st.st_mode))
                        return message_set_first(ret_error, -ENOENT, "[Files] Copy=: %s is not a readable file", from);
                snprintf(dir, sizeof(dir), "%s", to);
                *strrchr(dir, '/') = 0;
                r = mkdir_parents(dir);
                if (r >= 0)
                        r = copy_file(from, to, st.st_mode & 0755);
                if (r < 0)
                        return message_set_first(ret_error, r, "cannot copy %s: %s", from, strerror(-r));
        }
        return 0;
}

int runtime_tree_write(const RuntimeTree *t, const char *root, char **ret_error) {
        int r;

        r = mkdir_parents(root);
        if (r >= 0)
                r = write_links(t, root);
        if (r >= 0)
                r = write_environment(t, root);
        if (r >= 0)
                r = write_manifest(t, root);
        if (r < 0)
                return message_set_first(ret_error, r, "cannot assemble /nix/runtime: %s", strerror(-r));
        return copy_files(t, root, ret_error);
}

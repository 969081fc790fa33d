/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "macro.h"
#include "python-relocate.h"

/* Where Debian puts what a package's Python code reads, and how its dest in a store path
 * starts: /usr/share/X is share/X, /etc/X is etc/X. Under /etc only files the bundle holds
 * exactly are followed (a package's own configuration, the CA bundle): the task image's
 * /etc/hosts and the like are not the bundle's. */
static const struct {
        const char *prefix;
        size_t strip;
        bool directories;
} prefixes[] = {
        { "/usr/share/", 5, true },
        { "/etc/", 1, false },
};
#define SOURCE_MAX (16u * 1024u * 1024u)

/* The file (or directory) `dest` in some store path of the closure. */
static bool find_in_store(Closure *c, const char *dest, bool directories, StoreRef *ret) {
        size_t n = strlen(dest);

        for (size_t i = 0; i < c->n_paths; i++) {
                StorePath *sp = c->paths[i];

                for (size_t k = 0; k < sp->n_files; k++) {
                        const char *d = sp->files[k].dest;

                        if (strncmp(d, dest, n) == 0 && (d[n] == 0 || (directories && d[n] == '/'))) {
                                *ret = (StoreRef) { .path = sp };
                                return true;
                        }
                }
        }
        return false;
}

static bool have_rewrite(const StoreFile *f, const char *from, size_t n) {
        for (size_t i = 0; i < f->n_text_rewrites; i++)
                if (strlen(f->text_rewrites[i].from) == n && memcmp(f->text_rewrites[i].from, from, n) == 0)
                        return true;
        return false;
}

static int add_rewrite(StoreFile *f, const char *from, size_t n, size_t strip, StorePath *to) {
        TextRewrite *grown = realloc(f->text_rewrites, (f->n_text_rewrites + 1) * sizeof(TextRewrite));
        TextRewrite *t;

        if (!grown)
                return -ENOMEM;
        f->text_rewrites = grown;
        t = &f->text_rewrites[f->n_text_rewrites];
        *t = (TextRewrite) { .from = strndup(from, n), .to = { .path = to, .dest = strndup(from + strip, n - strip) } };
        if (!t->from || !t->to.dest) {
                free(t->from);
                free(t->to.dest);
                return -ENOMEM;
        }
        f->n_text_rewrites++;
        return 0;
}

static int scan_file(Closure *c, StoreFile *f) {
        _cleanup_free_ char *data = NULL;
        _cleanup_close_ int fd = -EBADF;
        struct stat st;
        int r;

        fd = open(f->source, O_RDONLY | O_CLOEXEC);
        if (fd < 0 || fstat(fd, &st) < 0)
                return -errno;
        if (st.st_size <= 0 || (uint64_t) st.st_size > SOURCE_MAX)
                return 0;
        data = malloc((size_t) st.st_size + 1);
        if (!data)
                return -ENOMEM;
        if (loop_read_exact(fd, data, (size_t) st.st_size) < 0)
                return -EIO;
        data[st.st_size] = 0;

        for (size_t k = 0; k < ELEMENTSOF(prefixes); k++) {
                const char *prefix = prefixes[k].prefix;

                for (char *p = data; (p = strstr(p, prefix)); p += strlen(prefix)) {
                        char quote = p > data ? p[-1] : 0, *end;
                        _cleanup_free_ char *dest = NULL;
                        StoreRef ref;

                        if (quote != '\'' && quote != '"')
                                continue;
                        end = strchr(p, quote);
                        if (!end || (size_t) (end - p) <= strlen(prefix) || end[-1] == '/')
                                continue;
                        /* A path with a line break, a format or an escape in it is not one to follow. */
                        if (strcspn(p, "\n{%\\") < (size_t) (end - p) || have_rewrite(f, p, (size_t) (end - p)))
                                continue;
                        dest = strndup(p + prefixes[k].strip, (size_t) (end - p) - prefixes[k].strip);
                        if (!dest)
                                return -ENOMEM;
                        if (!find_in_store(c, dest, prefixes[k].directories, &ref))
                                continue;
                        r = add_rewrite(f, p, (size_t) (end - p), prefixes[k].strip, ref.path);
                        if (r < 0)
                                return r;
                }
        }
        return 0;
}

int relocate_python_paths(Closure *c) {
        for (size_t i = 0; i < c->n_paths; i++) {
                StorePath *sp = c->paths[i];

                for (size_t k = 0; k < sp->n_files; k++) {
                        StoreFile *f = &sp->files[k];
                        size_t n = strlen(f->dest);
                        int r;

                        if (!S_ISREG(f->mode) || n < 3 || !streq(f->dest + n - 3, ".py") ||
                            !strstr(f->dest, "/dist-packages/"))
                                continue;
                        r = scan_file(c, f);
                        if (r < 0)
                                return message_set_first(&c->error, r, "cannot read %s: %s", f->source, strerror(-r));
                }
        }
        return 0;
}

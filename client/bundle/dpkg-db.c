/* SPDX-License-Identifier: MIT */
#include <limits.h>
#include <sys/stat.h>

#include "dpkg-db.h"
#include "host-command.h"

#define DPKG_INFO_DIR "/var/lib/dpkg/info"

/* One line per package, tab-separated: the fields below, in this order. */
#define QUERY_FORMAT "${Package}\\t${Architecture}\\t${Version}\\t${source:Package}\\t${source:Version}\\t" \
        "${Essential}\\t${db:Status-Abbrev}\\t${Provides}\\t${Pre-Depends}\\t${Depends}\\n"
enum { F_NAME, F_ARCH, F_VERSION, F_SOURCE, F_SOURCE_VERSION, F_ESSENTIAL, F_STATUS, F_PROVIDES, F_PRE_DEPENDS,
       F_DEPENDS, N_FIELDS };

static void package_done(DebPackage *p) {
        free(p->name);
        free(p->arch);
        free(p->version);
        free(p->source);
        free(p->source_version);
        strv_free(p->provides);
        free(p->depends);
        strv_free(p->files);
}

DpkgDb *dpkg_db_free(DpkgDb *db) {
        if (!db)
                return NULL;
        strmap_free(db->by_name);
        strmap_free(db->providers);
        strmap_free(db->owners);
        for (size_t i = 0; i < db->n_packages; i++)
                package_done(&db->packages[i]);
        free(db->packages);
        free(db->arch);
        free(db);
        return NULL;
}

/* "a (>= 1), b:any, c" -> a b c: the names of a comma-separated list. */
static int split_names(const char *s, char ***ret) {
        _cleanup_strv_free_ char **l = NULL;

        while (*s) {
                size_t n;
                int r;

                s += strspn(s, " ,");
                n = strcspn(s, " ,(:");
                if (n > 0) {
                        r = strv_consume(&l, strndup(s, n));
                        if (r < 0)
                                return r;
                }
                s += strcspn(s, ",");
        }
        *ret = TAKE_PTR(l);
        return 0;
}

static bool arch_is_ours(const DpkgDb *db, const char *arch) {
        return streq(arch, db->arch) || streq(arch, "all");
}

static int parse_line(DpkgDb *db, char *line) {
        char *f[N_FIELDS];
        DebPackage *p;
        int r;

        for (size_t i = 0; i < N_FIELDS; i++) {
                f[i] = line;
                line = strchr(line, '\t');
                if (!line && i + 1 < N_FIELDS)
                        return -EBADMSG;
                if (line)
                        *line++ = 0;
        }
        /* Installed ("ii") or on hold ("hi"), of our architecture. */
        if (strlen(f[F_STATUS]) < 2 || f[F_STATUS][1] != 'i' || !arch_is_ours(db, f[F_ARCH]))
                return 0;

        p = &db->packages[db->n_packages];
        *p = (DebPackage) {
                .name = strdup(f[F_NAME]),
                .arch = strdup(f[F_ARCH]),
                .version = strdup(f[F_VERSION]),
                .source = strdup(strempty(f[F_SOURCE]) ? f[F_NAME] : f[F_SOURCE]),
                .source_version = strdup(strempty(f[F_SOURCE_VERSION]) ? f[F_VERSION] : f[F_SOURCE_VERSION]),
                .essential = streq(f[F_ESSENTIAL], "yes"),
        };
        if (asprintf(&p->depends, "%s%s%s", f[F_PRE_DEPENDS], *f[F_PRE_DEPENDS] && *f[F_DEPENDS] ? ", " : "",
                     f[F_DEPENDS]) < 0)
                p->depends = NULL;
        db->n_packages++;
        if (!p->name || !p->arch || !p->version || !p->source || !p->source_version || !p->depends)
                return -ENOMEM;
        r = split_names(f[F_PROVIDES], &p->provides);
        if (r < 0)
                return r;
        return 0;
}

static int index_packages(DpkgDb *db) {
        db->by_name = strmap_new();
        db->providers = strmap_new();
        if (!db->by_name || !db->providers)
                return -ENOMEM;
        for (size_t i = 0; i < db->n_packages; i++) {
                DebPackage *p = &db->packages[i];
                int r = strmap_put(db->by_name, p->name, strlen(p->name), p);
                if (r < 0 && r != -EEXIST)
                        return r;
        }
        /* dpkg-query lists packages sorted by name, so the first provider is the first by name. */
        for (size_t i = 0; i < db->n_packages; i++) {
                DebPackage *p = &db->packages[i];
                for (char **v = p->provides; v && *v; v++) {
                        int r = strmap_put(db->providers, *v, strlen(*v), p);
                        if (r < 0 && r != -EEXIST)
                                return r;
                }
        }
        return 0;
}

int dpkg_db_load(DpkgDb **ret) {
        _cleanup_(dpkg_db_freep) DpkgDb *db = NULL;
        _cleanup_free_ char *out = NULL, *arch = NULL;
        size_t n_lines = 0;
        struct stat st;
        int r;

        db = calloc(1, sizeof(*db));
        if (!db)
                return -ENOMEM;

        r = spawn_stdout((char *[]) { (char *) "dpkg", (char *) "--print-architecture", NULL }, &arch, NULL);
        if (r < 0)
                return r;
        if (r != 0 || strempty(arch))
                return -EIO;
        arch[strcspn(arch, "\n")] = 0;
        db->arch = TAKE_PTR(arch);
        db->merged_usr = lstat("/lib", &st) == 0 && S_ISLNK(st.st_mode);

        r = spawn_stdout((char *[]) { (char *) "dpkg-query", (char *) "-W", (char *) "-f=" QUERY_FORMAT, NULL }, &out,
                         NULL);
        if (r < 0)
                return r;
        if (r != 0)
                return -EIO;
        for (const char *c = out; *c; c++)
                n_lines += *c == '\n';
        db->packages = calloc(n_lines + 1, sizeof(DebPackage));
        if (!db->packages)
                return -ENOMEM;
        for (char *line = out, *next; *line; line = next) {
                next = strchr(line, '\n');
                if (!next)
                        break;
                *next++ = 0;
                r = parse_line(db, line);
                if (r < 0)
                        return r;
        }
        r = index_packages(db);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(db);
        return 0;
}

DebPackage *dpkg_db_find(DpkgDb *db, const char *name) {
        return strmap_get(db->by_name, name, strlen(name)) ?: strmap_get(db->providers, name, strlen(name));
}

int dpkg_canonical_path(const DpkgDb *db, const char *path, char **ret) {
        static const char *const merged[] = { "bin", "sbin", "lib", "lib32", "lib64", "libx32" };
        _cleanup_free_ char *out = NULL;
        size_t len = 0;

        if (path[0] != '/')
                return -EINVAL;
        out = malloc(strlen(path) + STRLEN("/usr") + 2);
        if (!out)
                return -ENOMEM;
        for (const char *p = path; *p;) {
                size_t n;

                p += strspn(p, "/");
                n = strcspn(p, "/");
                if (n == 0 || (n == 1 && p[0] == '.')) {
                        p += n;
                        continue;
                }
                if (n == 2 && strneq(p, "..", 2)) {
                        while (len > 0 && out[--len] != '/')
                                ;
                        p += n;
                        continue;
                }
                out[len++] = '/';
                memcpy(out + len, p, n);
                len += n;
                p += n;
        }
        if (len == 0)
                out[len++] = '/';
        out[len] = 0;

        if (db && db->merged_usr)
                for (size_t i = 0; i < ELEMENTSOF(merged); i++) {
                        size_t n = strlen(merged[i]);
                        if (strneq(out + 1, merged[i], n) && (out[n + 1] == '/' || out[n + 1] == 0)) {
                                memmove(out + 4, out, len + 1);
                                memcpy(out, "/usr", 4);
                                break;
                        }
                }
        *ret = TAKE_PTR(out);
        return 0;
}

int dpkg_db_load_files(DpkgDb *db, DebPackage *p) {
        _cleanup_strv_free_ char **files = NULL;
        _cleanup_fclose_ FILE *f = NULL;
        _cleanup_free_ char *line = NULL;
        char path[PATH_MAX];
        size_t size = 0, n_files = 0;
        ssize_t n;
        int r;

        if (p->files)
                return 0;
        snprintf(path, sizeof(path), DPKG_INFO_DIR "/%s:%s.list", p->name, p->arch);
        f = fopen(path, "re");
        if (!f) {
                snprintf(path, sizeof(path), DPKG_INFO_DIR "/%s.list", p->name);
                f = fopen(path, "re");
        }
        if (!f)
                return negative_errno();
        while ((n = getline(&line, &size, f)) > 0) {
                char *canonical;

                line[strcspn(line, "\n")] = 0;
                if (line[0] != '/' || streq(line, "/."))
                        continue;
                r = dpkg_canonical_path(db, line, &canonical);
                if (r < 0)
                        return r;
                r = strv_consume_n(&files, &n_files, canonical);
                if (r < 0)
                        return r;
        }
        if (ferror(f))
                return -EIO;
        if (!files && !(files = calloc(1, sizeof(char *))))
                return -ENOMEM;
        p->files = TAKE_PTR(files);
        return 0;
}

static int index_owners(DpkgDb *db) {
        db->owners = strmap_new();
        if (!db->owners)
                return -ENOMEM;
        for (size_t i = 0; i < db->n_packages; i++) {
                DebPackage *p = &db->packages[i];
                int r = dpkg_db_load_files(db, p);
                if (r == -ENOENT)
                        continue; /* a package without files (a transitional one, say) */
                if (r < 0)
                        return r;
                for (char **f = p->files; *f; f++) {
                        r = strmap_put(db->owners, *f, strlen(*f), p);
                        if (r < 0 && r != -EEXIST) /* directories belong to many packages */
                                return r;
                }
        }
        return 0;
}

DebPackage *dpkg_db_owner(DpkgDb *db, const char *path) {
        _cleanup_free_ char *canonical = NULL;

        if (!db->owners && index_owners(db) < 0) {
                db->owners = strmap_free(db->owners);
                return NULL;
        }
        if (dpkg_canonical_path(db, path, &canonical) < 0)
                return NULL;
        return strmap_get(db->owners, canonical, strlen(canonical));
}

int dpkg_db_dependencies(DpkgDb *db, DebPackage *p, DebPackage ***ret, char **ret_missing) {
        _cleanup_free_ DebPackage **deps = NULL;
        size_t n = 0;

        deps = calloc(strlen(p->depends) / 2 + 2, sizeof(DebPackage *));
        if (!deps)
                return -ENOMEM;
        for (const char *s = p->depends; *s;) {
                size_t group_len = strcspn(s, ",");
                _cleanup_free_ char *group = strndup(s, group_len);
                DebPackage *found = NULL;
                _cleanup_strv_free_ char **alts = NULL;

                if (!group)
                        return -ENOMEM;
                s += group_len;
                s += strspn(s, ",");
                /* Alternatives: "a (>= 1) | b:any". */
                for (char *a = group; *a && !found;) {
                        size_t alt_len = strcspn(a, "|");
                        _cleanup_free_ char *alt = strndup(a, alt_len);
                        _cleanup_strv_free_ char **names = NULL;

                        if (!alt || split_names(alt, &names) < 0)
                                return -ENOMEM;
                        if (names && names[0])
                                found = dpkg_db_find(db, names[0]);
                        a += alt_len;
                        a += strspn(a, "|");
                }
                if (strspn(group, " ") == strlen(group))
                        continue;
                if (!found) {
                        *ret_missing = strdup(group + strspn(group, " "));
                        return -ENOPKG;
                }
                deps[n++] = found;
        }
        *ret = TAKE_PTR(deps);
        return 0;
}

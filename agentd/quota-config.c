/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <ini.h>
#include <pwd.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config-dir.h"
#include "config-values.h"
#include "macro.h"
#include "quota-config.h"
#include "strv.h"

int quota_key(Quotas *q, bool set[5], const char *key, const char *value, char **ret_error) {
        uint64_t v;
        double d;
        int i = -1;

        if (streq(key, "MaxSandboxes")) {
                if (parse_count(value, 0, 1000000, &v) < 0)
                        goto bad;
                q->max_sandboxes = v;
                i = 0;
        } else if (streq(key, "MaxCPUs")) {
                if (streq(value, "infinity"))
                        d = 0;
                else if (parse_cpus(value, &d) < 0)
                        goto bad;
                q->max_cpus = d;
                i = 1;
        } else if (streq(key, "MaxMemory")) {
                if (parse_size(value, &v) < 0)
                        goto bad;
                q->max_memory = v;
                i = 2;
        } else if (streq(key, "MaxSnapshots")) {
                if (parse_count(value, 0, 1000000, &v) < 0)
                        goto bad;
                q->max_snapshots = v;
                i = 3;
        } else if (streq(key, "MaxHibernated")) {
                if (parse_count(value, 0, 1000000, &v) < 0)
                        goto bad;
                q->max_hibernated = v;
                i = 4;
        } else {
                if (asprintf(ret_error, "unknown key %s= in [Quotas] (MaxSandboxes, MaxCPUs, MaxMemory, MaxSnapshots, "
                             "MaxHibernated)", key) < 0)
                        *ret_error = NULL;
                return 0;
        }
        if (set)
                set[i] = true;
        return 1;
bad:
        if (asprintf(ret_error, "%s=%s is not %s or infinity", key, value,
                     streq(key, "MaxCPUs")     ? "a number of CPUs from 0.01 to 4096"
                     : streq(key, "MaxMemory") ? "a size (like 512M, 8G)"
                                               : "a number from 0 to 1000000") < 0)
                *ret_error = NULL;
        return 0;
}

typedef struct Parser {
        UserQuotas *u;
        char *error;
} Parser;

static int on_entry(void *userdata, const char *section, const char *key, const char *value) {
        Parser *p = userdata;

        if (p->error)
                return 0;
        if (!streq(section, "Quotas")) {
                if (asprintf(&p->error, strempty(section) ? "%s= comes before [Quotas]" : "a user's file has [Quotas] only, "
                             "not [%s]", strempty(section) ? key : section) < 0)
                        p->error = NULL;
                return 0;
        }
        return quota_key(&p->u->quotas, p->u->set, key, value, &p->error);
}

/* Is st (a users/ file, or users/ itself) safe to take a user's quotas from? Only root (or
 * agentd's own user, for an agentd of one user) may write it: a file a user could write is
 * quotas they set themselves (and a symlink is judged by what it points to, as opened). */
static int check_owner(const char *path, const struct stat *st, bool dir, char **ret_error) {
        const char *why = NULL;

        if (dir ? !S_ISDIR(st->st_mode) : !S_ISREG(st->st_mode))
                why = dir ? "not a directory" : "not a regular file";
        else if (st->st_uid != 0 && st->st_uid != geteuid())
                why = "owned by another user than root";
        else if (st->st_mode & (S_IWGRP | S_IWOTH))
                why = "writable by its group or by anyone";
        if (!why)
                return 0;
        if (asprintf(ret_error, "%s: %s (uid %u, mode %04o): quotas come only from files root alone may write", path,
                     why, (unsigned) st->st_uid, (unsigned) (st->st_mode & 07777)) < 0)
                *ret_error = NULL;
        return -EPERM;
}

/* path: DIR/NAME.conf, NAME's quotas. */
static int load_one(const char *path, UserQuotas **ret, char **ret_error) {
        const char *file = strrchr(path, '/') + 1;
        _cleanup_fclose_ FILE *f = NULL;
        struct stat st;
        UserQuotas *u;
        Parser p;
        int line, r;

        f = fopen(path, "re");
        if (!f) {
                r = -errno;
                if (asprintf(ret_error, "%s: %s", path, strerror(-r)) < 0)
                        *ret_error = NULL;
                return r;
        }
        if (fstat(fileno(f), &st) < 0) {
                r = -errno;
                if (asprintf(ret_error, "%s: %s", path, strerror(-r)) < 0)
                        *ret_error = NULL;
                return r;
        }
        r = check_owner(path, &st, false, ret_error);
        if (r < 0)
                return r;
        u = calloc(1, sizeof(*u));
        if (!u || !(u->user = strndup(file, strlen(file) - 5))) {
                free(u);
                return -ENOMEM;
        }
        p = (Parser) { .u = u };
        line = ini_parse_file(f, on_entry, &p);
        if (line != 0) {
                if (asprintf(ret_error, "%s:%d: %s", path, line, p.error ?: "not a key=value line or [Section]") < 0)
                        *ret_error = NULL;
                free(p.error);
                free(u->user);
                free(u);
                return -EINVAL;
        }
        *ret = u;
        return 0;
}

int user_quotas_load_dir(const char *dir, UserQuotas ***ret, size_t *ret_n, char **ret_error) {
        _cleanup_strv_free_ char **paths = NULL;
        UserQuotas **l;
        size_t k = 0;
        int n, r;

        struct stat st;

        r = config_dir_list(dir, ".conf", QUOTA_MAX_USER_FILES, &paths, &n, ret_error);
        if (r < 0)
                return r;
        /* Whoever may add a file there sets anyone's quotas. */
        if (n > 0 && stat(dir, &st) >= 0) {
                r = check_owner(dir, &st, true, ret_error);
                if (r < 0)
                        return r;
        }
        l = calloc(MAX(n, 1), sizeof(UserQuotas *));
        if (!l)
                return -ENOMEM;
        for (int i = 0; r >= 0 && i < n; i++) {
                r = load_one(paths[i], &l[k], ret_error);
                if (r >= 0)
                        k++;
        }
        if (r < 0) {
                user_quotas_free(l, k);
                return r;
        }
        *ret = l;
        *ret_n = k;
        return 0;
}

void user_quotas_free(UserQuotas **l, size_t n) {
        for (size_t i = 0; i < n; i++) {
                free(l[i]->user);
                free(l[i]);
        }
        free(l);
}

/* uid's name (*ret NULL: no such user), whatever the size of its entry: a user who can make
 * their passwd entry long (a GECOS field they may edit, in LDAP say) must not make it unreadable
 * and so escape the file that names them. */
static int user_name_of(uid_t uid, char **ret) {
        struct passwd pw, *pwp = NULL;

        for (size_t size = 4096; size <= 1024 * 1024; size *= 2) {
                _cleanup_free_ char *buf = malloc(size);
                int r;

                if (!buf)
                        return -ENOMEM;
                r = getpwuid_r(uid, &pw, buf, size, &pwp);
                if (r == ERANGE)
                        continue;
                if (r != 0 && r != ENOENT && r != ESRCH && r != EBADF && r != EPERM)
                        return -r;
                if (r != 0 || !pwp) {
                        *ret = NULL;
                        return 0;
                }
                *ret = strdup(pwp->pw_name);
                return *ret ? 1 : -ENOMEM;
        }
        return -E2BIG;
}

int quotas_for(const Quotas *defaults, UserQuotas *const *users, size_t n_users, uid_t uid, Quotas *ret) {
        _cleanup_free_ char *name = NULL;
        Quotas q = *defaults;
        char number[16];
        bool named = false;
        int r;

        snprintf(number, sizeof(number), "%u", (unsigned) uid);
        for (size_t i = 0; i < n_users; i++)
                named = named || !streq(users[i]->user, number);
        if (named) {
                /* A name that cannot be read now may name a file: no quotas rather than the
                 * wrong ones. */
                r = user_name_of(uid, &name);
                if (r < 0)
                        return r;
        }
        for (size_t i = 0; i < n_users; i++) {
                const UserQuotas *u = users[i];

                if (streq(u->user, number) || (name && streq(u->user, name)))
                        q = quotas_apply(&q, u);
        }
        *ret = q;
        return 0;
}

Quotas quotas_apply(const Quotas *defaults, const UserQuotas *u) {
        Quotas q = *defaults;

        if (u->set[0])
                q.max_sandboxes = u->quotas.max_sandboxes;
        if (u->set[1])
                q.max_cpus = u->quotas.max_cpus;
        if (u->set[2])
                q.max_memory = u->quotas.max_memory;
        if (u->set[3])
                q.max_snapshots = u->quotas.max_snapshots;
        if (u->set[4])
                q.max_hibernated = u->quotas.max_hibernated;
        return q;
}

void quotas_format(const Quotas *q, FILE *out) {
        fputs("\n[Quotas]\n", out);
        config_put_count(out, "MaxSandboxes", q->max_sandboxes);
        if (q->max_cpus > 0)
                fprintf(out, "MaxCPUs=%g\n", q->max_cpus);
        else
                fputs("MaxCPUs=infinity\n", out);
        config_put_size(out, "MaxMemory", q->max_memory);
        config_put_count(out, "MaxSnapshots", q->max_snapshots);
        config_put_count(out, "MaxHibernated", q->max_hibernated);
}

/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <ini.h>
#include <pwd.h>
#include <stdlib.h>
#include <string.h>

#include "config-dir.h"
#include "config-values.h"
#include "macro.h"
#include "quota-config.h"
#include "strv.h"

int quota_key(Quotas *q, bool set[4], const char *key, const char *value, char **ret_error) {
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
        } else {
                if (asprintf(ret_error, "unknown key %s= in [Quotas] (MaxSandboxes, MaxCPUs, MaxMemory, MaxSnapshots)",
                             key) < 0)
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

/* path: DIR/NAME.conf, NAME's quotas. */
static int load_one(const char *path, UserQuotas **ret, char **ret_error) {
        const char *file = strrchr(path, '/') + 1;
        _cleanup_fclose_ FILE *f = NULL;
        UserQuotas *u;
        Parser p;
        int line;

        f = fopen(path, "re");
        if (!f) {
                if (asprintf(ret_error, "%s: %s", path, strerror(errno)) < 0)
                        *ret_error = NULL;
                return -errno;
        }
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

        r = config_dir_list(dir, ".conf", QUOTA_MAX_USER_FILES, &paths, &n, ret_error);
        if (r < 0)
                return r;
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

Quotas quotas_for(const Quotas *defaults, UserQuotas *const *users, size_t n_users, uid_t uid) {
        struct passwd pw, *pwp = NULL;
        Quotas q = *defaults;
        char buf[4096], number[16];

        if (n_users == 0)
                return q;
        snprintf(number, sizeof(number), "%u", (unsigned) uid);
        if (getpwuid_r(uid, &pw, buf, sizeof(buf), &pwp) != 0)
                pwp = NULL;
        for (size_t i = 0; i < n_users; i++) {
                const UserQuotas *u = users[i];

                if (streq(u->user, number) || (pwp && streq(u->user, pwp->pw_name)))
                        q = quotas_apply(&q, u);
        }
        return q;
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
}

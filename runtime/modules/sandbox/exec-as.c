/* SPDX-License-Identifier: MIT */
#include <grp.h>
#include <limits.h>
#include <pthread.h>
#include <pwd.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "exec-as.h"
#include "macro.h"

static bool all_digits(const char *s) {
        if (!*s)
                return false;
        for (; *s; s++)
                if (*s < '0' || *s > '9')
                        return false;
        return true;
}

int exec_account_lookup(const char *name, ExecAccount *ret) {
        struct passwd pw, *pwp = NULL;
        ExecAccount a = {};
        char buf[4096];
        int n;

        if (!name || !*name || strlen(name) >= sizeof(a.name))
                return -EINVAL;
        if (getpwnam_r(name, &pw, buf, sizeof(buf), &pwp) != 0)
                pwp = NULL;
        if (!pwp && all_digits(name)) {
                unsigned long v = strtoul(name, NULL, 10);

                if (v >= UINT_MAX)
                        return -EINVAL;
                if (getpwuid_r((uid_t) v, &pw, buf, sizeof(buf), &pwp) != 0 || !pwp) {
                        /* A uid the image does not name: run as it all the same (`docker run
                         * --user 1234` does), with its own group and no home. */
                        a.uid = (uid_t) v;
                        a.gid = (gid_t) v;
                        a.groups[0] = a.gid;
                        a.n_groups = 1;
                        snprintf(a.name, sizeof(a.name), "%s", name);
                        snprintf(a.home, sizeof(a.home), "/");
                        snprintf(a.shell, sizeof(a.shell), "/bin/sh");
                        *ret = a;
                        return 0;
                }
        }
        if (!pwp)
                return -ENOENT;
        a.uid = pwp->pw_uid;
        a.gid = pwp->pw_gid;
        snprintf(a.name, sizeof(a.name), "%s", pwp->pw_name);
        snprintf(a.home, sizeof(a.home), "%s", pwp->pw_dir && *pwp->pw_dir ? pwp->pw_dir : "/");
        snprintf(a.shell, sizeof(a.shell), "%s", pwp->pw_shell && *pwp->pw_shell ? pwp->pw_shell : "/bin/sh");
        n = EXEC_ACCOUNT_GROUPS_MAX;
        if (getgrouplist(a.name, a.gid, a.groups, &n) < 0)
                n = EXEC_ACCOUNT_GROUPS_MAX; /* more than we keep: the first ones, the primary among them */
        a.n_groups = (size_t) n;
        *ret = a;
        return 0;
}

bool exec_account_is_own(const ExecAccount *a) {
        /* Supplementary groups aside: asking for the account one runs as changes nothing. */
        return a->uid == geteuid() && a->uid == getuid() && a->gid == getegid() && a->gid == getgid();
}

static char helper_path[PATH_MAX];
static bool helper_found;

static void helper_find(void) {
        helper_found = companion_program(EXEC_AS_HELPER, "AGENTIX_EXEC_AS", helper_path, sizeof(helper_path)) >= 0;
}

const char *exec_as_helper(void) {
        static pthread_once_t once = PTHREAD_ONCE_INIT;

        (void) pthread_once(&once, helper_find);
        return helper_found ? helper_path : NULL;
}

char **exec_as_argv(const char *helper, const ExecAccount *a, const char *path, char *const *argv, char *buf) {
        size_t n = 0, k = 0;
        char **v, *p = buf;

        while (argv[n])
                n++;
        v = calloc(n + 6, sizeof(char *));
        if (!v)
                return NULL;
        v[k++] = (char *) helper;
        v[k++] = p;
        p += sprintf(p, "%u", (unsigned) a->uid) + 1;
        v[k++] = p;
        p += sprintf(p, "%u", (unsigned) a->gid) + 1;
        v[k++] = p;
        if (a->n_groups == 0)
                p += sprintf(p, "-") + 1;
        else {
                for (size_t i = 0; i < a->n_groups; i++)
                        p += sprintf(p, "%s%u", i ? "," : "", (unsigned) a->groups[i]);
                p++;
        }
        v[k++] = (char *) path;
        for (size_t i = 0; i < n; i++)
                v[k++] = argv[i];
        v[k] = NULL;
        return v;
}

/* SPDX-License-Identifier: MIT */
/* Per-thread credentials for the file operations made for an account (fs-as-user.h). */
#include <errno.h>
#include <grp.h>
#include <pthread.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "fs-as-user.h"
#include "macro.h"

/* Changing a thread's effective ids makes the kernel mark the whole process not dumpable (then
 * root without CAP_SYS_PTRACE, as in a container, can no longer read the worker's /proc files).
 * The worker's own setting is put back when the last thread that runs as an account is done;
 * the lock keeps a switch from starting between that count and the prctl(). */
static pthread_mutex_t switch_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned n_switched;
static int own_dumpable = -1;

/* The account's groups: those the account database gives its name, else gid alone. */
static int account_groups(uid_t uid, gid_t gid, gid_t groups[static FS_AS_USER_GROUPS_MAX]) {
        struct passwd pw, *pwp = NULL;
        char buf[4096];
        int n = FS_AS_USER_GROUPS_MAX;

        if (getpwuid_r(uid, &pw, buf, sizeof(buf), &pwp) != 0 || !pwp) {
                groups[0] = gid;
                return 1;
        }
        if (getgrouplist(pwp->pw_name, gid, groups, &n) < 0)
                n = FS_AS_USER_GROUPS_MAX; /* more than we keep: the first ones, gid among them */
        return n;
}

static int restore(const FsAsUser *s) {
        /* The uid first: only it gives back the right to set the others. */
        if (syscall(SYS_setresuid, (uid_t) -1, s->own_uid, (uid_t) -1) < 0)
                return -errno;
        if (syscall(SYS_setresgid, (gid_t) -1, s->own_gid, (gid_t) -1) < 0)
                return -errno;
        if (syscall(SYS_setgroups, (size_t) s->n_own_groups, s->own_groups) < 0)
                return -errno;
        return 0;
}

static void switch_done(void) {
        /* With switch_lock held. */
        if (--n_switched == 0 && own_dumpable >= 0 && prctl(PR_GET_DUMPABLE) != own_dumpable)
                (void) prctl(PR_SET_DUMPABLE, own_dumpable);
}

int fs_as_user_begin(uid_t uid, gid_t gid, FsAsUser *ret) {
        gid_t groups[FS_AS_USER_GROUPS_MAX];
        FsAsUser s = { .own_uid = geteuid(), .own_gid = getegid() };
        int n_groups, r = 0;

        if (uid == (uid_t) -1)
                uid = s.own_uid;
        if (gid == (gid_t) -1)
                gid = s.own_gid;
        if (uid == s.own_uid && gid == s.own_gid) {
                *ret = FS_AS_USER_NULL;
                return 0;
        }
        s.n_own_groups = getgroups(FS_AS_USER_GROUPS_MAX, s.own_groups);
        if (s.n_own_groups < 0)
                return -errno;
        n_groups = account_groups(uid, gid, groups);

        pthread_mutex_lock(&switch_lock);
        if (own_dumpable < 0)
                own_dumpable = prctl(PR_GET_DUMPABLE);
        n_switched++;
        /* Groups and gid while this thread still may set them, the uid last. */
        if (syscall(SYS_setgroups, (size_t) n_groups, groups) < 0 ||
            syscall(SYS_setresgid, (gid_t) -1, gid, (gid_t) -1) < 0 ||
            syscall(SYS_setresuid, (uid_t) -1, uid, (uid_t) -1) < 0) {
                r = -errno;
                if (restore(&s) < 0)
                        abort();
                switch_done();
        }
        pthread_mutex_unlock(&switch_lock);
        if (r < 0)
                return r;

        s.switched = true;
        *ret = s;
        return 0;
}

void fs_as_user_end(FsAsUser *s) {
        if (!s->switched)
                return;
        if (restore(s) < 0) {
                fprintf(stderr, "fs: cannot take back the worker's own credentials after a call made as uid %u: %m\n",
                        (unsigned) geteuid());
                abort();
        }
        s->switched = false;
        pthread_mutex_lock(&switch_lock);
        switch_done();
        pthread_mutex_unlock(&switch_lock);
}

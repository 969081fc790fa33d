/* SPDX-License-Identifier: MIT */
/* agentix-exec-as: become another account, then execute a program. The worker starts commands
 * with posix_spawn(), which cannot change credentials, and it is multi-threaded, where setuid()
 * in a forked child is not safe to do by hand; so a command for another account runs through
 * this small program, which posix_spawn() starts in the command's place (same pid, same
 * session, same fds) and which replaces itself with the command once it is that account.
 *
 *   agentix-exec-as UID GID GROUPS PROGRAM ARGV0 [ARG...]
 *
 * GROUPS is a comma-separated list of supplementary group ids, or "-" for none. PROGRAM is
 * looked up in $PATH when it has no slash. Exit status 126 when the account cannot be taken,
 * 127 when PROGRAM cannot be executed (as a shell does). */
#include <errno.h>
#include <grp.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define GROUPS_MAX 256

static int parse_id(const char *s, unsigned *ret) {
        unsigned long v;
        char *end;

        errno = 0;
        v = strtoul(s, &end, 10);
        /* (uid_t) -1 means "leave as it is" to setresuid(): never a valid account here. */
        if (errno != 0 || end == s || *end != 0 || s[0] == '-' || v >= UINT_MAX)
                return -EINVAL;
        *ret = (unsigned) v;
        return 0;
}

static int parse_groups(const char *s, gid_t *groups, size_t *ret_n) {
        size_t n = 0;

        if (strcmp(s, "-") == 0) {
                *ret_n = 0;
                return 0;
        }
        while (*s) {
                char item[16];
                size_t len = strcspn(s, ",");
                unsigned g;

                if (len == 0 || len >= sizeof(item) || n >= GROUPS_MAX)
                        return -EINVAL;
                memcpy(item, s, len);
                item[len] = 0;
                if (parse_id(item, &g) < 0)
                        return -EINVAL;
                groups[n++] = (gid_t) g;
                s += len;
                if (*s == ',')
                        s++;
        }
        *ret_n = n;
        return 0;
}

int main(int argc, char *argv[]) {
        gid_t groups[GROUPS_MAX];
        unsigned uid, gid;
        size_t n_groups;

        if (argc == 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
                printf("Usage: agentix-exec-as UID GID GROUPS PROGRAM ARGV0 [ARG...]\n"
                       "\n"
                       "Take the account UID (primary group GID, supplementary GROUPS: comma-separated\n"
                       "ids or - for none), then execute PROGRAM with the arguments ARGV0 ARG...\n"
                       "agentix-worker starts it for commands that run as another account.\n"
                       "\n"
                       "  -h --help   Show this help\n"
                       "\n"
                       "See agentix-exec-as(8).\n");
                return 0;
        }
        if (argc < 6 || parse_id(argv[1], &uid) < 0 || parse_id(argv[2], &gid) < 0 ||
            parse_groups(argv[3], groups, &n_groups) < 0) {
                fprintf(stderr, "Usage: agentix-exec-as UID GID GROUPS PROGRAM ARGV0 [ARG...] (see --help)\n");
                return 126;
        }
        /* Groups first: once the uid is not 0 they cannot be changed any more. */
        if (setgroups(n_groups, groups) < 0 || setresgid(gid, gid, gid) < 0 || setresuid(uid, uid, uid) < 0) {
                fprintf(stderr, "agentix-exec-as: cannot become uid %u gid %u: %s\n", uid, gid, strerror(errno));
                return 126;
        }
        /* Make sure it took: a kernel or filter that says yes and did not would leave root. */
        if (getuid() != uid || geteuid() != uid || getgid() != gid || getegid() != gid) {
                fprintf(stderr, "agentix-exec-as: the credentials did not change\n");
                return 126;
        }
        if (strchr(argv[4], '/'))
                execv(argv[4], argv + 5);
        else
                execvp(argv[4], argv + 5);
        fprintf(stderr, "agentix-exec-as: cannot execute %s: %s\n", argv[4], strerror(errno));
        return errno == ENOENT ? 127 : 126;
}

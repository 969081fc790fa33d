/* SPDX-License-Identifier: MIT */
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <linux/magic.h>

#include "log.h"
#include "macro.h"
#include "pids-limit.h"

struct PidsLimit {
        char path[PATH_MAX];
};

static int write_file(const char *dir, const char *name, const char *value) {
        char path[PATH_MAX + 64];
        _cleanup_close_ int fd = -EBADF;
        size_t n = strlen(value);

        snprintf(path, sizeof(path), "%s/%s", dir, name);
        fd = open(path, O_WRONLY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        if (write(fd, value, n) != (ssize_t) n)
                return -errno;
        return 0;
}

/* Our cgroup in the pids hierarchy: v1 ("N:pids:/path"), else v2 ("0::/path"). */
static int find_parent(char *buf, size_t size, bool *ret_v2) {
        _cleanup_fclose_ FILE *f = fopen("/proc/self/cgroup", "re");
        char line[PATH_MAX + 64], v2_path[PATH_MAX] = "";
        struct statfs sfs;

        if (!f)
                return -errno;
        while (fgets(line, sizeof(line), f)) {
                char *a = strchr(line, ':'), *b = a ? strchr(a + 1, ':') : NULL;
                if (!b)
                        continue;
                line[strcspn(line, "\n")] = 0;
                *b = 0;
                if (streq(a + 1, "pids")) {
                        snprintf(buf, size, "/sys/fs/cgroup/pids%s", streq(b + 1, "/") ? "" : b + 1);
                        *ret_v2 = false;
                        return 0;
                }
                if (a[1] == 0 && line[0] == '0')
                        snprintf(v2_path, sizeof(v2_path), "%s", b + 1);
        }
        if (!v2_path[0] || statfs("/sys/fs/cgroup", &sfs) < 0 || sfs.f_type != CGROUP2_SUPER_MAGIC)
                return -ENOENT;
        snprintf(buf, size, "/sys/fs/cgroup%s", streq(v2_path, "/") ? "" : v2_path);
        *ret_v2 = true;
        return 0;
}

int pids_limit_new(unsigned max, PidsLimit **ret) {
        _cleanup_free_ PidsLimit *p = calloc(1, sizeof(*p));
        char parent[PATH_MAX - 64], value[32];
        bool v2 = false;
        int r;

        if (!p)
                return -ENOMEM;
        r = find_parent(parent, sizeof(parent), &v2);
        if (r < 0)
                return log_error_errno(r, "--max-processes needs a pids cgroup controller, and this system shows none "
                                          "in /proc/self/cgroup. Run agentix-server in a container with a pids limit "
                                          "(docker run --pids-limit) instead.");
        if (v2) {
                /* Fails while processes sit in the parent itself (cgroup v2's no-internal-
                 * processes rule), or when the subtree is not delegated to us. */
                r = write_file(parent, "cgroup.subtree_control", "+pids");
                if (r < 0)
                        return log_error_errno(r, "--max-processes: cannot enable the pids controller below %s: %m. "
                                                  "Start agentix-server in a delegated cgroup of its own, or in a "
                                                  "container with a pids limit.", parent);
        }
        snprintf(p->path, sizeof(p->path), "%s/agentix-worker-%d", parent, (int) getpid());
        if (mkdir(p->path, 0755) < 0 && errno != EEXIST)
                return log_error_errno(errno, "--max-processes: cannot create the cgroup %s: %m. In a container, set "
                                              "its pids limit instead (docker run --pids-limit).", p->path);
        snprintf(value, sizeof(value), "%u", max);
        r = write_file(p->path, "pids.max", value);
        if (r < 0) {
                (void) rmdir(p->path);
                return log_error_errno(r, "--max-processes: cannot set %s/pids.max: %m", p->path);
        }
        *ret = TAKE_PTR(p);
        return 0;
}

int pids_limit_add(PidsLimit *p, pid_t pid) {
        char value[32];

        snprintf(value, sizeof(value), "%d", (int) pid);
        return write_file(p->path, "cgroup.procs", value);
}

int pids_limit_current(PidsLimit *p, unsigned *ret) {
        char path[PATH_MAX + 32];
        _cleanup_fclose_ FILE *f = NULL;
        unsigned v;

        snprintf(path, sizeof(path), "%s/pids.current", p->path);
        f = fopen(path, "re");
        if (!f)
                return -errno;
        if (fscanf(f, "%u", &v) != 1)
                return -EIO;
        *ret = v;
        return 0;
}

PidsLimit *pids_limit_free(PidsLimit *p) {
        if (!p)
                return NULL;
        /* Killed processes leave the cgroup once reaped; give them a moment. */
        for (int i = 0; i < 50 && rmdir(p->path) < 0 && errno == EBUSY; i++)
                usleep(10 * 1000);
        free(p);
        return NULL;
}

const char *pids_limit_path(const PidsLimit *p) {
        return p->path;
}

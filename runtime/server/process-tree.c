/* SPDX-License-Identifier: MIT */
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"
#include "process-tree.h"

typedef struct Proc {
        pid_t pid, ppid;
} Proc;

/* The parent of a process from /proc/PID/stat ("pid (comm) state ppid …"; comm may hold
 * spaces and parentheses, so parse after the last ')'). */
static int read_ppid(int proc_fd, const char *pid, pid_t *ret) {
        char path[64], buf[512];
        _cleanup_close_ int fd = -EBADF;
        ssize_t n;
        char *p;
        int ppid;

        snprintf(path, sizeof(path), "%s/stat", pid);
        fd = openat(proc_fd, path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        n = read(fd, buf, sizeof(buf) - 1);
        if (n <= 0)
                return n < 0 ? -errno : -EIO;
        buf[n] = 0;
        p = strrchr(buf, ')');
        if (!p || sscanf(p + 1, " %*c %d", &ppid) != 1)
                return -EIO;
        *ret = ppid;
        return 0;
}

int process_tree_list(pid_t root, pid_t **ret, size_t *ret_n) {
        _cleanup_free_ Proc *all = NULL;
        _cleanup_free_ pid_t *out = NULL;
        size_t n_all = 0, cap = 0, n_out = 0;
        _cleanup_close_ int proc_fd = -EBADF;
        DIR *d;
        struct dirent *de;
        bool grew;

        proc_fd = open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (proc_fd < 0)
                return -errno;
        d = fdopendir(dup(proc_fd));
        if (!d)
                return -errno;
        while ((de = readdir(d))) {
                pid_t ppid;
                char *end;
                long pid = strtol(de->d_name, &end, 10);

                if (*end || pid <= 0 || read_ppid(proc_fd, de->d_name, &ppid) < 0)
                        continue;
                if (n_all == cap) {
                        Proc *m = realloc(all, (cap = cap ? cap * 2 : 256) * sizeof(*all));
                        if (!m) {
                                closedir(d);
                                return -ENOMEM;
                        }
                        all = m;
                }
                all[n_all++] = (Proc) { (pid_t) pid, ppid };
        }
        closedir(d);

        out = malloc((n_all + 1) * sizeof(*out));
        if (!out)
                return -ENOMEM;
        /* The closure of "parent is root or already found", to a fixed point. */
        do {
                grew = false;
                for (size_t i = 0; i < n_all; i++) {
                        bool below = all[i].ppid == root, known = false;

                        if (all[i].pid == root)
                                continue;
                        for (size_t k = 0; k < n_out && !(below && known); k++) {
                                if (out[k] == all[i].ppid)
                                        below = true;
                                if (out[k] == all[i].pid)
                                        known = true;
                        }
                        if (below && !known) {
                                out[n_out++] = all[i].pid;
                                grew = true;
                        }
                }
        } while (grew);

        *ret = TAKE_PTR(out);
        *ret_n = n_out;
        return 0;
}

static bool contains(const pid_t *v, size_t n, pid_t pid) {
        for (size_t i = 0; i < n; i++)
                if (v[i] == pid)
                        return true;
        return false;
}

int process_tree_kill(pid_t root, pid_t spare, unsigned max_rounds) {
        _cleanup_free_ pid_t *stopped = NULL;
        size_t n_stopped = 0;
        int r;

        for (unsigned round = 0; round < max_rounds; round++) {
                _cleanup_free_ pid_t *now = NULL;
                size_t n_now = 0, fresh = 0;
                pid_t *m;

                r = process_tree_list(root, &now, &n_now);
                if (r < 0)
                        return r;
                m = realloc(stopped, (n_stopped + n_now + 1) * sizeof(*stopped));
                if (!m)
                        return -ENOMEM;
                stopped = m;
                for (size_t i = 0; i < n_now; i++) {
                        if (now[i] == spare || contains(stopped, n_stopped, now[i]))
                                continue;
                        (void) kill(now[i], SIGSTOP);
                        stopped[n_stopped++] = now[i];
                        fresh++;
                }
                if (fresh == 0)
                        break;
        }
        for (size_t i = 0; i < n_stopped; i++)
                (void) kill(stopped[i], SIGKILL);
        return (int) n_stopped;
}

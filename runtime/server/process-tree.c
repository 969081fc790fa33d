/* SPDX-License-Identifier: MIT */
#include <dirent.h>
#include <fcntl.h>
#include <stdint.h>
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
        _cleanup_free_ uint8_t *below = NULL; /* bitmap by pid: a descendant of root */
        size_t n_all = 0, cap = 0, n_out = 0;
        pid_t max_pid = root;
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
                max_pid = MAX(max_pid, (pid_t) pid);
        }
        closedir(d);

        out = malloc((n_all + 1) * sizeof(*out));
        below = calloc((size_t) max_pid / 8 + 1, 1);
        if (!out || !below)
                return -ENOMEM;
#define MARKED(pid) (below[(pid) / 8] & (1u << ((pid) % 8)))
        /* One pass per generation: a process is below root when its parent is root or below. */
        do {
                grew = false;
                for (size_t i = 0; i < n_all; i++) {
                        pid_t pid = all[i].pid, ppid = all[i].ppid;

                        if (pid == root || MARKED(pid))
                                continue;
                        if (ppid == root || (ppid > 0 && ppid <= max_pid && MARKED(ppid))) {
                                below[pid / 8] |= (uint8_t) (1u << (pid % 8));
                                out[n_out++] = pid;
                                grew = true;
                        }
                }
        } while (grew);
#undef MARKED

        *ret = TAKE_PTR(out);
        *ret_n = n_out;
        return 0;
}

/* A set of pids as a bitmap that grows to the largest pid put in. */
typedef struct PidSet {
        uint8_t *bits;
        size_t size;
} PidSet;

static int pid_set_put(PidSet *set, pid_t pid) {
        size_t byte = (size_t) pid / 8;

        if (byte >= set->size) {
                size_t size = MAX(byte + 1, set->size * 2);
                uint8_t *m = realloc(set->bits, size);
                if (!m)
                        return -ENOMEM;
                memset(m + set->size, 0, size - set->size);
                set->bits = m;
                set->size = size;
        }
        set->bits[byte] |= (uint8_t) (1u << (pid % 8));
        return 0;
}

static bool pid_set_has(const PidSet *set, pid_t pid) {
        size_t byte = (size_t) pid / 8;
        return byte < set->size && (set->bits[byte] & (1u << (pid % 8)));
}

int process_tree_kill(pid_t root, pid_t spare, unsigned max_rounds) {
        _cleanup_free_ pid_t *stopped = NULL;
        PidSet seen = {};
        size_t n_stopped = 0;
        int r = 0;

        for (unsigned round = 0; round < max_rounds; round++) {
                _cleanup_free_ pid_t *now = NULL;
                size_t n_now = 0, fresh = 0;
                pid_t *m;

                r = process_tree_list(root, &now, &n_now);
                if (r < 0)
                        break;
                m = realloc(stopped, (n_stopped + n_now + 1) * sizeof(*stopped));
                if (!m) {
                        r = -ENOMEM;
                        break;
                }
                stopped = m;
                for (size_t i = 0; i < n_now; i++) {
                        if (now[i] == spare || pid_set_has(&seen, now[i]))
                                continue;
                        r = pid_set_put(&seen, now[i]);
                        if (r < 0)
                                break;
                        (void) kill(now[i], SIGSTOP);
                        stopped[n_stopped++] = now[i];
                        fresh++;
                }
                if (r < 0 || fresh == 0)
                        break;
        }
        /* Whatever went wrong, what was stopped is killed, not left frozen. */
        for (size_t i = 0; i < n_stopped; i++)
                (void) kill(stopped[i], SIGKILL);
        free(seen.bits);
        return r < 0 ? r : (int) n_stopped;
}

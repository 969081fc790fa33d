/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/time.h>
#include <unistd.h>

#include "cgroup-stats.h"
#include "macro.h"

/* cgroup v1 says "no limit" with the largest page-aligned value of a signed 64-bit number. */
#define V1_UNLIMITED ((uint64_t) INT64_MAX - 4095)

typedef struct Where {
        char v2[PATH_MAX];      /* the v2 cgroup's directory, or "" */
        char cpuacct[PATH_MAX]; /* v1: each controller's directory, or "" */
        char memory[PATH_MAX];
        char pids[PATH_MAX];
        char blkio[PATH_MAX];
} Where;

static FILE *open_at(const char *dir, const char *name) {
        char path[PATH_MAX];

        if (!dir[0] || snprintf(path, sizeof(path), "%s/%s", dir, name) >= (int) sizeof(path))
                return NULL;
        return fopen(path, "re");
}

/* A file holding one number ("max" and v1's "no limit": unknown). */
static uint64_t read_number(const char *dir, const char *name) {
        FILE *f = open_at(dir, name);
        unsigned long long v;
        char buf[64];

        if (!f)
                return CGROUP_STATS_UNKNOWN;
        if (!fgets(buf, sizeof(buf), f) || sscanf(buf, "%llu", &v) != 1)
                v = CGROUP_STATS_UNKNOWN;
        fclose(f);
        return v >= V1_UNLIMITED ? CGROUP_STATS_UNKNOWN : (uint64_t) v;
}

/* KEY VALUE lines (cpu.stat): the value of key. */
static uint64_t read_keyed(const char *dir, const char *name, const char *key) {
        FILE *f = open_at(dir, name);
        unsigned long long v;
        uint64_t found = CGROUP_STATS_UNKNOWN;
        char k[64], line[256];

        if (!f)
                return CGROUP_STATS_UNKNOWN;
        while (fgets(line, sizeof(line), f))
                if (sscanf(line, "%63s %llu", k, &v) == 2 && streq(k, key)) {
                        found = v;
                        break;
                }
        fclose(f);
        return found;
}

/* v2's io.stat: "MAJ:MIN rbytes=N wbytes=N rios=N …" a device; the bytes summed. */
static void read_io_v2(const char *dir, CgroupStats *s) {
        FILE *f = open_at(dir, "io.stat");
        char line[512];

        if (!f)
                return;
        s->io_read_bytes = s->io_write_bytes = 0;
        while (fgets(line, sizeof(line), f)) {
                char *save = NULL;

                for (char *w = strtok_r(line, " \n", &save); w; w = strtok_r(NULL, " \n", &save)) {
                        const char *v;

                        if ((v = startswith(w, "rbytes=")))
                                s->io_read_bytes += strtoull(v, NULL, 10);
                        else if ((v = startswith(w, "wbytes=")))
                                s->io_write_bytes += strtoull(v, NULL, 10);
                }
        }
        fclose(f);
}

/* v1's blkio: "MAJ:MIN Read N" and "MAJ:MIN Write N" a device (and a "Total" line). Docker's
 * limits use the throttle policy, whose files count every device; the CFQ ones may be empty. */
static void read_io_v1(const char *dir, CgroupStats *s) {
        static const char *const names[] = { "blkio.throttle.io_service_bytes_recursive", "blkio.throttle.io_service_bytes",
                                             "blkio.io_service_bytes_recursive" };
        unsigned long long v;
        char dev[32], op[16], line[256];

        for (size_t i = 0; i < ELEMENTSOF(names); i++) {
                FILE *f = open_at(dir, names[i]);

                if (!f)
                        continue;
                s->io_read_bytes = s->io_write_bytes = 0;
                while (fgets(line, sizeof(line), f))
                        if (sscanf(line, "%31s %15s %llu", dev, op, &v) == 3) {
                                if (streq(op, "Read"))
                                        s->io_read_bytes += v;
                                else if (streq(op, "Write"))
                                        s->io_write_bytes += v;
                        }
                fclose(f);
                return;
        }
}

/* /proc/PID/cgroup: "0::/PATH" (v2) or "N:CONTROLLERS:/PATH" (v1) lines, into where. */
static int locate(const char *root, pid_t pid, const char *container_id, Where *w) {
        char path[PATH_MAX], line[PATH_MAX + 64];
        bool named = false;
        FILE *f;

        *w = (Where) {};
        snprintf(path, sizeof(path), "%s/proc/%d/cgroup", root, (int) pid);
        f = fopen(path, "re");
        if (!f)
                return errno == ENOENT ? -ESRCH : -errno;
        while (fgets(line, sizeof(line), f)) {
                char *controllers = strchr(line, ':'), *cg;
                char *dir = NULL;

                if (!controllers || !(cg = strchr(controllers + 1, ':')))
                        continue;
                *controllers++ = 0;
                *cg++ = 0;
                cg[strcspn(cg, "\n")] = 0;
                if (strstr(cg, container_id))
                        named = true;
                if (streq(line, "0") && !controllers[0]) {
                        snprintf(w->v2, sizeof(w->v2), "%s/sys/fs/cgroup%s", root, cg);
                        continue;
                }
                /* v1: "cpu,cpuacct" is mounted at /sys/fs/cgroup/cpu,cpuacct. */
                for (char *c = controllers, *next; c && *c; c = next) {
                        next = strchr(c, ',');
                        size_t n = next ? (size_t) (next - c) : strlen(c);

                        dir = n == 7 && strneq(c, "cpuacct", 7) ? w->cpuacct
                            : n == 6 && strneq(c, "memory", 6)  ? w->memory
                            : n == 4 && strneq(c, "pids", 4)    ? w->pids
                            : n == 5 && strneq(c, "blkio", 5)   ? w->blkio
                                                                : NULL;
                        if (dir)
                                snprintf(dir, PATH_MAX, "%s/sys/fs/cgroup/%s%s", root, controllers, cg);
                        next = next ? next + 1 : NULL;
                }
        }
        fclose(f);
        return named ? 0 : -ESRCH;
}

/* /proc/PID/net/dev (or /proc/self/net/dev): two header lines, then "IFACE: RX_BYTES 7×RX TX_BYTES …" an interface. */
static void read_net(const char *path, CgroupStats *s) {
        unsigned long long rx, tx, skip;
        char line[512];
        FILE *f;

        f = fopen(path, "re");
        if (!f)
                return;
        s->net_rx_bytes = s->net_tx_bytes = 0;
        while (fgets(line, sizeof(line), f)) {
                char *colon = strchr(line, ':'), *name = line;

                if (!colon)
                        continue;
                *colon = 0;
                name += strspn(name, " ");
                if (streq(name, "lo"))
                        continue;
                if (sscanf(colon + 1, "%llu %llu %llu %llu %llu %llu %llu %llu %llu", &rx, &skip, &skip, &skip, &skip, &skip,
                           &skip, &skip, &tx) == 9) {
                        s->net_rx_bytes += rx;
                        s->net_tx_bytes += tx;
                }
        }
        fclose(f);
}

static void read_where(const Where *w, const char *net_dev, CgroupStats *ret) {
        CgroupStats s = {
                .cpu_usec = CGROUP_STATS_UNKNOWN, .memory_current = CGROUP_STATS_UNKNOWN,
                .memory_peak = CGROUP_STATS_UNKNOWN, .memory_limit = CGROUP_STATS_UNKNOWN,
                .pids_current = CGROUP_STATS_UNKNOWN, .pids_limit = CGROUP_STATS_UNKNOWN,
                .net_rx_bytes = CGROUP_STATS_UNKNOWN, .net_tx_bytes = CGROUP_STATS_UNKNOWN,
                .io_read_bytes = CGROUP_STATS_UNKNOWN, .io_write_bytes = CGROUP_STATS_UNKNOWN,
        };
        struct timeval tv;

        if (w->v2[0] && !w->memory[0]) {
                s.cpu_usec = read_keyed(w->v2, "cpu.stat", "usage_usec");
                s.memory_current = read_number(w->v2, "memory.current");
                s.memory_peak = read_number(w->v2, "memory.peak");
                s.memory_limit = read_number(w->v2, "memory.max");
                s.pids_current = read_number(w->v2, "pids.current");
                s.pids_limit = read_number(w->v2, "pids.max");
                read_io_v2(w->v2, &s);
        } else {
                uint64_t ns = read_number(w->cpuacct, "cpuacct.usage");

                s.cpu_usec = ns == CGROUP_STATS_UNKNOWN ? ns : ns / 1000;
                s.memory_current = read_number(w->memory, "memory.usage_in_bytes");
                s.memory_peak = read_number(w->memory, "memory.max_usage_in_bytes");
                s.memory_limit = read_number(w->memory, "memory.limit_in_bytes");
                s.pids_current = read_number(w->pids, "pids.current");
                s.pids_limit = read_number(w->pids, "pids.max");
                read_io_v1(w->blkio, &s);
        }
        read_net(net_dev, &s);
        (void) gettimeofday(&tv, NULL);
        s.time = (uint64_t) tv.tv_sec * 1000000u + (uint64_t) tv.tv_usec;
        *ret = s;
}

int cgroup_stats_read(const char *root, pid_t pid, const char *container_id, CgroupStats *ret) {
        char net_dev[PATH_MAX];
        Where w;
        int r;

        if (pid <= 0 || !container_id || !container_id[0])
                return -EINVAL;
        r = locate(root, pid, container_id, &w);
        if (r < 0)
                return r;
        snprintf(net_dev, sizeof(net_dev), "%s/proc/%d/net/dev", root, (int) pid);
        read_where(&w, net_dev, ret);
        return 0;
}

int cgroup_stats_read_own(const char *root, CgroupStats *ret) {
        static const struct {
                const char *name;
                size_t offset;
        } v1[] = {
                { "cpuacct", offsetof(Where, cpuacct) }, { "cpu,cpuacct", offsetof(Where, cpuacct) },
                { "memory", offsetof(Where, memory) },   { "pids", offsetof(Where, pids) },
                { "blkio", offsetof(Where, blkio) },
        };
        char path[PATH_MAX + 32], net_dev[PATH_MAX];
        Where w = {};

        snprintf(path, sizeof(path), "%s/sys/fs/cgroup/cgroup.controllers", root);
        if (access(path, F_OK) == 0)
                snprintf(w.v2, sizeof(w.v2), "%s/sys/fs/cgroup", root);
        else
                for (size_t i = 0; i < ELEMENTSOF(v1); i++) {
                        char *dir = (char *) &w + v1[i].offset;

                        if (!dir[0] && snprintf(dir, PATH_MAX, "%s/sys/fs/cgroup/%s", root, v1[i].name) < PATH_MAX &&
                            access(dir, F_OK) < 0)
                                dir[0] = 0;
                }
        if (!w.v2[0] && !w.memory[0] && !w.cpuacct[0])
                return -ENOENT;
        snprintf(net_dev, sizeof(net_dev), "%s/proc/self/net/dev", root);
        read_where(&w, net_dev, ret);
        return 0;
}

int cgroup_v1_counting_disk(const char *root, dev_t dev, char **ret) {
        char link[PATH_MAX], disk[PATH_MAX], path[PATH_MAX + 16], name[NAME_MAX + 1] = "", line[256];
        unsigned maj, min;
        struct stat st;
        FILE *f;
        char *node;

        snprintf(link, sizeof(link), "%s/sys/dev/block/%u:%u", root, major(dev), minor(dev));
        if (!realpath(link, disk))
                return -ENODEV;
        snprintf(path, sizeof(path), "%s/partition", disk);
        if (access(path, F_OK) == 0)
                *strrchr(disk, '/') = '\0'; /* a partition's directory sits in its disk's */

        snprintf(path, sizeof(path), "%s/dev", disk);
        f = fopen(path, "re");
        if (!f)
                return -ENODEV;
        if (fscanf(f, "%u:%u", &maj, &min) != 2)
                maj = min = 0;
        fclose(f);
        snprintf(path, sizeof(path), "%s/uevent", disk);
        f = fopen(path, "re");
        if (!f)
                return -ENODEV;
        while (fgets(line, sizeof(line), f))
                if (sscanf(line, "DEVNAME=%255[^\n]", name) == 1)
                        break;
        fclose(f);
        if (!name[0] || strstr(name, ".."))
                return -ENODEV;

        /* The engine resolves the node itself: it must be the disk's, or every create fails. */
        snprintf(path, sizeof(path), "%s/dev/%s", root, name);
        if (stat(path, &st) < 0 || !S_ISBLK(st.st_mode) || st.st_rdev != makedev(maj, min))
                return -ENODEV;
        if (asprintf(&node, "/dev/%s", name) < 0)
                return -ENOMEM;
        *ret = node;
        return 0;
}

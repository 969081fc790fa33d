/* SPDX-License-Identifier: MIT */
/* cgroup_stats_read() and cgroup_stats_read_own() on trees of the kernel's files as cgroup v2
 * and v1 (with the unified hierarchy beside, as a hybrid host has it) lay them out, and on the
 * real ones of this test; cgroup_v1_counting_disk() on a tree laid out as sysfs. */
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>
#include <cmocka.h>

#include "cgroup-stats.h"
#include "macro.h"

#define ID "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

static char root[64];

static void put(const char *rel, const char *text) {
        char path[512], cmd[600];
        FILE *f;

        snprintf(path, sizeof(path), "%s/%s", root, rel);
        snprintf(cmd, sizeof(cmd), "mkdir -p \"$(dirname '%s')\"", path);
        assert_int_equal(system(cmd), 0);
        f = fopen(path, "we");
        assert_non_null(f);
        fputs(text, f);
        fclose(f);
}

static int setup(void **state) {
        strcpy(root, "/tmp/test-cgroup-stats-XXXXXX");
        assert_non_null(mkdtemp(root));
        put("proc/42/net/dev",
            "Inter-|   Receive                                                |  Transmit\n"
            " face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed\n"
            "    lo:  999999      10    0    0    0     0          0         0   999999      10    0    0    0     0       0          0\n"
            "  eth0: 1000000     700    0    0    0     0          0         0    20000     300    0    0    0     0       0          0\n"
            "  eth1:     500       5    0    0    0     0          0         0       60       1    0    0    0     0       0          0\n");
        return 0;
}

static int teardown(void **state) {
        char cmd[128];

        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
        assert_int_equal(system(cmd), 0);
        return 0;
}

static void test_v2(void **state) {
        CgroupStats s;

        put("proc/42/cgroup", "0::/system.slice/docker-" ID ".scope\n");
        put("sys/fs/cgroup/system.slice/docker-" ID ".scope/cpu.stat", "usage_usec 123456\nuser_usec 100000\nsystem_usec 23456\n");
        put("sys/fs/cgroup/system.slice/docker-" ID ".scope/memory.current", "209715200\n");
        put("sys/fs/cgroup/system.slice/docker-" ID ".scope/memory.peak", "314572800\n");
        put("sys/fs/cgroup/system.slice/docker-" ID ".scope/memory.max", "536870912\n");
        put("sys/fs/cgroup/system.slice/docker-" ID ".scope/pids.current", "7\n");
        put("sys/fs/cgroup/system.slice/docker-" ID ".scope/pids.max", "max\n");
        put("sys/fs/cgroup/system.slice/docker-" ID ".scope/io.stat",
            "8:0 rbytes=4096 wbytes=1048576 rios=1 wios=8 dbytes=0 dios=0\n"
            "8:16 rbytes=100 wbytes=0 rios=1 wios=0 dbytes=0 dios=0\n");
        assert_int_equal(cgroup_stats_read(root, 42, ID, &s), 0);
        assert_int_equal(s.cpu_usec, 123456);
        assert_int_equal(s.memory_current, 209715200);
        assert_int_equal(s.memory_peak, 314572800);
        assert_int_equal(s.memory_limit, 536870912);
        assert_int_equal(s.pids_current, 7);
        assert_true(s.pids_limit == CGROUP_STATS_UNKNOWN); /* max */
        assert_int_equal(s.io_read_bytes, 4196);
        assert_int_equal(s.io_write_bytes, 1048576);
        assert_int_equal(s.net_rx_bytes, 1000500); /* lo left out */
        assert_int_equal(s.net_tx_bytes, 20060);
        assert_true(s.time > 1700000000ULL * 1000000);
}

static void test_v1_hybrid(void **state) {
        CgroupStats s;

        put("proc/42/cgroup",
            "12:pids:/docker/" ID "\n"
            "9:memory:/docker/" ID "\n"
            "4:cpu,cpuacct:/docker/" ID "\n"
            "3:blkio:/docker/" ID "\n"
            "1:name=systemd:/docker/" ID "\n"
            "0::/docker/" ID "\n");
        put("sys/fs/cgroup/cpu,cpuacct/docker/" ID "/cpuacct.usage", "2500000000\n");
        put("sys/fs/cgroup/memory/docker/" ID "/memory.usage_in_bytes", "1000\n");
        put("sys/fs/cgroup/memory/docker/" ID "/memory.max_usage_in_bytes", "5000\n");
        put("sys/fs/cgroup/memory/docker/" ID "/memory.limit_in_bytes", "9223372036854771712\n");
        put("sys/fs/cgroup/pids/docker/" ID "/pids.current", "3\n");
        put("sys/fs/cgroup/pids/docker/" ID "/pids.max", "256\n");
        put("sys/fs/cgroup/blkio/docker/" ID "/blkio.throttle.io_service_bytes_recursive",
            "8:0 Read 8192\n8:0 Write 65536\n8:0 Sync 0\n8:0 Async 73728\n8:0 Total 73728\n"
            "8:16 Read 8\n8:16 Write 0\n8:16 Total 8\nTotal 73736\n");
        assert_int_equal(cgroup_stats_read(root, 42, ID, &s), 0);
        assert_int_equal(s.cpu_usec, 2500000);
        assert_int_equal(s.memory_current, 1000);
        assert_int_equal(s.memory_peak, 5000);
        assert_true(s.memory_limit == CGROUP_STATS_UNKNOWN); /* v1's "no limit" */
        assert_int_equal(s.pids_current, 3);
        assert_int_equal(s.pids_limit, 256);
        assert_int_equal(s.io_read_bytes, 8200);
        assert_int_equal(s.io_write_bytes, 65536);
        assert_int_equal(s.net_rx_bytes, 1000500);
}

static void test_not_the_container(void **state) {
        CgroupStats s;

        /* The pid is another process's now, or gone: no numbers of someone else. */
        put("proc/42/cgroup", "0::/user.slice/session-1.scope\n");
        assert_int_equal(cgroup_stats_read(root, 42, ID, &s), -ESRCH);
        assert_int_equal(cgroup_stats_read(root, 43, ID, &s), -ESRCH);
        assert_int_equal(cgroup_stats_read(root, 0, ID, &s), -EINVAL);
        assert_int_equal(cgroup_stats_read(root, 42, "", &s), -EINVAL);
}

/* From inside: whatever is mounted at /sys/fs/cgroup is the container's own cgroup. */
static void test_own(void **state) {
        char v1[128], v2[128], empty[128];
        CgroupStats s;

        put("own-v2/sys/fs/cgroup/cgroup.controllers", "cpu memory pids io\n");
        put("own-v2/sys/fs/cgroup/cpu.stat", "usage_usec 5000\n");
        put("own-v2/sys/fs/cgroup/memory.current", "1048576\n");
        put("own-v2/sys/fs/cgroup/memory.max", "max\n");
        put("own-v2/sys/fs/cgroup/pids.current", "3\n");
        put("own-v2/proc/self/net/dev", "h\nh\n  eth0: 77 1 0 0 0 0 0 0 88 1 0 0 0 0 0 0\n");
        snprintf(v2, sizeof(v2), "%s/own-v2", root);
        assert_int_equal(cgroup_stats_read_own(v2, &s), 0);
        assert_int_equal(s.cpu_usec, 5000);
        assert_int_equal(s.memory_current, 1048576);
        assert_true(s.memory_limit == CGROUP_STATS_UNKNOWN);
        assert_int_equal(s.pids_current, 3);
        assert_int_equal(s.net_rx_bytes, 77);
        assert_int_equal(s.net_tx_bytes, 88);

        /* v1, cpuacct mounted with cpu as the engine does. */
        put("own-v1/sys/fs/cgroup/cpu,cpuacct/cpuacct.usage", "2000000\n");
        put("own-v1/sys/fs/cgroup/memory/memory.usage_in_bytes", "4096\n");
        put("own-v1/sys/fs/cgroup/memory/memory.max_usage_in_bytes", "8192\n");
        put("own-v1/sys/fs/cgroup/memory/memory.limit_in_bytes", "536870912\n");
        put("own-v1/sys/fs/cgroup/pids/pids.max", "100\n");
        put("own-v1/sys/fs/cgroup/blkio/blkio.throttle.io_service_bytes", "254:0 Read 10\n254:0 Write 20\nTotal 30\n");
        snprintf(v1, sizeof(v1), "%s/own-v1", root);
        assert_int_equal(cgroup_stats_read_own(v1, &s), 0);
        assert_int_equal(s.cpu_usec, 2000);
        assert_int_equal(s.memory_current, 4096);
        assert_int_equal(s.memory_peak, 8192);
        assert_int_equal(s.memory_limit, 536870912);
        assert_int_equal(s.pids_limit, 100);
        assert_true(s.pids_current == CGROUP_STATS_UNKNOWN);
        assert_int_equal(s.io_read_bytes, 10);
        assert_int_equal(s.io_write_bytes, 20);
        assert_true(s.net_rx_bytes == CGROUP_STATS_UNKNOWN); /* no /proc/self/net/dev there */

        put("own-none/sys/fs/.keep", "");
        snprintf(empty, sizeof(empty), "%s/own-none", root);
        assert_int_equal(cgroup_stats_read_own(empty, &s), -ENOENT);
        /* This process's real one reads too (a host's root cgroup, or a container's). */
        assert_int_equal(cgroup_stats_read_own("", &s), 0);
        assert_true(s.net_rx_bytes != CGROUP_STATS_UNKNOWN);
}

/* The disk under a filesystem, in a tree laid out as sysfs does: a partition's directory in
 * its disk's, /sys/dev/block/MAJ:MIN links to either. Nodes made with mknod (the test runs as
 * root; where it cannot, the node checks alone run). */
static void test_counting_disk(void **state) {
        char path[512], *disk = NULL;

        put("sys/devices/virtual/block/sdz/dev", "8:400\n");
        put("sys/devices/virtual/block/sdz/uevent", "MAJOR=8\nMINOR=400\nDEVNAME=sdz\nDEVTYPE=disk\n");
        put("sys/devices/virtual/block/sdz/sdz1/dev", "8:401\n");
        put("sys/devices/virtual/block/sdz/sdz1/partition", "1\n");
        put("sys/devices/virtual/block/sdz/sdz1/uevent", "MAJOR=8\nMINOR=401\nDEVNAME=sdz1\nDEVTYPE=partition\n");
        put("sys/devices/virtual/block/ovl/dev", "0:77\n");
        put("sys/devices/virtual/block/ovl/uevent", "MAJOR=0\nMINOR=77\n"); /* no DEVNAME */
        put("dev/.keep", "");
        put("sys/dev/block/.keep", "");
        snprintf(path, sizeof(path), "%s/sys/dev/block/8:400", root);
        assert_int_equal(symlink("../../devices/virtual/block/sdz", path), 0);
        snprintf(path, sizeof(path), "%s/sys/dev/block/8:401", root);
        assert_int_equal(symlink("../../devices/virtual/block/sdz/sdz1", path), 0);
        snprintf(path, sizeof(path), "%s/sys/dev/block/0:77", root);
        assert_int_equal(symlink("../../devices/virtual/block/ovl", path), 0);

        /* No node at /dev/sdz yet: a rule naming it would fail every create. */
        assert_int_equal(cgroup_v1_counting_disk(root, makedev(8, 401), &disk), -ENODEV);
        assert_int_equal(cgroup_v1_counting_disk(root, makedev(0, 77), &disk), -ENODEV);
        assert_int_equal(cgroup_v1_counting_disk(root, makedev(9, 9), &disk), -ENODEV); /* no such device */
        snprintf(path, sizeof(path), "%s/dev/sdz", root);
        if (mknod(path, S_IFBLK | 0600, makedev(8, 401)) < 0) {
                print_message("(cannot mknod here: %m; the node checks alone ran)\n");
                return;
        }
        /* A node of the wrong device is no good either. */
        assert_int_equal(cgroup_v1_counting_disk(root, makedev(8, 401), &disk), -ENODEV);
        assert_int_equal(unlink(path), 0);
        assert_int_equal(mknod(path, S_IFBLK | 0600, makedev(8, 400)), 0);
        assert_int_equal(cgroup_v1_counting_disk(root, makedev(8, 401), &disk), 0);
        assert_string_equal(disk, "/dev/sdz"); /* the partition's disk, named as the engine sees it */
        free(disk);
        disk = NULL;
        assert_int_equal(cgroup_v1_counting_disk(root, makedev(8, 400), &disk), 0);
        assert_string_equal(disk, "/dev/sdz");
        free(disk);
}

/* This process's own cgroup, on the host's real files: whatever the version, the numbers are
 * there and plausible (the test has used CPU and memory, and holds a pid). */
static void test_real(void **state) {
        char path[64], line[512], id[512] = "";
        CgroupStats s;
        FILE *f;

        snprintf(path, sizeof(path), "/proc/%d/cgroup", (int) getpid());
        f = fopen(path, "re");
        assert_non_null(f);
        while (fgets(line, sizeof(line), f)) {
                char *cg = strrchr(line, ':');

                if (cg && strstr(line, "memory") && cg[1] == '/' && cg[2] != '\n') {
                        snprintf(id, sizeof(id), "%s", cg + 1);
                        break;
                }
                if (cg && strneq(line, "0::", 3) && cg[1] == '/' && cg[2] != '\n')
                        snprintf(id, sizeof(id), "%s", cg + 1);
        }
        fclose(f);
        id[strcspn(id, "\n")] = 0;
        if (!id[0])
                skip(); /* in the root cgroup: nothing of its own to read */
        assert_int_equal(cgroup_stats_read("", getpid(), id, &s), 0);
        assert_true(s.memory_current != CGROUP_STATS_UNKNOWN && s.memory_current > 0);
        assert_true(s.cpu_usec != CGROUP_STATS_UNKNOWN);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_v2),
                cmocka_unit_test(test_v1_hybrid),
                cmocka_unit_test(test_not_the_container),
                cmocka_unit_test(test_own),
                cmocka_unit_test(test_counting_disk),
                cmocka_unit_test(test_real),
        };

        return cmocka_run_group_tests(tests, setup, teardown);
}

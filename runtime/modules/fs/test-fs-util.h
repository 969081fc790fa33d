/* SPDX-License-Identifier: MIT */
#pragma once

/* Helpers for the fs unit tests (cmocka): a scratch directory per test, files in it, and
 * running a piece of a test as an unprivileged user (permissions do not apply to root). */

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <fcntl.h>
#include <ftw.h>
#include <grp.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "fs-ops.h"
#include "macro.h"

static char test_dir[64];

static _unused_ int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
        (void) chmod(path, 0700); /* a test may leave a directory at 000 */
        return remove(path) < 0 ? 0 : 0;
}

static _unused_ int test_dir_setup(void **state) {
        strcpy(test_dir, "/tmp/test-fs-XXXXXX");
        assert_non_null(mkdtemp(test_dir));
        /* Readable for the unprivileged user some tests switch to. */
        assert_int_equal(chmod(test_dir, 0755), 0);
        return 0;
}

static _unused_ int test_dir_teardown(void **state) {
        /* chmod on the way down so 000 directories can be entered. */
        char cmd[128];
        snprintf(cmd, sizeof(cmd), "chmod -R u+rwx %s 2>/dev/null; true", test_dir);
        (void) !system(cmd);
        (void) nftw(test_dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
        return 0;
}

/* An absolute path below the scratch directory (static buffer rotation: 8 at a time). */
static _unused_ const char *P(const char *rel) {
        static char bufs[8][PATH_MAX];
        static unsigned n;
        char *b = bufs[n++ % 8];

        if (!rel || !*rel)
                snprintf(b, PATH_MAX, "%s", test_dir);
        else
                snprintf(b, PATH_MAX, "%s/%s", test_dir, rel);
        return b;
}

static _unused_ void mkdir_p(const char *rel) {
        char cmd[PATH_MAX + 32];
        snprintf(cmd, sizeof(cmd), "mkdir -p '%s'", P(rel));
        assert_int_equal(system(cmd), 0);
}

static _unused_ void put(const char *rel, const void *data, size_t n) {
        const char *path = P(rel);
        char dir[PATH_MAX];
        char *slash;
        int fd;

        snprintf(dir, sizeof(dir), "%s", path);
        slash = strrchr(dir, '/');
        *slash = 0;
        if (access(dir, F_OK) < 0) {
                char cmd[PATH_MAX + 32];
                snprintf(cmd, sizeof(cmd), "mkdir -p '%s'", dir);
                assert_int_equal(system(cmd), 0);
        }
        fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        assert_true(fd >= 0);
        assert_int_equal(loop_write(fd, data, n), 0);
        assert_int_equal(close(fd), 0);
}

static _unused_ void puts_file(const char *rel, const char *text) {
        put(rel, text, strlen(text));
}

/* The whole file; *ret_n its size. NULL if it cannot be read. */
static _unused_ char *slurp(const char *path, size_t *ret_n) {
        struct stat st;
        char *buf;
        int fd;

        fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return NULL;
        assert_int_equal(fstat(fd, &st), 0);
        buf = malloc((size_t) st.st_size + 1);
        assert_non_null(buf);
        assert_int_equal(loop_read_exact(fd, buf, (size_t) st.st_size), st.st_size == 0 ? 0 : 0);
        buf[st.st_size] = 0;
        close(fd);
        if (ret_n)
                *ret_n = (size_t) st.st_size;
        return buf;
}

/* Number of entries in a directory whose names start with prefix. */
static _unused_ unsigned count_prefixed(const char *dir, const char *prefix) {
        char cmd[PATH_MAX + 64];
        unsigned n = 0;
        FILE *f;

        snprintf(cmd, sizeof(cmd), "ls -A '%s'", dir);
        f = popen(cmd, "r");
        assert_non_null(f);
        char line[PATH_MAX];
        while (fgets(line, sizeof(line), f))
                if (strneq(line, prefix, strlen(prefix)))
                        n++;
        pclose(f);
        return n;
}

/* In code run by as_nobody(): cmocka's assertions must not be used in a forked child
 * (a failure would longjmp into the parent's runner, copied), so check and exit. */
#define child_check(x)                                                                  \
        do {                                                                            \
                if (!(x)) {                                                             \
                        fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #x); \
                        _exit(1);                                                       \
                }                                                                       \
        } while (0)

/* Run fn(arg) in a child as the user "nobody" (fn uses child_check()); fails the test when
 * the child does. Without root, fn runs as the current user in a child all the same. */
static _unused_ void as_nobody(void (*fn)(void *), void *arg) {
        pid_t pid;
        int status;

        pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                const struct passwd *pw = getpwnam("nobody");
                uid_t uid = pw ? pw->pw_uid : 65534;
                gid_t gid = pw ? pw->pw_gid : 65534;
                if (getuid() == 0 &&
                    (setgroups(0, NULL) < 0 || setresgid(gid, gid, gid) < 0 || setresuid(uid, uid, uid) < 0))
                        _exit(99);
                fn(arg);
                _exit(0);
        }
        assert_int_equal(waitpid(pid, &status, 0), pid);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
                fail_msg("unprivileged part failed: status 0x%x", status);
}

static _unused_ long max_rss_kib(void) {
        struct rusage ru;
        assert_int_equal(getrusage(RUSAGE_SELF, &ru), 0);
        return ru.ru_maxrss;
}

#define assert_status(s, code)                                                                          \
        do {                                                                                            \
                if ((s)->error != (code))                                                               \
                        fail_msg("expected %s, got %s: %s", strna(fs_error_to_string(code)),            \
                                 strna(fs_error_to_string((s)->error)), strna((s)->message));           \
        } while (0)

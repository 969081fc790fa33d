/* SPDX-License-Identifier: MIT */
/* fs_as_user_begin()/_end(): file operations for an account run with its credentials, on the
 * calling thread alone, so links the account planted lead nowhere it could not go itself. */
#include <pthread.h>
#include <sys/prctl.h>

#include "fs-as-user.h"
#include "fs-path.h"
#include "test-fs-util.h"

#define NOBODY 65534

static void write_file(const char *rel, const char *content, mode_t mode) {
        int fd = open(P(rel), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);

        assert_true(fd >= 0);
        assert_int_equal(write(fd, content, strlen(content)), (ssize_t) strlen(content));
        assert_int_equal(close(fd), 0);
}

/* root's directory (0700) with a file only root may read, and the account's home with links
 * into them that the account planted. */
static void plant(void) {
        assert_int_equal(mkdir(P("secret"), 0700), 0);
        write_file("secret/key", "root's secret", 0600);
        write_file("secret/victim", "victim", 0644);
        assert_int_equal(mkdir(P("home"), 0755), 0);
        write_file("home/mine", "mine", 0644);
        assert_int_equal(chown(P("home"), NOBODY, NOBODY), 0);
        assert_int_equal(chown(P("home/mine"), NOBODY, NOBODY), 0);
        assert_int_equal(symlink(P("secret"), P("home/out")), 0);
        assert_int_equal(symlink(P("secret/key"), P("home/key")), 0);
}

static void assert_denied(FsStatus *s, int r) {
        assert_int_equal(r, 0);
        assert_int_equal(s->error, FS_ERROR_PERMISSION_DENIED);
        fs_status_done(s);
}

static void test_planted_links(void **state) {
        _cleanup_(fs_ls_result_done) FsLsResult ls = {};
        _cleanup_(fs_stat_result_done) FsStatResult st = {};
        FsAsUser as = FS_AS_USER_NULL;
        FsStatus s = {};
        struct stat sb;
        uint64_t size;
        int fd = -EBADF, dumpable;

        if (geteuid() != 0)
                skip(); /* taking another account's credentials takes root */
        plant();
        dumpable = prctl(PR_GET_DUMPABLE);

        assert_int_equal(fs_as_user_begin(NOBODY, NOBODY, &as), 0);
        assert_true(as.switched);
        assert_int_equal(geteuid(), NOBODY);
        assert_int_equal(getegid(), NOBODY);

        assert_denied(&s, fs_write(P("home/out/new.conf"), "x", 1, true, &s));
        assert_denied(&s, fs_write(P("home/key"), "x", 1, true, &s));
        assert_denied(&s, fs_download_open(P("home/key"), &fd, &size, NULL, &s));
        assert_denied(&s, fs_mkdir(P("home/out/dir"), &s));
        assert_denied(&s, fs_remove(P("home/out/victim"), &s));
        assert_denied(&s, fs_move(P("home/out/victim"), P("home/stolen"), &s));
        assert_denied(&s, fs_move(P("home/mine"), P("home/out/planted"), &s));
        assert_int_equal(fs_stat(P("home/out/victim"), &st), 0);
        assert_int_equal(st.status.error, FS_ERROR_PERMISSION_DENIED);
        assert_int_equal(fs_ls(P("home/out"), 0, &ls), 0);
        assert_int_equal(ls.status.error, FS_ERROR_PERMISSION_DENIED);
        assert_int_equal(fd, -EBADF);

        /* What the account may do, it does, and what it makes is its own. */
        assert_int_equal(fs_write(P("home/own"), "ok", 2, true, &s), 0);
        assert_int_equal(s.error, FS_OK);

        fs_as_user_end(&as);
        assert_false(as.switched);
        assert_int_equal(geteuid(), 0);
        assert_int_equal(getegid(), 0);
        assert_int_equal(prctl(PR_GET_DUMPABLE), dumpable);

        assert_int_equal(stat(P("home/own"), &sb), 0);
        assert_int_equal(sb.st_uid, NOBODY);
        /* root's directory as it was */
        assert_int_equal(access(P("secret/new.conf"), F_OK), -1);
        assert_int_equal(access(P("secret/dir"), F_OK), -1);
        assert_int_equal(access(P("secret/planted"), F_OK), -1);
        assert_int_equal(access(P("secret/victim"), F_OK), 0);
        assert_int_equal(stat(P("secret/key"), &sb), 0);
        assert_int_equal(sb.st_size, (off_t) strlen("root's secret"));
        assert_int_equal(access(P("home/stolen"), F_OK), -1);
}

/* Another thread of the process keeps its own credentials meanwhile. */
static pthread_barrier_t switched, checked;

static void *other_thread(void *arg) {
        FsAsUser as = FS_AS_USER_NULL;
        uintptr_t ok;

        ok = fs_as_user_begin(NOBODY, NOBODY, &as) == 0 && geteuid() == NOBODY;
        (void) pthread_barrier_wait(&switched);
        (void) pthread_barrier_wait(&checked);
        fs_as_user_end(&as);
        return (void *) ok;
}

static void test_this_thread_alone(void **state) {
        pthread_t t;
        void *ok;
        int fd;

        if (geteuid() != 0)
                skip();
        assert_int_equal(mkdir(P("secret"), 0700), 0);
        assert_int_equal(pthread_barrier_init(&switched, NULL, 2), 0);
        assert_int_equal(pthread_barrier_init(&checked, NULL, 2), 0);
        assert_int_equal(pthread_create(&t, NULL, other_thread, NULL), 0);
        (void) pthread_barrier_wait(&switched);
        assert_int_equal(geteuid(), 0);
        assert_int_equal(getegid(), 0);
        fd = open(P("secret/root"), O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
        assert_true(fd >= 0);
        close(fd);
        (void) pthread_barrier_wait(&checked);
        assert_int_equal(pthread_join(t, &ok), 0);
        assert_true(ok != NULL);
        pthread_barrier_destroy(&switched);
        pthread_barrier_destroy(&checked);
}

/* The worker's own account: nothing to change. */
static void test_own(void **state) {
        FsAsUser as = FS_AS_USER_NULL;

        assert_int_equal(fs_as_user_begin(geteuid(), getegid(), &as), 0);
        assert_false(as.switched);
        assert_int_equal(fs_as_user_begin((uid_t) -1, (gid_t) -1, &as), 0);
        assert_false(as.switched);
        fs_as_user_end(&as);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_planted_links, test_dir_setup, test_dir_teardown),
                cmocka_unit_test_setup_teardown(test_this_thread_alone, test_dir_setup, test_dir_teardown),
                cmocka_unit_test(test_own),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}

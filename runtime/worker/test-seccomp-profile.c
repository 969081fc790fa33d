/* SPDX-License-Identifier: MIT */
/* Seccomp profile parsing and, for the filters that parse, their real effect: each filter is
 * loaded in a forked child that tries syscalls and reports the errnos. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/utsname.h>
#include <sys/wait.h>

#include "macro.h"
#include "seccomp-profile.h"

/* Syscalls the probe child tries; each result is 0 or an errno. */
enum { PROBE_UNAME, PROBE_FCHDIR_12345, PROBE_FCHDIR_12346, PROBE_MOUNT, PROBE_CLONE3, PROBE_GETPID,
       PROBE_UNSHARE, PROBE_BPF, PROBE_FORK, PROBE_NO_SUCH_SYSCALL, PROBE_MKNOD_FIFO, PROBE_MKNOD_CHR,
       _PROBE_MAX };

static int errno_of(long r) {
        return r < 0 ? errno : 0;
}

/* Load ctx in a child, run every probe there, return the errnos. */
static void probe(scmp_filter_ctx ctx, int results[_PROBE_MAX]) {
        int p[2], status;
        pid_t pid;

        assert_int_equal(pipe2(p, O_CLOEXEC), 0);
        pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                int r[_PROBE_MAX];
                struct utsname u;
                struct clone_args { uint64_t flags; } ca = { 0 };
                long k;

                if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 || seccomp_load(ctx) < 0)
                        _exit(99);
                r[PROBE_UNAME] = errno_of(uname(&u));
                r[PROBE_FCHDIR_12345] = errno_of(fchdir(12345));
                r[PROBE_FCHDIR_12346] = errno_of(fchdir(12346));
                r[PROBE_MOUNT] = errno_of(syscall(SYS_mount, "none", "/nonexistent/agentix", "tmpfs", 0, NULL));
                /* clone3 with a size too small to be valid: EINVAL if it reaches the kernel. */
                r[PROBE_CLONE3] = errno_of(syscall(SYS_clone3, &ca, 1));
                r[PROBE_GETPID] = errno_of(syscall(SYS_getpid));
                /* The child is single-threaded: without a filter, root may unshare a user ns. */
                r[PROBE_UNSHARE] = errno_of(syscall(SYS_unshare, 0x10000000 /* CLONE_NEWUSER */));
                r[PROBE_BPF] = errno_of(syscall(SYS_bpf, 0xffff, NULL, 0));
                k = fork();
                if (k == 0)
                        _exit(0);
                if (k > 0)
                        (void) waitpid((pid_t) k, NULL, 0);
                r[PROBE_FORK] = errno_of(k);
                /* A number no kernel has yet: ENOSYS from the kernel, the profile's answer otherwise. */
                r[PROBE_NO_SUCH_SYSCALL] = errno_of(syscall(1000));
                /* In a directory that does not exist: ENOENT if the call reached the kernel. */
                r[PROBE_MKNOD_FIFO] = errno_of(mknodat(AT_FDCWD, "/nonexistent/agentix/fifo", S_IFIFO | 0600, 0));
                r[PROBE_MKNOD_CHR] = errno_of(mknodat(AT_FDCWD, "/nonexistent/agentix/null", S_IFCHR | 0600,
                                                      makedev(1, 3)));
                (void) !write(p[1], r, sizeof(r));
                _exit(0);
        }
        close(p[1]);
        assert_int_equal(read(p[0], results, sizeof(int) * _PROBE_MAX), (ssize_t) (sizeof(int) * _PROBE_MAX));
        close(p[0]);
        assert_int_equal(waitpid(pid, &status, 0), pid);
        assert_true(WIFEXITED(status));
        assert_int_equal(WEXITSTATUS(status), 0);
}

static scmp_filter_ctx compile_ok(const char *json) {
        _cleanup_free_ char *error = NULL;
        scmp_filter_ctx ctx = NULL;
        int r;

        r = seccomp_profile_compile(json, strlen(json), &ctx, &error);
        if (r < 0)
                fail_msg("profile rejected: %s", strna(error));
        assert_non_null(ctx);
        return ctx;
}

static void expect_error(const char *json, const char *part) {
        _cleanup_free_ char *error = NULL;
        scmp_filter_ctx ctx = NULL;

        assert_int_equal(seccomp_profile_compile(json, strlen(json), &ctx, &error), -EINVAL);
        assert_null(ctx);
        assert_non_null(error);
        if (!strstr(error, part))
                fail_msg("error \"%s\" lacks \"%s\"", error, part);
}

static void test_good_profile(void **state) {
        scmp_filter_ctx ctx = compile_ok(
                "{\"defaultAction\": \"SCMP_ACT_ALLOW\","
                " \"architectures\": [\"SCMP_ARCH_X86_64\", \"SCMP_ARCH_X86\", \"SCMP_ARCH_NOT_YET_INVENTED\"],"
                " \"syscalls\": ["
                "  {\"names\": [\"uname\"], \"action\": \"SCMP_ACT_ERRNO\", \"errnoRet\": 42},"
                "  {\"name\": \"fchdir\", \"action\": \"SCMP_ACT_ERRNO\", \"errnoRet\": 43,"
                "   \"args\": [{\"index\": 0, \"value\": 12345, \"valueTwo\": 0, \"op\": \"SCMP_CMP_EQ\"}]},"
                "  {\"names\": [\"mount\"], \"action\": \"SCMP_ACT_ERRNO\"},"
                "  {\"names\": [\"getpid\"], \"action\": \"SCMP_ACT_ALLOW\"}"
                " ]}");
        int r[_PROBE_MAX];

        probe(ctx, r);
        seccomp_release(ctx);
        assert_int_equal(r[PROBE_UNAME], 42);
        assert_int_equal(r[PROBE_FCHDIR_12345], 43);  /* the argument matched */
        assert_int_equal(r[PROBE_FCHDIR_12346], EBADF); /* it did not: the kernel answered */
        assert_int_equal(r[PROBE_MOUNT], EPERM);       /* errnoRet defaults to EPERM */
        assert_int_equal(r[PROBE_GETPID], 0);
}

static void test_unknown_syscall_skipped(void **state) {
        scmp_filter_ctx ctx = compile_ok(
                "{\"defaultAction\": \"SCMP_ACT_ALLOW\", \"syscalls\": ["
                "  {\"names\": [\"no_such_syscall_agentix\", \"uname\", \"another_fake\"],"
                "   \"action\": \"SCMP_ACT_ERRNO\", \"errnoRet\": 7}]}");
        int r[_PROBE_MAX];

        probe(ctx, r);
        seccomp_release(ctx);
        assert_int_equal(r[PROBE_UNAME], 7);
        assert_int_equal(r[PROBE_GETPID], 0);
}

static void test_includes_excludes(void **state) {
        /* The worker holds no capabilities (includes.caps entries are skipped) and runs on the
         * native architecture (excludes.arches with it are skipped, includes.arches apply). */
        scmp_filter_ctx ctx = compile_ok(
                "{\"defaultAction\": \"SCMP_ACT_ALLOW\", \"syscalls\": ["
                "  {\"names\": [\"uname\"], \"action\": \"SCMP_ACT_ERRNO\", \"errnoRet\": 11,"
                "   \"includes\": {\"caps\": [\"CAP_SYS_ADMIN\"]}},"
                "  {\"names\": [\"mount\"], \"action\": \"SCMP_ACT_ERRNO\", \"errnoRet\": 12,"
                "   \"excludes\": {\"arches\": [\"amd64\", \"arm64\"]}},"
                "  {\"names\": [\"getpid\"], \"action\": \"SCMP_ACT_ERRNO\", \"errnoRet\": 13,"
                "   \"includes\": {\"arches\": [\"amd64\", \"arm64\"]}},"
                "  {\"names\": [\"bpf\"], \"action\": \"SCMP_ACT_ERRNO\", \"errnoRet\": 14,"
                "   \"excludes\": {\"caps\": [\"CAP_SYS_ADMIN\"]}}"
                " ]}");
        int r[_PROBE_MAX];

        probe(ctx, r);
        seccomp_release(ctx);
        assert_int_not_equal(r[PROBE_UNAME], 11);
        assert_int_not_equal(r[PROBE_MOUNT], 12);
#if defined(__x86_64__) || defined(__aarch64__)
        assert_int_equal(r[PROBE_GETPID], 13);
#endif
        assert_int_equal(r[PROBE_BPF], 14);
}

static void test_default_profile(void **state) {
        scmp_filter_ctx ctx = compile_ok(seccomp_default_profile_json);
        int r[_PROBE_MAX];

        probe(ctx, r);
        seccomp_release(ctx);
        assert_int_equal(r[PROBE_MOUNT], EPERM);
        assert_int_equal(r[PROBE_CLONE3], ENOSYS);
        assert_int_equal(r[PROBE_UNSHARE], EPERM);
        assert_int_equal(r[PROBE_BPF], EPERM);
        assert_int_equal(r[PROBE_GETPID], 0);
        assert_int_equal(r[PROBE_UNAME], 0);
        assert_int_equal(r[PROBE_FORK], 0); /* clone without CLONE_NEW* passes the masked rules */
        assert_int_equal(r[PROBE_FCHDIR_12345], EBADF);
        /* An allow-list: what it does not name (here a syscall no kernel has yet) is EPERM, not a kill. */
        assert_int_equal(r[PROBE_NO_SUCH_SYSCALL], EPERM);
        assert_int_equal(r[PROBE_MKNOD_FIFO], ENOENT);
        assert_int_equal(r[PROBE_MKNOD_CHR], EPERM);
}

static void test_no_filter_baseline(void **state) {
        /* The probes themselves must be able to tell a denial from the kernel's own answer. */
        scmp_filter_ctx ctx = compile_ok("{\"defaultAction\": \"SCMP_ACT_ALLOW\"}");
        int r[_PROBE_MAX];

        probe(ctx, r);
        seccomp_release(ctx);
        assert_int_equal(r[PROBE_CLONE3], EINVAL);
        assert_int_not_equal(r[PROBE_BPF], 0);
        assert_int_equal(r[PROBE_NO_SUCH_SYSCALL], ENOSYS);
        assert_int_equal(r[PROBE_MKNOD_FIFO], ENOENT);
        assert_int_equal(r[PROBE_MKNOD_CHR], ENOENT);
        if (geteuid() == 0)
                assert_int_equal(r[PROBE_MOUNT], ENOENT);
}

/* A deny-by-default profile in the shape of Docker's own (archMap with a null
 * subArchitectures, an allow list with names of other architectures, minKernel, a MASKED_EQ
 * without valueTwo, caps-gated entries): what is listed works, the rest gets defaultErrnoRet. */
static void test_docker_style_profile(void **state) {
        scmp_filter_ctx ctx = compile_ok(
                "{\"defaultAction\": \"SCMP_ACT_ERRNO\", \"defaultErrnoRet\": 1,"
                " \"archMap\": ["
                "  {\"architecture\": \"SCMP_ARCH_X86_64\", \"subArchitectures\": [\"SCMP_ARCH_X86\", \"SCMP_ARCH_X32\"]},"
                "  {\"architecture\": \"SCMP_ARCH_AARCH64\", \"subArchitectures\": [\"SCMP_ARCH_ARM\"]},"
                "  {\"architecture\": \"SCMP_ARCH_RISCV64\", \"subArchitectures\": null}],"
                " \"syscalls\": ["
                "  {\"names\": [\"brk\", \"chown32\", \"close\", \"exit\", \"exit_group\", \"fstat\", \"futex\","
                "    \"getpid\", \"madvise\", \"mmap\", \"mmap2\", \"mprotect\", \"munmap\", \"newfstatat\","
                "    \"rt_sigaction\", \"rt_sigprocmask\", \"rt_sigreturn\", \"sigaltstack\", \"write\", \"gettid\","
                "    \"tgkill\", \"sched_yield\", \"_llseek\", \"socketcall\"], \"action\": \"SCMP_ACT_ALLOW\"},"
                "  {\"names\": [\"ptrace\"], \"action\": \"SCMP_ACT_ALLOW\", \"includes\": {\"minKernel\": \"4.8\"}},"
                "  {\"names\": [\"clone\"], \"action\": \"SCMP_ACT_ALLOW\","
                "   \"args\": [{\"index\": 0, \"value\": 2114060288, \"op\": \"SCMP_CMP_MASKED_EQ\"}],"
                "   \"excludes\": {\"caps\": [\"CAP_SYS_ADMIN\"], \"arches\": [\"s390\", \"s390x\"]}},"
                "  {\"names\": [\"mount\", \"uname\"], \"action\": \"SCMP_ACT_ALLOW\", \"includes\": {\"caps\": [\"CAP_SYS_ADMIN\"]}},"
                "  {\"names\": [\"modify_ldt\"], \"action\": \"SCMP_ACT_ALLOW\", \"includes\": {\"arches\": [\"amd64\", \"x32\", \"x86\"]}},"
                "  {\"names\": [\"clone3\"], \"action\": \"SCMP_ACT_ERRNO\", \"errnoRet\": 38,"
                "   \"excludes\": {\"caps\": [\"CAP_SYS_ADMIN\"]}}"
                " ]}");
        int p[2], status, r[3];
        pid_t pid;

        assert_int_equal(pipe2(p, O_CLOEXEC), 0);
        pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                struct utsname u;
                struct { uint64_t flags; } ca = { 0 };

                if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 || seccomp_load(ctx) < 0)
                        _exit(99);
                r[0] = errno_of(syscall(SYS_getpid));
                r[1] = errno_of(uname(&u));                  /* not listed for us (caps-gated) */
                r[2] = errno_of(syscall(SYS_clone3, &ca, 1)); /* its own errnoRet */
                (void) !write(p[1], r, sizeof(r));
                _exit(0);
        }
        close(p[1]);
        assert_int_equal(read(p[0], r, sizeof(r)), (ssize_t) sizeof(r));
        close(p[0]);
        assert_int_equal(waitpid(pid, &status, 0), pid);
        assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        seccomp_release(ctx);
        assert_int_equal(r[0], 0);
        assert_int_equal(r[1], 1);
        assert_int_equal(r[2], ENOSYS);
}

static void test_bad_action(void **state) {
        expect_error("{\"defaultAction\": \"SCMP_ACT_ALLOW\", \"syscalls\": ["
                     " {\"names\": [\"uname\"], \"action\": \"SCMP_ACT_BOGUS\"}]}",
                     "syscalls[0]: unknown action \"SCMP_ACT_BOGUS\"");
        expect_error("{\"defaultAction\": \"ALLOW\"}", "defaultAction: unknown action \"ALLOW\"");
        expect_error("{\"defaultAction\": \"SCMP_ACT_NOTIFY\"}", "SCMP_ACT_NOTIFY is not supported");
        expect_error("{\"syscalls\": []}", "\"action\" must be a string");
}

static void test_bad_op(void **state) {
        expect_error("{\"defaultAction\": \"SCMP_ACT_ALLOW\", \"syscalls\": ["
                     " {\"names\": [\"uname\"], \"action\": \"SCMP_ACT_ERRNO\"},"
                     " {\"names\": [\"fchdir\"], \"action\": \"SCMP_ACT_ERRNO\","
                     "  \"args\": [{\"index\": 0, \"value\": 1, \"op\": \"SCMP_CMP_MASKED_NE\"}]}]}",
                     "syscalls[1].args[0]: unknown comparison \"SCMP_CMP_MASKED_NE\"");
        expect_error("{\"defaultAction\": \"SCMP_ACT_ALLOW\", \"syscalls\": ["
                     " {\"names\": [\"fchdir\"], \"action\": \"SCMP_ACT_ERRNO\","
                     "  \"args\": [{\"index\": 6, \"value\": 1, \"op\": \"SCMP_CMP_EQ\"}]}]}",
                     "\"index\" must be an integer 0…5");
}

static void test_malformed(void **state) {
        expect_error("{\"defaultAction\": ", "not valid JSON");
        expect_error("[]", "must be a JSON object");
        expect_error("{\"defaultAction\": \"SCMP_ACT_ALLOW\", \"syscalls\": {}}", "\"syscalls\" must be an array");
        expect_error("{\"defaultAction\": \"SCMP_ACT_ALLOW\", \"syscalls\": [{\"action\": \"SCMP_ACT_ERRNO\"}]}",
                     "no syscall \"names\"");
        expect_error("{\"defaultAction\": \"SCMP_ACT_ALLOW\", \"syscalls\": ["
                     " {\"names\": [\"uname\"], \"action\": \"SCMP_ACT_ERRNO\", \"errnoRet\": -1}]}",
                     "errnoRet must be an integer");
}

static void test_file(void **state) {
        _cleanup_free_ char *error = NULL;
        char path[] = "/tmp/test-seccomp-profile-XXXXXX";
        scmp_filter_ctx ctx = NULL;
        int fd;

        assert_int_equal(seccomp_profile_compile_file("/nonexistent/profile.json", &ctx, &error), -ENOENT);
        assert_non_null(strstr(error, "/nonexistent/profile.json"));
        free(error);
        error = NULL;

        fd = mkstemp(path);
        assert_true(fd >= 0);
        assert_int_equal(loop_write(fd, "{\"defaultAction\": \"SCMP_ACT_KILL_PROCESS\"}", 42), 0);
        close(fd);
        assert_int_equal(seccomp_profile_compile_file(path, &ctx, &error), 0);
        seccomp_release(ctx);

        fd = open(path, O_WRONLY | O_TRUNC | O_CLOEXEC);
        assert_int_equal(loop_write(fd, "{\"defaultAction\": 5}", 20), 0);
        close(fd);
        assert_int_equal(seccomp_profile_compile_file(path, &ctx, &error), -EINVAL);
        assert_non_null(strstr(error, path));
        assert_non_null(strstr(error, "\"action\" must be a string"));
        unlink(path);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_good_profile),
                cmocka_unit_test(test_unknown_syscall_skipped),
                cmocka_unit_test(test_includes_excludes),
                cmocka_unit_test(test_default_profile),
                cmocka_unit_test(test_no_filter_baseline),
                cmocka_unit_test(test_docker_style_profile),
                cmocka_unit_test(test_bad_action),
                cmocka_unit_test(test_bad_op),
                cmocka_unit_test(test_malformed),
                cmocka_unit_test(test_file),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}

/* SPDX-License-Identifier: MIT */
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>

#include "log.h"
#include "seccomp-profile.h"
#include "worker-confine.h"

#define NOFILE_MAX 65536u

static bool seccomp_active = false;

bool worker_seccomp_active(void) {
        return seccomp_active;
}

static int move_frame_fd(int frame_fd) {
        int fd;

        fd = fcntl(frame_fd, F_DUPFD_CLOEXEC, WORKER_FRAME_FD_MIN);
        if (fd < 0)
                return log_error_errno(errno, "Failed to move the frame socket to fd >= %d: %m", WORKER_FRAME_FD_MIN);
        safe_close(frame_fd);

        /* The worker reads and writes with blocking calls (blocking writes are the backpressure). */
        int flags = fcntl(fd, F_GETFL);
        if (flags < 0 || ((flags & O_NONBLOCK) && fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) < 0)) {
                int r = log_error_errno(errno, "Failed to make the frame socket blocking: %m");
                safe_close(fd);
                return r;
        }
        return fd;
}

/* 0 and 1 become /dev/null, inheritable; 2 too if it is not open. */
static int redirect_stdio(void) {
        int null_fd, r = 0;

        null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
        if (null_fd < 0)
                return log_error_errno(errno, "Failed to open /dev/null: %m");

        for (int fd = 0; fd <= 2 && r >= 0; fd++) {
                if (fd == 2 && fcntl(2, F_GETFD) >= 0)
                        break; /* keep the server's stderr */
                if (fd == null_fd) {
                        /* open() returned this very number: just make it inheritable. */
                        if (fcntl(fd, F_SETFD, 0) < 0)
                                r = log_error_errno(errno, "Failed to clear FD_CLOEXEC on fd %d: %m", fd);
                } else if (dup2(null_fd, fd) < 0) /* dup2() clears FD_CLOEXEC on the copy */
                        r = log_error_errno(errno, "Failed to point fd %d at /dev/null: %m", fd);
        }
        if (null_fd > 2)
                safe_close(null_fd);
        return r;
}

/* Without close_range() (before Linux 5.9, or gVisor, which answers EINVAL): close what
 * /proc/self/fd lists, or, without /proc, every number below RLIMIT_NOFILE. */
static void closedirp(DIR **d) {
        if (*d)
                closedir(*d);
}

static int close_other_fds_slowly(int frame_fd) {
        _cleanup_(closedirp) DIR *d = opendir("/proc/self/fd");
        struct rlimit rl;
        struct dirent *de;

        if (!d) {
                if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
                        return negative_errno();
                for (rlim_t fd = 3; fd < MIN(rl.rlim_cur, (rlim_t) NOFILE_MAX * 16); fd++)
                        if ((int) fd != frame_fd)
                                (void) close((int) fd);
                return 0;
        }
        while ((de = readdir(d))) {
                char *end;
                long fd = strtol(de->d_name, &end, 10);

                if (*end || end == de->d_name || fd < 3 || fd == frame_fd || fd == dirfd(d))
                        continue;
                (void) close((int) fd);
        }
        return 0;
}

static int close_other_fds(int frame_fd) {
        int r;

        if (close_range(3, (unsigned) frame_fd - 1, 0) >= 0 && close_range((unsigned) frame_fd + 1, ~0U, 0) >= 0)
                return 0;
        if (errno != ENOSYS && errno != EINVAL && errno != EPERM)
                return log_error_errno(errno, "Failed to close inherited file descriptors: %m");
        r = close_other_fds_slowly(frame_fd);
        if (r < 0)
                return log_error_errno(r, "Failed to close inherited file descriptors: %m");
        return 0;
}

static int rlimit_from_env(const char *name, int resource) {
        const char *e = getenv(name);
        unsigned long long v;
        char *end;

        if (strempty(e))
                return 0;
        errno = 0;
        v = strtoull(e, &end, 10);
        if (errno != 0 || *end || e[0] == '-')
                return log_error_errno(EINVAL, "Invalid $%s=\"%s\": expected a number.", name, e);
        if (setrlimit(resource, &(struct rlimit) { .rlim_cur = v, .rlim_max = v }) < 0)
                return log_error_errno(errno, "Failed to apply $%s=%llu: %m", name, v);
        return 0;
}

static int set_rlimits(void) {
        struct rlimit rl;
        int r;

        if (setrlimit(RLIMIT_CORE, &(struct rlimit) {}) < 0)
                return log_error_errno(errno, "Failed to disable core dumps: %m");

        if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
                return log_error_errno(errno, "Failed to read RLIMIT_NOFILE: %m");
        rl.rlim_cur = rl.rlim_max == RLIM_INFINITY ? NOFILE_MAX : MIN(rl.rlim_max, (rlim_t) NOFILE_MAX);
        if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
                log_warning_errno(errno, "Failed to raise RLIMIT_NOFILE, continuing: %m");

        r = rlimit_from_env("AGENTIX_WORKER_RLIMIT_AS", RLIMIT_AS);
        if (r < 0)
                return r;
        return rlimit_from_env("AGENTIX_WORKER_RLIMIT_NPROC", RLIMIT_NPROC);
}

int worker_confine(int frame_fd, const WorkerOptions *opts) {
        _cleanup_free_ char *error = NULL;
        _cleanup_close_ int fd = -EBADF;
        int r;

        fd = move_frame_fd(frame_fd);
        if (fd < 0)
                return fd;
        r = redirect_stdio();
        if (r < 0)
                return r;
        r = close_other_fds(fd);
        if (r < 0)
                return r;
        r = set_rlimits();
        if (r < 0)
                return r;

        /* The worker must never outlive the server. (If the server died before this line, the
         * frame socket is at EOF already and the worker exits on its first read.) */
        if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0)
                return log_error_errno(errno, "Failed to set PR_SET_PDEATHSIG: %m");
        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
                return log_error_errno(errno, "Failed to set no_new_privs: %m");

        if (opts->no_seccomp)
                log_warning("Running without a seccomp filter (--no-seccomp).");
        else {
                r = seccomp_profile_install(opts->seccomp_profile, &error);
                if (r < 0)
                        return log_error_errno(r, "Failed to install the %s seccomp profile: %s",
                                               opts->seccomp_profile ? "given" : "built-in", strna(error));
                seccomp_active = true;
        }

        return TAKE_FD(fd);
}

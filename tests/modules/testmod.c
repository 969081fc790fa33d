/* SPDX-License-Identifier: MIT */
/* testmod: a C module for the worker's end-to-end tests. It exercises every part of the module
 * API (unary results, streams, the bidi inbox, cancellation through the wait fd, raise) and
 * probes the worker's confinement (seccomp, inherited fds). */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <inttypes.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agentix-module.h"

/* echo(value: any) -> any */
static int echo(agentix_call *call, const msgpack_object *argv, size_t argc) {
        return msgpack_pack_object(agentix_call_result(call), argv[0]) < 0 ? -ENOMEM : 0;
}

/* count(n: int) -> stream of 0 … n-1 */
static int count(agentix_call *call, const msgpack_object *argv, size_t argc) {
        int64_t n = argv[0].via.i64;

        if (argv[0].type == MSGPACK_OBJECT_NEGATIVE_INTEGER)
                return agentix_call_raise(call, "ValueError", "n must be >= 0, got %" PRIi64, n);
        for (int64_t i = 0; i < n; i++) {
                int r;

                msgpack_pack_int64(agentix_call_item_begin(call), i);
                r = agentix_call_item_end(call);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* bulk(n: int, size: int, poll: bool = False) -> stream of n bin items of `size` bytes each
 * (byte j of item i is (i + j) & 0xff). The output window paces it: blocking in item_end, or
 * with poll=True, by polling the output fd (and the wait fd for cancellation) itself. */
static int bulk(agentix_call *call, const msgpack_object *argv, size_t argc) {
        int64_t n = argv[0].via.i64, size = argv[1].via.i64;
        bool use_poll = argv[2].via.boolean;
        uint8_t *data;
        int r = 0;

        if (argv[0].type == MSGPACK_OBJECT_NEGATIVE_INTEGER || argv[1].type == MSGPACK_OBJECT_NEGATIVE_INTEGER ||
            size > 64 * 1024 * 1024)
                return agentix_call_raise(call, "ValueError", "n and size must be >= 0, size at most 64 MiB");
        data = malloc(size + 256);
        if (!data)
                return -ENOMEM;
        for (int64_t j = 0; j < size + 256; j++)
                data[j] = (uint8_t) j;
        if (use_poll)
                agentix_call_set_output_blocking(call, false);

        for (int64_t i = 0; i < n && r >= 0; i++) {
                msgpack_packer *pk;

                while (use_poll && !agentix_call_output_ready(call) && !agentix_call_cancelled(call)) {
                        struct pollfd p[2] = { { .fd = agentix_call_output_fd(call), .events = POLLIN },
                                               { .fd = agentix_call_wait_fd(call), .events = POLLIN } };
                        if (poll(p, 2, -1) < 0 && errno != EINTR) {
                                r = -errno;
                                break;
                        }
                }
                if (r < 0)
                        break;
                pk = agentix_call_item_begin(call);
                msgpack_pack_bin(pk, (size_t) size);
                msgpack_pack_bin_body(pk, data + (i & 0xff), (size_t) size);
                r = agentix_call_item_end(call);
        }
        free(data);
        return r;
}

/* upper() bidi: every str item comes back upper-cased; other items raise TypeError. Waits on
 * the wait fd (not in inbox_next) to exercise it. */
static int upper(agentix_call *call, const msgpack_object *argv, size_t argc) {
        int wfd = agentix_call_wait_fd(call);

        if (wfd < 0)
                return wfd;
        for (;;) {
                msgpack_object item;
                msgpack_packer *pk;
                int r;

                r = agentix_call_inbox_next(call, &item, 0);
                if (r == -ETIMEDOUT) {
                        struct pollfd p = { .fd = wfd, .events = POLLIN };
                        if (poll(&p, 1, -1) < 0 && errno != EINTR)
                                return -errno;
                        continue;
                }
                if (r <= 0)
                        return r; /* 0: inbox closed, the stream ends */
                if (item.type != MSGPACK_OBJECT_STR)
                        return agentix_call_raise(call, "TypeError", "upper() items must be str");

                pk = agentix_call_item_begin(call);
                msgpack_pack_str(pk, item.via.str.size);
                char *s = malloc(item.via.str.size + 1);
                if (!s)
                        return -ENOMEM;
                for (uint32_t i = 0; i < item.via.str.size; i++)
                        s[i] = (char) toupper((unsigned char) item.via.str.ptr[i]);
                msgpack_pack_str_body(pk, s, item.via.str.size);
                free(s);
                r = agentix_call_item_end(call);
                if (r < 0)
                        return r;
        }
}

/* sleep(ms: int) -> int: sleeps on the wait fd, so cancellation and the deadline wake it. */
static int sleep_ms(agentix_call *call, const msgpack_object *argv, size_t argc) {
        int64_t ms = argv[0].via.i64;
        int wfd = agentix_call_wait_fd(call);
        struct timespec start, now;

        if (wfd < 0)
                return wfd;
        clock_gettime(CLOCK_MONOTONIC, &start);
        for (;;) {
                int64_t elapsed;

                if (agentix_call_cancelled(call))
                        return -ECANCELED;
                clock_gettime(CLOCK_MONOTONIC, &now);
                elapsed = (now.tv_sec - start.tv_sec) * 1000 + (now.tv_nsec - start.tv_nsec) / 1000000;
                if (elapsed >= ms)
                        break;
                struct pollfd p = { .fd = wfd, .events = POLLIN };
                (void) poll(&p, 1, (int) (ms - elapsed));
        }
        return msgpack_pack_int64(agentix_call_result(call), ms) < 0 ? -ENOMEM : 0;
}

/* crash(signal: int = 9): the worker dies by this signal. */
static int crash(agentix_call *call, const msgpack_object *argv, size_t argc) {
        int sig = (int) argv[0].via.i64;

        signal(sig, SIG_DFL);
        kill(getpid(), sig);
        pause();
        return 0;
}

/* fail(errno: int) -> raises OSError through a negative errno return. */
static int fail(agentix_call *call, const msgpack_object *argv, size_t argc) {
        return -(int) argv[0].via.i64;
}

/* raise_error(type: str, message: str) */
static int raise_error(agentix_call *call, const msgpack_object *argv, size_t argc) {
        char *type = agentix_arg_strdup(&argv[0]);
        int r;

        if (!type)
                return -errno;
        r = agentix_call_raise(call, type, "%.*s", (int) argv[1].via.str.size, argv[1].via.str.ptr);
        free(type);
        return r;
}

/* bin_from_file(path: str, size: int, lenient: bool = False) -> bytes, through
 * agentix_pack_bin_from_fd(); lenient keeps the zero-filled result of a short file. */
static int bin_from_file(agentix_call *call, const msgpack_object *argv, size_t argc) {
        char *path = agentix_arg_strdup(&argv[0]);
        int fd, r;

        if (!path)
                return -errno;
        fd = open(path, O_RDONLY | O_CLOEXEC);
        free(path);
        if (fd < 0)
                return -errno;
        r = agentix_pack_bin_from_fd(agentix_call_result(call), fd, (size_t) argv[1].via.u64);
        close(fd);
        if (r == -EIO && argv[2].via.boolean)
                return 0;
        return r;
}

/* on_reader_thread() -> bool: whether the call runs on the worker's main (reader) thread.
 * Listed twice, once inline and once not, to check where each one runs. */
static int on_reader_thread(agentix_call *call, const msgpack_object *argv, size_t argc) {
        msgpack_packer *pk = agentix_call_result(call);

        return (gettid() == getpid() ? msgpack_pack_true(pk) : msgpack_pack_false(pk)) < 0 ? -ENOMEM : 0;
}

/* arrive(hold_ms: int) -> int: this call's place among the arrive calls so far (0, 1, …); it
 * stays running hold_ms after taking it. ORDERED: the places follow the order the calls were
 * sent, and the holds overlap (only the taking of a place is in turn). */
static pthread_mutex_t arrivals_lock = PTHREAD_MUTEX_INITIALIZER;
static int64_t arrivals, arrivals_running, arrivals_peak;

static int arrive(agentix_call *call, const msgpack_object *argv, size_t argc) {
        struct timespec hold = { .tv_sec = argv[0].via.i64 / 1000, .tv_nsec = argv[0].via.i64 % 1000 * 1000000 };
        int64_t place;

        pthread_mutex_lock(&arrivals_lock);
        place = arrivals++;
        arrivals_running++;
        if (arrivals_running > arrivals_peak)
                arrivals_peak = arrivals_running;
        pthread_mutex_unlock(&arrivals_lock);
        agentix_call_let_next_start(call);
        (void) nanosleep(&hold, NULL);
        pthread_mutex_lock(&arrivals_lock);
        arrivals_running--;
        pthread_mutex_unlock(&arrivals_lock);
        return msgpack_pack_int64(agentix_call_result(call), place) < 0 ? -ENOMEM : 0;
}

/* arrival_peak() -> int: the most arrive calls that ran at once. */
static int arrival_peak(agentix_call *call, const msgpack_object *argv, size_t argc) {
        int64_t peak;

        pthread_mutex_lock(&arrivals_lock);
        peak = arrivals_peak;
        pthread_mutex_unlock(&arrivals_lock);
        return msgpack_pack_int64(agentix_call_result(call), peak) < 0 ? -ENOMEM : 0;
}

/* info() -> {id, shape, remaining_ms} */
static int info(agentix_call *call, const msgpack_object *argv, size_t argc) {
        msgpack_packer *pk = agentix_call_result(call);

        msgpack_pack_map(pk, 3);
        agentix_pack_kv_str(pk, "id", agentix_call_id(call));
        agentix_pack_kv_int(pk, "shape", agentix_call_shape(call));
        agentix_pack_kv_int(pk, "remaining_ms", agentix_call_remaining_ms(call));
        return 0;
}

/* Sleep `ms`, waking early when the call is cancelled. */
static void sleep_cancellably(agentix_call *call, int64_t ms) {
        struct timespec start, now;

        clock_gettime(CLOCK_MONOTONIC, &start);
        for (;;) {
                int64_t elapsed;

                clock_gettime(CLOCK_MONOTONIC, &now);
                elapsed = (now.tv_sec - start.tv_sec) * 1000 + (now.tv_nsec - start.tv_nsec) / 1000000;
                if (elapsed >= ms || agentix_call_cancelled(call))
                        return;
                /* Not the wait fd: it is readable while items wait, which is the point here. */
                (void) poll(NULL, 0, ms - elapsed < 10 ? (int) (ms - elapsed) : 10);
        }
}

/* tally(start_ms: int = 0, item_us: int = 0) bidi: a slow reader for flow-control tests. Waits
 * start_ms before reading anything, then item_us per item, blocking in inbox_next(); at the end
 * of the inbox it yields {items, bytes, fnv} over the str/bin items' bytes in order (FNV-1a 64
 * as 16 hex digits), so a lost, doubled or reordered item shows. */
static int tally(agentix_call *call, const msgpack_object *argv, size_t argc) {
        int64_t start_ms = argv[0].via.i64, item_us = argv[1].via.i64;
        uint64_t fnv = 0xcbf29ce484222325ULL, n = 0, bytes = 0;
        msgpack_packer *pk;
        char hex[17];
        int r;

        sleep_cancellably(call, start_ms);
        for (;;) {
                msgpack_object item;
                const uint8_t *p;
                size_t size;

                r = agentix_call_inbox_next(call, &item, -1);
                if (r < 0)
                        return r;
                if (r == 0)
                        break;
                if (item.type == MSGPACK_OBJECT_STR || item.type == MSGPACK_OBJECT_BIN) {
                        p = (const uint8_t *) (item.type == MSGPACK_OBJECT_STR ? item.via.str.ptr : item.via.bin.ptr);
                        size = item.type == MSGPACK_OBJECT_STR ? item.via.str.size : item.via.bin.size;
                } else
                        return agentix_call_raise(call, "TypeError", "tally() items must be str or bytes");
                for (size_t i = 0; i < size; i++)
                        fnv = (fnv ^ p[i]) * 0x100000001b3ULL;
                n++;
                bytes += size;
                if (item_us > 0)
                        (void) nanosleep(&(struct timespec) { .tv_sec = item_us / 1000000,
                                                              .tv_nsec = (item_us % 1000000) * 1000 },
                                         NULL);
        }

        snprintf(hex, sizeof(hex), "%016" PRIx64, fnv);
        pk = agentix_call_item_begin(call);
        msgpack_pack_map(pk, 3);
        agentix_pack_kv_int(pk, "items", (int64_t) n);
        agentix_pack_kv_int(pk, "bytes", (int64_t) bytes);
        agentix_pack_kv_str(pk, "fnv", hex);
        return agentix_call_item_end(call);
}

/* inbox_hold() bidi: never reads its inbox until cancelled, to overflow it. */
static int inbox_hold(agentix_call *call, const msgpack_object *argv, size_t argc) {
        int wfd = agentix_call_wait_fd(call);

        while (!agentix_call_cancelled(call)) {
                struct pollfd p = { .fd = wfd, .events = POLLIN };
                (void) poll(&p, 1, 50);
        }
        return -ECANCELED;
}

static int errno_of(long r) {
        return r < 0 ? errno : 0;
}

/* syscalls() -> {name: errno}: 0 when the call succeeded. Arguments are chosen so that each
 * call fails harmlessly (or does nothing) when the filter lets it through. */
static int syscalls(agentix_call *call, const msgpack_object *argv, size_t argc) {
        msgpack_packer *pk = agentix_call_result(call);
        char buf[64];
        long r;
        int fd;

        msgpack_pack_map(pk, 17);

        agentix_pack_kv_int(pk, "mount", errno_of(syscall(SYS_mount, "none", "/nonexistent/agentix", "tmpfs", 0, NULL)));
        agentix_pack_kv_int(pk, "umount2", errno_of(syscall(SYS_umount2, "/nonexistent/agentix", 0)));
        agentix_pack_kv_int(pk, "bpf", errno_of(syscall(SYS_bpf, 0xffff, NULL, 0)));
        agentix_pack_kv_int(pk, "kexec_load", errno_of(syscall(SYS_kexec_load, 0, 0, NULL, 0xdead0000UL)));
        /* A multithreaded process may not unshare a user namespace: EINVAL without a filter. */
        agentix_pack_kv_int(pk, "unshare", errno_of(syscall(SYS_unshare, CLONE_NEWUSER)));
        agentix_pack_kv_int(pk, "setns", errno_of(syscall(SYS_setns, -1, 0)));
        agentix_pack_kv_int(pk, "keyctl", errno_of(syscall(SYS_keyctl, 0x7fff, 0, 0, 0, 0)));
        agentix_pack_kv_int(pk, "ptrace", errno_of(syscall(SYS_ptrace, PTRACE_PEEKUSER, 999999999, 0, 0)));
        agentix_pack_kv_int(pk, "reboot", errno_of(syscall(SYS_reboot, 0, 0, 0, NULL)));
        agentix_pack_kv_int(pk, "init_module", errno_of(syscall(SYS_init_module, NULL, 0, "")));
        agentix_pack_kv_int(pk, "perf_event_open", errno_of(syscall(SYS_perf_event_open, NULL, 0, -1, -1, 0)));
        agentix_pack_kv_int(pk, "swapon", errno_of(syscall(SYS_swapon, "/nonexistent/agentix", 0)));

        /* clone with CLONE_NEWNS, raw: if it goes through, the child leaves at once. */
        r = syscall(SYS_clone, CLONE_NEWNS | SIGCHLD, NULL, NULL, NULL, NULL);
        if (r == 0)
                syscall(SYS_exit_group, 0);
        if (r > 0)
                (void) waitpid((pid_t) r, NULL, 0);
        agentix_pack_kv_int(pk, "clone_newns", errno_of(r));

        /* Ordinary syscalls keep working. */
        agentix_pack_kv_int(pk, "getpid", getpid() > 0 ? 0 : EINVAL);
        fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
        agentix_pack_kv_int(pk, "open", fd < 0 ? errno : 0);
        agentix_pack_kv_int(pk, "read", fd < 0 ? EBADF : errno_of(read(fd, buf, sizeof(buf))));
        if (fd >= 0)
                close(fd);
        /* A plain fork (clone without namespace flags) works too. */
        r = fork();
        if (r == 0)
                _exit(0);
        if (r > 0)
                (void) waitpid((pid_t) r, NULL, 0);
        agentix_pack_kv_int(pk, "fork", errno_of(r));
        return 0;
}

/* Run argv with stdout into a pipe; return what it printed (malloc()ed) or NULL. */
static char *run_capture(char *const argv[]) {
        int p[2];
        pid_t pid;
        char *out = NULL;
        size_t n = 0;

        if (pipe2(p, O_CLOEXEC) < 0)
                return NULL;
        pid = fork();
        if (pid == 0) {
                dup2(p[1], 1);
                execv(argv[0], argv);
                _exit(127);
        }
        close(p[1]);
        if (pid < 0) {
                close(p[0]);
                return NULL;
        }
        for (;;) {
                char *m = realloc(out, n + 4097);
                ssize_t k;

                if (!m)
                        break;
                out = m;
                k = read(p[0], out + n, 4096);
                if (k <= 0)
                        break;
                n += (size_t) k;
        }
        close(p[0]);
        (void) waitpid(pid, NULL, 0);
        if (out)
                out[n] = 0;
        return out;
}

/* The value of "Name:\t…" in a /proc/…/status text, or -1. */
static long status_field(const char *status, const char *name) {
        const char *p = status ? strstr(status, name) : NULL;

        return p ? strtol(p + strlen(name), NULL, 10) : -1;
}

/* spawn_probe() -> {fork_unshare_errno, exec_seccomp, exec_no_new_privs}: a forked child tries
 * unshare(CLONE_NEWUSER) (single-threaded, so without a filter it would succeed as root); an
 * exec()ed cat reports its own seccomp mode and no_new_privs. */
static int spawn_probe(agentix_call *call, const msgpack_object *argv, size_t argc) {
        msgpack_packer *pk = agentix_call_result(call);
        char *const cat[] = { (char *) "/bin/cat", (char *) "/proc/self/status", NULL };
        char *status;
        int p[2], child_errno = -1, st;
        pid_t pid;

        if (pipe2(p, O_CLOEXEC) < 0)
                return -errno;
        pid = fork();
        if (pid == 0) {
                int e = syscall(SYS_unshare, CLONE_NEWUSER) < 0 ? errno : 0;
                (void) !write(p[1], &e, sizeof(e));
                _exit(0);
        }
        close(p[1]);
        if (pid > 0) {
                if (read(p[0], &child_errno, sizeof(child_errno)) != sizeof(child_errno))
                        child_errno = -1;
                (void) waitpid(pid, &st, 0);
        }
        close(p[0]);

        status = run_capture(cat);
        msgpack_pack_map(pk, 3);
        agentix_pack_kv_int(pk, "fork_unshare_errno", child_errno);
        agentix_pack_kv_int(pk, "exec_seccomp", status_field(status, "\nSeccomp:"));
        agentix_pack_kv_int(pk, "exec_no_new_privs", status_field(status, "\nNoNewPrivs:"));
        free(status);
        return 0;
}

static void pack_link(msgpack_packer *pk, const char *key, const char *path) {
        char target[256];
        ssize_t n = readlink(path, target, sizeof(target) - 1);

        target[n < 0 ? 0 : n] = 0;
        agentix_pack_kv_str(pk, key, n < 0 ? NULL : target);
}

/* fds() -> {stdin, stdout, stderr: link targets, sockets: [fd…] open in the worker,
 *           child_fds: the fds /bin/ls sees open in an exec()ed child (as text)} */
static int fds(agentix_call *call, const msgpack_object *argv, size_t argc) {
        msgpack_packer *pk = agentix_call_result(call);
        char *const ls[] = { (char *) "/bin/ls", (char *) "/proc/self/fd", NULL };
        int sockets[64], n_sockets = 0;
        char *child;

        for (int fd = 0; fd < 1024 && n_sockets < 64; fd++) {
                char path[64], target[256];
                ssize_t n;

                snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
                n = readlink(path, target, sizeof(target) - 1);
                if (n < 0)
                        continue;
                target[n] = 0;
                if (strncmp(target, "socket:", 7) == 0)
                        sockets[n_sockets++] = fd;
        }

        child = run_capture(ls);
        msgpack_pack_map(pk, 5);
        pack_link(pk, "stdin", "/proc/self/fd/0");
        pack_link(pk, "stdout", "/proc/self/fd/1");
        pack_link(pk, "stderr", "/proc/self/fd/2");
        agentix_pack_cstr(pk, "sockets");
        msgpack_pack_array(pk, (size_t) n_sockets);
        for (int i = 0; i < n_sockets; i++)
                msgpack_pack_int(pk, sockets[i]);
        agentix_pack_kv_str(pk, "child_fds", child);
        free(child);
        return 0;
}

static long proc_status_field(const char *name) {
        char buf[8192];
        ssize_t n;
        int fd;

        fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return -1;
        n = read(fd, buf, sizeof(buf) - 1);
        close(fd);
        buf[n < 0 ? 0 : n] = 0;
        return status_field(buf, name);
}

static int64_t rlim(rlim_t v) {
        return v == RLIM_INFINITY ? -1 : (int64_t) v;
}

/* process() -> the worker's own confinement: rlimits (-1 = unlimited), PR_GET_PDEATHSIG (of
 * this call thread, not the process), no_new_privs, seccomp mode. */
static int process(agentix_call *call, const msgpack_object *argv, size_t argc) {
        msgpack_packer *pk = agentix_call_result(call);
        struct rlimit core, nofile, nproc;
        int sig = -1;

        getrlimit(RLIMIT_CORE, &core);
        getrlimit(RLIMIT_NOFILE, &nofile);
        getrlimit(RLIMIT_NPROC, &nproc);
        (void) prctl(PR_GET_PDEATHSIG, &sig);

        msgpack_pack_map(pk, 9);
        agentix_pack_kv_int(pk, "core_soft", rlim(core.rlim_cur));
        agentix_pack_kv_int(pk, "core_hard", rlim(core.rlim_max));
        agentix_pack_kv_int(pk, "nofile_soft", rlim(nofile.rlim_cur));
        agentix_pack_kv_int(pk, "nofile_hard", rlim(nofile.rlim_max));
        agentix_pack_kv_int(pk, "nproc_soft", rlim(nproc.rlim_cur));
        agentix_pack_kv_int(pk, "nproc_hard", rlim(nproc.rlim_max));
        agentix_pack_kv_int(pk, "pdeathsig", sig);
        agentix_pack_kv_int(pk, "no_new_privs", prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0));
        agentix_pack_kv_int(pk, "seccomp", proc_status_field("\nSeccomp:"));
        return 0;
}

static const agentix_function testmod_functions[] = {
        { "echo", AGENTIX_SHAPE_UNARY, "(value: any) -> any", echo, "return the argument" },
        { "count", AGENTIX_SHAPE_STREAM, "(n: int) -> int", count, "stream 0 … n-1" },
        { "upper", AGENTIX_SHAPE_BIDI, "() -> str", upper, "upper-case each inbox item" },
        { "bulk", AGENTIX_SHAPE_STREAM, "(n: int, size: int, poll: bool = False) -> bytes", bulk,
          "stream n items of size bytes" },
        { "sleep", AGENTIX_SHAPE_UNARY, "(ms: int) -> int", sleep_ms, "sleep, cancellably" },
        { "crash", AGENTIX_SHAPE_UNARY, "(signal: int = 9) -> none", crash, "kill the worker" },
        { "fail", AGENTIX_SHAPE_UNARY, "(errno: int) -> none", fail, "return -errno" },
        { "raise_error", AGENTIX_SHAPE_UNARY, "(type: str, message: str) -> none", raise_error, "raise" },
        { "bin_from_file", AGENTIX_SHAPE_UNARY, "(path: str, size: int, lenient: bool = False) -> bytes", bin_from_file,
          "read a file" },
        { "info", AGENTIX_SHAPE_UNARY, "() -> map", info, "call metadata" },
        { "inline_thread", AGENTIX_SHAPE_UNARY, "() -> bool", on_reader_thread, "runs inline",
          AGENTIX_FUNCTION_INLINE },
        { "pool_thread", AGENTIX_SHAPE_UNARY, "() -> bool", on_reader_thread, "runs on a call thread" },
        { "arrive", AGENTIX_SHAPE_UNARY, "(hold_ms: int = 0) -> int", arrive, "take a place in arrival order",
          AGENTIX_FUNCTION_ORDERED },
        { "arrival_peak", AGENTIX_SHAPE_UNARY, "() -> int", arrival_peak, "arrive calls at once, at most" },
        { "inbox_hold", AGENTIX_SHAPE_BIDI, "() -> none", inbox_hold, "never read the inbox" },
        { "tally", AGENTIX_SHAPE_BIDI, "(start_ms: int = 0, item_us: int = 0) -> map", tally,
          "read the inbox slowly, then yield {items, bytes, fnv}" },
        { "syscalls", AGENTIX_SHAPE_UNARY, "() -> map", syscalls, "probe denied syscalls" },
        { "spawn_probe", AGENTIX_SHAPE_UNARY, "() -> map", spawn_probe, "probe a child's confinement" },
        { "fds", AGENTIX_SHAPE_UNARY, "() -> map", fds, "probe fds" },
        { "process", AGENTIX_SHAPE_UNARY, "() -> map", process, "probe rlimits and prctl state" },
        {},
};

AGENTIX_MODULE(.name = "testmod", .doc = "worker test module", .functions = testmod_functions);

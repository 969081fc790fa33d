/* SPDX-License-Identifier: MIT */
/* agentix-worker: the process agentix-server spawns to run calls. A program of its own (not a
 * mode of the server) so that the process running user code maps only what it needs: no
 * libwebsockets, no TLS library, no event loop of the server. */
#include <getopt.h>
#include <limits.h>
#include <stdint.h>

#include "log.h"
#include "worker.h"

static void help(void) {
        printf("Usage: agentix-worker --frame-fd=FD [OPTIONS]\n"
               "\n"
               "Run remote calls for agentix-server, which starts this program: frames arrive on FD.\n"
               "\n"
               "  -h --help                   Show this help\n"
               "     --version                Show the version\n"
               "     --frame-fd=FD            The frame socket from the server (required, >= 3)\n"
               "     --max-frame=BYTES        Largest frame accepted\n"
               "     --max-calls=N            Calls running at once (default 1024)\n"
               "     --module-dir=DIR         Directory of C modules ($AGENTIX_MODULE_DIR)\n"
               "     --seccomp-profile=FILE   Seccomp profile in Docker's JSON format\n"
               "     --no-seccomp             Run without a seccomp filter (debugging)\n"
               "\n"
               "See agentix-worker(8).\n");
}

static int parse_number(const char *s, unsigned long long min, unsigned long long max, unsigned long long *ret) {
        unsigned long long v;
        char *end;

        errno = 0;
        v = strtoull(s, &end, 10);
        if (errno != 0 || end == s || *end != 0 || v < min || v > max)
                return -EINVAL;
        *ret = v;
        return 0;
}

int main(int argc, char *argv[]) {
        enum { ARG_VERSION = 0x100, ARG_FRAME_FD, ARG_MAX_FRAME, ARG_MAX_CALLS, ARG_MODULE_DIR,
               ARG_SECCOMP_PROFILE, ARG_NO_SECCOMP };
        static const struct option options[] = {
                { "help", no_argument, NULL, 'h' },
                { "version", no_argument, NULL, ARG_VERSION },
                { "frame-fd", required_argument, NULL, ARG_FRAME_FD },
                { "max-frame", required_argument, NULL, ARG_MAX_FRAME },
                { "max-calls", required_argument, NULL, ARG_MAX_CALLS },
                { "module-dir", required_argument, NULL, ARG_MODULE_DIR },
                { "seccomp-profile", required_argument, NULL, ARG_SECCOMP_PROFILE },
                { "no-seccomp", no_argument, NULL, ARG_NO_SECCOMP },
                {}
        };
        WorkerOptions o = {};
        unsigned long long v;
        int frame_fd = -1, c;

        log_parse_env();
        log_set_prefix("agentix-worker");

        while ((c = getopt_long(argc, argv, "h", options, NULL)) >= 0)
                switch (c) {
                case 'h':
                        help();
                        return 0;
                case ARG_VERSION:
                        printf("agentix-worker %s\n", AGENTIX_VERSION);
                        return 0;
                case ARG_FRAME_FD:
                        if (parse_number(optarg, 3, INT_MAX, &v) < 0)
                                return log_error_errno(EINVAL, "Invalid --frame-fd (must be >= 3): %s", optarg), 2;
                        frame_fd = (int) v;
                        break;
                case ARG_MAX_FRAME:
                        if (parse_number(optarg, 0, SIZE_MAX / 2, &v) < 0)
                                return log_error_errno(EINVAL, "Invalid --max-frame: %s", optarg), 2;
                        o.max_frame = (size_t) v;
                        break;
                case ARG_MAX_CALLS:
                        if (parse_number(optarg, 1, UINT_MAX, &v) < 0)
                                return log_error_errno(EINVAL, "Invalid --max-calls: %s", optarg), 2;
                        o.max_calls = (unsigned) v;
                        break;
                case ARG_MODULE_DIR:
                        o.module_dir = optarg;
                        break;
                case ARG_SECCOMP_PROFILE:
                        o.seccomp_profile = optarg;
                        break;
                case ARG_NO_SECCOMP:
                        o.no_seccomp = true;
                        break;
                default:
                        return 2;
                }
        if (optind < argc)
                return log_error_errno(EINVAL, "Unexpected argument: %s (see --help)", argv[optind]), 2;
        if (frame_fd < 0)
                return log_error_errno(EINVAL, "--frame-fd=FD is required; agentix-server starts this program."), 2;

        return worker_main(frame_fd, &o);
}

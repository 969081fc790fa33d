/* SPDX-License-Identifier: MIT */
/* Dispatch overhead of the worker: the time from writing a CALL frame for testmod::echo of a
 * small value to having read its RESULT frame, one call at a time (median over N calls, after a
 * warm-up), with the built-in seccomp profile loaded as in production. Then the throughput with
 * many calls in flight.
 *
 *   bench-worker [N [--no-seccomp]]    (default 10000) */
#include <inttypes.h>
#include <stdio.h>
#include <time.h>
#include <sys/socket.h>

#include "envelope.h"
#include "frame.h"
#include "worker-harness.h"

static int cmp_u64(const void *a, const void *b) {
        uint64_t x = *(const uint64_t *) a, y = *(const uint64_t *) b;

        return x < y ? -1 : x > y;
}

/* A CALL frame (header included) for testmod::echo("hello") with call id "b<i>". */
static int build_call(Buffer *b, unsigned i) {
        msgpack_packer pk;
        char id[32];
        int r = 0;

        buffer_clear(b);
        r |= buffer_append(b, "\0\0\0\0\0", FRAME_HEADER_SIZE);
        mp_packer_init_buffer(&pk, b);
        snprintf(id, sizeof(id), "b%u", i);
        r |= msgpack_pack_map(&pk, 5);
        r |= mp_pack_cstr(&pk, "call_id");
        r |= mp_pack_cstr(&pk, id);
        r |= mp_pack_cstr(&pk, "callable");
        r |= mp_pack_cstr(&pk, "testmod::echo");
        r |= mp_pack_cstr(&pk, "shape");
        r |= mp_pack_cstr(&pk, "unary");
        r |= mp_pack_cstr(&pk, "args");
        r |= msgpack_pack_array(&pk, 1);
        r |= mp_pack_cstr(&pk, "hello");
        r |= mp_pack_cstr(&pk, "kwargs");
        r |= msgpack_pack_map(&pk, 0);
        if (r)
                return -ENOMEM;
        return frame_seal(buffer_data(b), b->len, FRAME_CALL);
}

/* Read one whole frame with blocking reads; returns its kind. */
static int read_frame(int fd, uint8_t *buf, size_t n) {
        uint8_t hdr[FRAME_HEADER_SIZE];
        size_t len;
        int r;

        r = loop_read_exact(fd, hdr, sizeof(hdr));
        if (r < 0)
                return r;
        len = (size_t) hdr[0] | (size_t) hdr[1] << 8 | (size_t) hdr[2] << 16 | (size_t) hdr[3] << 24;
        if (len - 1 > n)
                return -EMSGSIZE;
        r = loop_read_exact(fd, buf, len - 1);
        return r < 0 ? r : hdr[4];
}

int main(int argc, char *argv[]) {
        unsigned n = argc > 1 ? (unsigned) strtoul(argv[1], NULL, 10) : 10000, warmup = 2000, inflight = 64;
        WorkerHarness *h = NULL;
        Buffer b = {};
        uint8_t reply[4096];
        uint64_t *lat;
        unsigned long long t0, t1;
        int fd, r;

        if (n == 0)
                n = 1;
        lat = calloc(n, sizeof(uint64_t));
        if (!lat)
                return EXIT_FAILURE;

        bool no_seccomp = argc > 2 && streq(argv[2], "--no-seccomp");

        r = worker_harness_start(&(WorkerOptions) { .module_dir = TESTMOD_DIR, .no_seccomp = no_seccomp }, &h);
        if (r < 0 || worker_harness_wait_ready(h, 10000) < 0) {
                fprintf(stderr, "Failed to start a worker.\n");
                return EXIT_FAILURE;
        }
        fd = worker_harness_fd(h);

        for (unsigned i = 0; i < warmup + n; i++) {
                if (build_call(&b, i) < 0)
                        return EXIT_FAILURE;
                struct timespec a, z;
                clock_gettime(CLOCK_MONOTONIC, &a);
                if (loop_write(fd, buffer_data(&b), b.len) < 0)
                        return EXIT_FAILURE;
                r = read_frame(fd, reply, sizeof(reply));
                clock_gettime(CLOCK_MONOTONIC, &z);
                if (r != FRAME_RESULT) {
                        fprintf(stderr, "call %u: expected RESULT, got %d\n", i, r);
                        return EXIT_FAILURE;
                }
                if (i >= warmup)
                        lat[i - warmup] = (uint64_t) (z.tv_sec - a.tv_sec) * 1000000000ULL + (uint64_t) z.tv_nsec -
                                          (uint64_t) a.tv_nsec;
        }
        qsort(lat, n, sizeof(uint64_t), cmp_u64);
        printf("worker dispatch (%s), testmod::echo(\"hello\"), one at a time, %u calls (after %u warm-up):\n",
               no_seccomp ? "no seccomp" : "built-in seccomp profile", n, warmup);
        printf("  CALL written -> RESULT read: median %.1f us, p90 %.1f us, p99 %.1f us, min %.1f us\n",
               lat[n / 2] / 1000.0, lat[n * 9 / 10] / 1000.0, lat[n * 99 / 100] / 1000.0, lat[0] / 1000.0);

        /* Throughput with `inflight` calls outstanding. */
        t0 = now_usec();
        unsigned sent = 0, done = 0;
        while (done < n) {
                while (sent < n && sent - done < inflight) {
                        if (build_call(&b, warmup + n + sent) < 0 || loop_write(fd, buffer_data(&b), b.len) < 0)
                                return EXIT_FAILURE;
                        sent++;
                }
                r = read_frame(fd, reply, sizeof(reply));
                if (r != FRAME_RESULT) {
                        fprintf(stderr, "expected RESULT, got %d\n", r);
                        return EXIT_FAILURE;
                }
                done++;
        }
        t1 = now_usec();
        printf("  %u calls with %u in flight: %.0f calls/s\n", n, inflight, n / ((t1 - t0) / 1e6));

        buffer_done(&b);
        free(lat);
        r = worker_harness_shutdown(h, 10000, NULL);
        worker_harness_free(h);
        return r < 0 ? EXIT_FAILURE : EXIT_SUCCESS;
}

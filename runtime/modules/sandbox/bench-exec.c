/* SPDX-License-Identifier: MIT */
/* Spawn + wait of `true` through the exec core (unary shape), median of N runs.
 *   bench-exec [N] [command]   default: 1000 true */
#include <stdio.h>
#include <stdlib.h>

#include "exec.h"
#include "macro.h"

static int discard(void *userdata, ExecStream stream, const void *data, size_t size) {
        return 0;
}

static int cmp_u64(const void *a, const void *b) {
        uint64_t x = *(const uint64_t *) a, y = *(const uint64_t *) b;
        return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
        size_t n = argc > 1 ? strtoul(argv[1], NULL, 10) : 1000;
        const char *cmd = argc > 2 ? argv[2] : "true";
        ExecHooks h = { .wait_fd = -1, .on_output = discard };
        ExecOptions o = EXEC_OPTIONS_DEFAULT;
        uint64_t *t;

        if (n == 0)
                return 1;
        t = calloc(n, sizeof(*t));
        if (!t)
                return 1;
        o.command = cmd;
        o.merge_stderr = true;
        o.timeout_usec = 10 * 1000 * 1000;

        for (size_t i = 0; i < n; i++) {
                _cleanup_exec_run_ ExecRun *run = NULL;
                ExecResult res;
                uint64_t t0 = now_usec();
                int r;

                r = exec_start(&o, &run, NULL);
                if (r >= 0)
                        r = exec_run_loop(run, &h, &res);
                run = exec_run_free(run);
                t[i] = now_usec() - t0;
                if (r < 0 || res.exit_code != 0) {
                        fprintf(stderr, "run %zu failed: %s exit=%d\n", i, strerror(-r), r < 0 ? -1 : res.exit_code);
                        return 1;
                }
        }
        qsort(t, n, sizeof(*t), cmp_u64);
        printf("exec '%s' x%zu: median %.3f ms, p90 %.3f ms, p99 %.3f ms, min %.3f ms\n", cmd, n,
               t[n / 2] / 1000.0, t[n * 9 / 10] / 1000.0, t[n * 99 / 100] / 1000.0, t[0] / 1000.0);
        free(t);
        return 0;
}

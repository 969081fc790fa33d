/* SPDX-License-Identifier: MIT */
/* bench-fs-grep PATTERN PATH [GLOB]: time fs_grep() over a tree (compare with
 * `grep -rnFI PATTERN PATH`). Runs it three times and prints the best. */
#include <stdio.h>

#include "fs-ops.h"
#include "macro.h"

int main(int argc, char *argv[]) {
        unsigned long long best = ~0ULL;
        size_t n = 0;
        bool truncated = false;

        if (argc < 3) {
                fprintf(stderr, "usage: %s PATTERN PATH [GLOB]\n", argv[0]);
                return 2;
        }
        for (int i = 0; i < 3; i++) {
                FsGrepResult r = {};
                unsigned long long t = now_usec();
                int q = fs_grep(&(FsGrepOptions) {
                                        .pattern = argv[1],
                                        .pattern_len = strlen(argv[1]),
                                        .path = argv[2],
                                        .glob = argc > 3 ? argv[3] : NULL,
                                        .max_count = -1,
                                        .timeout_usec = 600u * 1000000u,
                                },
                                &r);
                t = now_usec() - t;
                if (q < 0 || r.status.error != FS_OK) {
                        fprintf(stderr, "grep failed: %s\n", strna(r.status.message));
                        return 1;
                }
                best = MIN(best, t);
                n = r.n_matches;
                truncated = r.truncated;
                fs_grep_result_done(&r);
        }
        printf("%zu matches%s in %.3f s\n", n, truncated ? " (truncated)" : "", (double) best / 1e6);
        return 0;
}

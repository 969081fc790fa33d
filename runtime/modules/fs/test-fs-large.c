/* SPDX-License-Identifier: MIT */
/* A 100 MiB file through write, read, edit, grep and download: memory stays bounded
 * (peak RSS growth measured with getrusage()), contents stay exact. Prints the times. */
#include <inttypes.h>

#include "test-fs-util.h"

#define LINE 100u
#define SIZE (100u * 1024u * 1024u)
#define LINES (SIZE / LINE)

static char *content;

static double now_s(void) {
        return (double) now_usec() / 1e6;
}

/* Each line "line NNNNNNNN xxx…\n", 100 bytes; a few carry a marker. */
static void fill(char *buf) {
        for (size_t i = 0; i < LINES; i++) {
                char *l = buf + i * LINE;
                int k = snprintf(l, LINE, "%s %08zu ", i % 100000 == 99999 ? "MARK" : "line", i);
                memset(l + k, 'x', LINE - 1 - (size_t) k);
                l[LINE - 1] = '\n';
        }
}

static long growth_mib(long before_kib) {
        return (max_rss_kib() - before_kib) / 1024;
}

static int check_sink(const void *data, size_t n, void *userdata) {
        size_t *off = userdata;
        if (*off + n > SIZE || memcmp(content + *off, data, n) != 0)
                return -EBADMSG;
        *off += n;
        return 0;
}

static void test_large_file(void **state) {
        long base;
        double t;

        content = malloc(SIZE);
        assert_non_null(content);
        fill(content);
        base = max_rss_kib(); /* the content itself is resident now */

        /* write: straight from the caller's memory */
        FsStatus s = {};
        t = now_s();
        assert_int_equal(fs_write(P("big.txt"), content, SIZE, false, &s), 0);
        assert_status(&s, FS_OK);
        printf("# write 100 MiB (with fsync): %.2f s, RSS growth %ld MiB\n", now_s() - t, growth_mib(base));
        assert_true(growth_mib(base) < 16);

        /* read: the last page, after streaming past ~1M lines */
        FsReadResult r = {};
        t = now_s();
        assert_int_equal(fs_read(P("big.txt"), LINES - 3, 2000, &r), 0);
        assert_status(&r.status, FS_OK);
        printf("# read last page of 100 MiB: %.2f s, RSS growth %ld MiB\n", now_s() - t, growth_mib(base));
        char expected[256];
        snprintf(expected, sizeof(expected), "%7u\tline %08u ", LINES - 2, LINES - 3);
        assert_memory_equal(r.data, expected, strlen(expected));
        assert_int_equal(r.total_lines, LINES); /* the page reached EOF */
        assert_int_equal(r.next_offset, -1);
        fs_read_result_done(&r);
        assert_int_equal(fs_read(P("big.txt"), 10, 5, &r), 0);
        assert_int_equal(r.total_lines, -1); /* over 1 MiB and not at EOF: not counted */
        fs_read_result_done(&r);
        assert_true(growth_mib(base) < 16);

        /* grep: every marker, line numbers exact */
        FsGrepResult g = {};
        t = now_s();
        assert_int_equal(fs_grep(&(FsGrepOptions) { .pattern = "MARK", .pattern_len = 4, .path = P("big.txt"), .max_count = -1 }, &g), 0);
        printf("# grep 100 MiB: %.2f s, %zu matches, RSS growth %ld MiB\n", now_s() - t, g.n_matches, growth_mib(base));
        assert_int_equal(g.n_matches, LINES / 100000);
        for (size_t i = 0; i < g.n_matches; i++)
                assert_int_equal(g.matches[i].line, (i + 1) * 100000);
        fs_grep_result_done(&g);
        assert_true(growth_mib(base) < 16);

        /* download: the opened file streamed in chunks (the worker reads it into the frame) */
        int fd;
        uint64_t size;
        size_t off = 0;
        static uint8_t chunk[64 * 1024];
        ssize_t k;
        t = now_s();
        assert_int_equal(fs_download_open(P("big.txt"), &fd, &size, NULL, &s), 0);
        assert_int_equal(size, SIZE);
        while ((k = read(fd, chunk, sizeof(chunk))) > 0)
                assert_int_equal(check_sink(chunk, (size_t) k, &off), 0);
        close(fd);
        assert_int_equal(off, SIZE);
        printf("# download 100 MiB to a sink: %.2f s, RSS growth %ld MiB\n", now_s() - t, growth_mib(base));
        assert_true(growth_mib(base) < 16);

        /* edit: one copy of the file in memory, the new file streamed out */
        FsEditResult e = {};
        char old[64];
        snprintf(old, sizeof(old), "MARK %08u ", LINES - LINES % 100000 - 1);
        t = now_s();
        assert_int_equal(fs_edit(P("big.txt"), old, strlen(old), "EDITED ", 7, false, &e), 0);
        assert_status(&e.status, FS_OK);
        long grown = growth_mib(base);
        printf("# edit 100 MiB: %.2f s, RSS growth %ld MiB\n", now_s() - t, grown);
        assert_true(grown < 100 + 100 / 2); /* one copy (plus slack), well under two */
        fs_edit_result_done(&e);

        struct stat st;
        assert_int_equal(stat(P("big.txt"), &st), 0);
        assert_int_equal(st.st_size, SIZE - strlen(old) + 7);
        assert_int_equal(count_prefixed(P(""), ".#"), 0);
        free(content);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_large_file, test_dir_setup, test_dir_teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}

/* SPDX-License-Identifier: MIT */
/* agentixctl stats: what sandboxes use (Sandbox.GetStats), as a table like `docker stats`'s,
 * refreshed every second on a terminal, once otherwise; and the lines `status` adds. */
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "agentixctl.h"
#include "fail.h"
#include "format-util.h"
#include "macro.h"
#include "output.h"
#include "stats.h"

#define STATS_MAX_SANDBOXES 4096

static void stats_help(void) {
        printf("Usage: agentixctl stats [OPTIONS] [ID...]\n"
               "\n"
               "Show what sandboxes use: CPU, memory, processes, network and block I/O, read from\n"
               "the kernel by agentd (the owner's sandboxes; root's: all). Without IDs, every\n"
               "running sandbox of the caller. On a terminal the table is redrawn every second\n"
               "until Ctrl-C; otherwise it is printed once.\n"
               "\n"
               "  -h --help               Show this help\n"
               "     --no-stream          Print the table once, also on a terminal\n"
               "     --json               One JSON array, once: agentd's numbers as they are\n"
               "  -q --quiet              Only the ids of the sandboxes shown\n"
               "\n"
               "See agentixctl(1).\n");
}

static const char *bytes_or_dash(uint64_t v, char buf[static FORMAT_BYTES_MAX]) {
        if (v == AGENTIX_STATS_UNKNOWN)
                return "-";
        return format_bytes(v, buf);
}

json_t *stats_json(const agentix_stats *s) {
        json_t *j = json_object();
        const struct {
                const char *key;
                uint64_t v;
        } fields[] = {
                { "time", s->time_usec },          { "cpu_usec", s->cpu_usec },
                { "memory_current", s->memory_current }, { "memory_peak", s->memory_peak },
                { "memory_limit", s->memory_limit }, { "pids_current", s->pids_current },
                { "pids_limit", s->pids_limit },   { "net_rx_bytes", s->net_rx_bytes },
                { "net_tx_bytes", s->net_tx_bytes }, { "io_read_bytes", s->io_read_bytes },
                { "io_write_bytes", s->io_write_bytes },
        };

        if (!j)
                return NULL;
        for (size_t i = 0; i < ELEMENTSOF(fields); i++)
                if (fields[i].v != AGENTIX_STATS_UNKNOWN)
                        (void) json_object_set_new(j, fields[i].key, json_integer((json_int_t) fields[i].v));
        if (s->cpu_usec != AGENTIX_STATS_UNKNOWN)
                (void) json_object_set_new(j, "cpu_percent", json_real(s->cpu_percent));
        return j;
}

void stats_print_lines(const agentix_stats *s) {
        char a[FORMAT_BYTES_MAX], b[FORMAT_BYTES_MAX], c[FORMAT_BYTES_MAX];

        if (s->cpu_usec != AGENTIX_STATS_UNKNOWN)
                printf("CPU: %.1f%% now, %.2f s in all\n", s->cpu_percent, (double) s->cpu_usec / 1e6);
        printf("Memory: %s of %s (peak %s)\n", bytes_or_dash(s->memory_current, a),
               s->memory_limit == AGENTIX_STATS_UNKNOWN ? "no limit" : format_bytes(s->memory_limit, b),
               bytes_or_dash(s->memory_peak, c));
        if (s->pids_current != AGENTIX_STATS_UNKNOWN) {
                if (s->pids_limit == AGENTIX_STATS_UNKNOWN)
                        printf("Processes: %llu\n", (unsigned long long) s->pids_current);
                else
                        printf("Processes: %llu of %llu\n", (unsigned long long) s->pids_current,
                               (unsigned long long) s->pids_limit);
        }
        printf("Network: %s in, %s out\n", bytes_or_dash(s->net_rx_bytes, a), bytes_or_dash(s->net_tx_bytes, b));
        printf("Block I/O: %s read, %s written\n", bytes_or_dash(s->io_read_bytes, a), bytes_or_dash(s->io_write_bytes, b));
}

typedef struct Row {
        char *id;
        agentix_stats stats;
        bool ok;
} Row;

static void print_table(const Row *rows, size_t n) {
        char m[FORMAT_BYTES_MAX], l[FORMAT_BYTES_MAX], rx[FORMAT_BYTES_MAX], tx[FORMAT_BYTES_MAX],
             rd[FORMAT_BYTES_MAX], wr[FORMAT_BYTES_MAX], mem[48], net[48], io[48], cpu[16], pct[16], pids[24];

        printf("%-17s %7s %-25s %6s %7s %-23s %-23s\n", "ID", "CPU %", "MEM USAGE / LIMIT", "MEM %", "PIDS",
               "NET I/O", "BLOCK I/O");
        for (size_t i = 0; i < n; i++) {
                const agentix_stats *s = &rows[i].stats;

                if (!rows[i].ok)
                        continue;
                snprintf(cpu, sizeof(cpu), s->cpu_usec == AGENTIX_STATS_UNKNOWN ? "-" : "%.2f%%", s->cpu_percent);
                snprintf(mem, sizeof(mem), "%s / %s", bytes_or_dash(s->memory_current, m),
                         s->memory_limit == AGENTIX_STATS_UNKNOWN ? "-" : format_bytes(s->memory_limit, l));
                if (s->memory_current != AGENTIX_STATS_UNKNOWN && s->memory_limit != AGENTIX_STATS_UNKNOWN &&
                    s->memory_limit > 0)
                        snprintf(pct, sizeof(pct), "%.2f%%", (double) s->memory_current * 100.0 / (double) s->memory_limit);
                else
                        snprintf(pct, sizeof(pct), "-");
                if (s->pids_current == AGENTIX_STATS_UNKNOWN)
                        snprintf(pids, sizeof(pids), "-");
                else
                        snprintf(pids, sizeof(pids), "%llu", (unsigned long long) s->pids_current);
                snprintf(net, sizeof(net), "%s / %s", bytes_or_dash(s->net_rx_bytes, rx), bytes_or_dash(s->net_tx_bytes, tx));
                snprintf(io, sizeof(io), "%s / %s", bytes_or_dash(s->io_read_bytes, rd), bytes_or_dash(s->io_write_bytes, wr));
                printf("%-17s %7s %-25s %6s %7s %-23s %-23s\n", rows[i].id, cpu, mem, pct, pids, net, io);
        }
}

/* Read every row; a sandbox that went (or stopped) since it was listed is left out, one named
 * on the command line is an error. Returns an exit status. */
static int read_rows(agentix_manager *m, Row *rows, size_t n, bool named) {
        int status = EXIT_OK;

        for (size_t i = 0; i < n; i++) {
                agentix_error e = AGENTIX_ERROR_NULL;

                rows[i].ok = agentix_sandbox_stats(m, rows[i].id, &rows[i].stats, &e) >= 0;
                if (!rows[i].ok && named)
                        status = fail_agentix(&e, "cannot read what sandbox %s uses", rows[i].id);
                agentix_error_done(&e);
        }
        return status;
}

int verb_stats(int argc, char *argv[]) {
        enum { ARG_NO_STREAM = ARG_COMMON_END + 1 };
        static const struct option options[] = { COMMON_LONG_OPTIONS, { "no-stream", no_argument, NULL, ARG_NO_STREAM }, {} };
        agentix_manager *m = NULL;
        bool no_stream = false, named;
        Row *rows = NULL;
        size_t n = 0;
        int c, status;

        while ((c = getopt_long(argc, argv, "+:" COMMON_OPTIONS, options, NULL)) >= 0)
                switch (c) {
                        COMMON_OPTION_CASES("stats", stats_help, argv);
                case ARG_NO_STREAM:
                        no_stream = true;
                        break;
                }
        named = optind < argc;
        if ((size_t) (argc - optind) > STATS_MAX_SANDBOXES)
                return fail_usage("stats", "at most %d sandboxes at once", STATS_MAX_SANDBOXES);
        status = ctl_manager_open(&m);
        if (status != EXIT_OK)
                return status;

        if (named) {
                n = (size_t) (argc - optind);
                rows = calloc(n, sizeof(Row));
                for (size_t i = 0; rows && i < n; i++)
                        rows[i].id = strdup(argv[optind + i]);
        } else {
                agentix_sandbox_info *l = NULL;
                agentix_error e = AGENTIX_ERROR_NULL;
                size_t k = 0;

                if (agentix_sandbox_list(m, &l, &k, &e) < 0) {
                        status = fail_agentix(&e, "cannot list the sandboxes");
                        agentix_error_done(&e);
                        agentix_manager_free(m);
                        return status;
                }
                rows = calloc(MAX(k, 1u), sizeof(Row));
                for (size_t i = 0; rows && i < k; i++)
                        if (streq_ptr(l[i].state, "running") || streq_ptr(l[i].state, "paused"))
                                rows[n++].id = strdup(l[i].id);
                for (size_t i = 0; i < k; i++)
                        agentix_sandbox_info_done(&l[i]);
                free(l);
        }
        for (size_t i = 0; rows && i < n; i++)
                if (!rows[i].id) {
                        free(rows);
                        rows = NULL;
                }
        if (!rows) {
                agentix_manager_free(m);
                return fail_errno(EXIT_SOFTWARE, ENOMEM, "out of memory");
        }

        if (arg_json || arg_quiet || no_stream || !isatty(STDOUT_FILENO)) {
                status = read_rows(m, rows, n, named);
                if (arg_json) {
                        json_t *a = json_array();

                        for (size_t i = 0; a && i < n; i++)
                                if (rows[i].ok) {
                                        json_t *o = stats_json(&rows[i].stats);

                                        (void) json_object_set_new(o, "id", json_string(rows[i].id));
                                        (void) json_array_append_new(a, o);
                                }
                        (void) print_json(a);
                } else if (arg_quiet) {
                        for (size_t i = 0; i < n; i++)
                                if (rows[i].ok)
                                        puts(rows[i].id);
                } else
                        print_table(rows, n);
        } else
                for (;;) {
                        /* agentd's cpu_percent is over the time since the last reading: a
                         * second here, once the first round is in. */
                        status = read_rows(m, rows, n, named);
                        fputs("\033[H\033[2J", stdout);
                        print_table(rows, n);
                        fflush(stdout);
                        if (status != EXIT_OK)
                                break;
                        (void) nanosleep(&(struct timespec) { .tv_sec = 1 }, NULL);
                }
        for (size_t i = 0; i < n; i++)
                free(rows[i].id);
        free(rows);
        agentix_manager_free(m);
        return status;
}

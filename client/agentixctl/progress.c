/* SPDX-License-Identifier: MIT */
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "format-util.h"
#include "macro.h"
#include "progress.h"

void progress_init(Progress *p, uint64_t total_bytes, uint64_t total_files, bool quiet) {
        *p = (Progress) {
                .enabled = !quiet && isatty(STDERR_FILENO),
                .fd = STDERR_FILENO,
                .total_bytes = total_bytes,
                .total_files = total_files,
                .start_usec = now_usec(),
        };
}

static void format_duration(char *buf, size_t size, uint64_t sec) {
        if (sec >= 3600)
                snprintf(buf, size, "%u:%02u:%02u", (unsigned) (sec / 3600), (unsigned) (sec / 60 % 60),
                         (unsigned) (sec % 60));
        else
                snprintf(buf, size, "%u:%02u", (unsigned) (sec / 60), (unsigned) (sec % 60));
}

void progress_format(char *buf, size_t size, unsigned width, uint64_t done, uint64_t total, uint64_t files_done,
                     uint64_t files_total, uint64_t elapsed_usec) {
        char d[FORMAT_BYTES_MAX], t[FORMAT_BYTES_MAX], r[FORMAT_BYTES_MAX], eta[24], tail[160], bar[256];
        double frac = total > 0 ? (double) MIN(done, total) / (double) total : 1.0;
        double rate = elapsed_usec > 0 ? (double) done * 1e6 / (double) elapsed_usec : 0;
        size_t tail_len, bar_width;

        if (done < total && rate >= 1)
                format_duration(eta, sizeof(eta), (uint64_t) ((double) (total - done) / rate + 0.999));
        else if (done >= total)
                format_duration(eta, sizeof(eta), elapsed_usec / 1000000);
        else
                snprintf(eta, sizeof(eta), "--:--");

        snprintf(tail, sizeof(tail), " %s / %s  %s/s  %s %s  %llu/%llu files", format_bytes(done, d),
                 format_bytes(total, t), format_bytes((uint64_t) rate, r), done >= total ? "in" : "ETA", eta,
                 (unsigned long long) files_done, (unsigned long long) files_total);
        tail_len = strlen(tail);

        /* "100% [" + bar + "]" + tail, the bar taking what is left (at least 10). */
        bar_width = width > tail_len + 7 + 10 ? MIN((size_t) width - tail_len - 7, sizeof(bar) - 1) : 10;
        size_t filled = (size_t) (frac * (double) bar_width);
        memset(bar, '#', filled);
        memset(bar + filled, '.', bar_width - filled);
        bar[bar_width] = 0;

        snprintf(buf, size, "%3u%% [%s]%s", (unsigned) (frac * 100), bar, tail);
        if (width > 0 && strlen(buf) > width)
                buf[width] = 0;
}

static unsigned terminal_width(int fd) {
        struct winsize ws = {};

        if (ioctl(fd, TIOCGWINSZ, &ws) < 0 || ws.ws_col == 0)
                return 80;
        return ws.ws_col;
}

static void draw(Progress *p, uint64_t now) {
        char line[512];
        unsigned width = terminal_width(p->fd);

        /* Leave the last column alone: some terminals wrap when it is written. */
        progress_format(line, sizeof(line), width > 1 ? width - 1 : width, p->done_bytes, p->total_bytes,
                        p->done_files, p->total_files, now - p->start_usec);
        dprintf(p->fd, "\r%s\033[K", line);
        p->drawn = true;
        p->last_draw_usec = now;
}

void progress_add(Progress *p, uint64_t bytes, uint64_t files) {
        uint64_t now;

        p->done_bytes += bytes;
        p->done_files += files;
        if (!p->enabled)
                return;
        now = now_usec();
        if (now - p->start_usec < PROGRESS_DELAY_USEC)
                return;
        if (p->drawn && now - p->last_draw_usec < PROGRESS_INTERVAL_USEC)
                return;
        draw(p, now);
}

void progress_finish(Progress *p) {
        if (!p->enabled || !p->drawn)
                return;
        draw(p, now_usec());
        dprintf(p->fd, "\n");
        p->drawn = false;
}

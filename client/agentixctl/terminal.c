/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include "terminal.h"

/* One terminal per process: globals, so that the atexit and signal paths can reach it. */
static int saved_fd = -1;
static struct termios saved_mode;
static volatile sig_atomic_t is_raw = 0;

static const int fatal_signals[] = { SIGSEGV, SIGBUS, SIGABRT, SIGFPE, SIGILL };

void terminal_restore(void) {
        if (!is_raw)
                return;
        (void) tcsetattr(saved_fd, TCSADRAIN, &saved_mode);
        is_raw = 0;
}

static void fatal_signal_handler(int sig) {
        terminal_restore();
        /* SA_RESETHAND put the default action back: die of the same signal. */
        raise(sig);
}

int terminal_make_raw(int fd) {
        static bool handlers_installed = false;
        struct termios raw;

        if (!isatty(fd))
                return -ENOTTY;
        if (tcgetattr(fd, &saved_mode) < 0)
                return -errno;
        raw = saved_mode;
        cfmakeraw(&raw);
        /* Keep output post-processing off as well: the remote PTY already turned \n into \r\n. */

        if (!handlers_installed) {
                struct sigaction sa = { .sa_handler = fatal_signal_handler, .sa_flags = SA_RESETHAND };

                sigemptyset(&sa.sa_mask);
                for (size_t i = 0; i < sizeof(fatal_signals) / sizeof(fatal_signals[0]); i++)
                        (void) sigaction(fatal_signals[i], &sa, NULL);
                atexit(terminal_restore);
                handlers_installed = true;
        }

        saved_fd = fd;
        if (tcsetattr(fd, TCSADRAIN, &raw) < 0)
                return -errno;
        is_raw = 1;
        return 0;
}

int terminal_get_size(int fd, unsigned *ret_rows, unsigned *ret_cols) {
        struct winsize ws = {};

        if (ioctl(fd, TIOCGWINSZ, &ws) < 0)
                return -errno;
        if (ws.ws_row == 0 || ws.ws_col == 0)
                return -ENOTTY;
        *ret_rows = ws.ws_row;
        *ret_cols = ws.ws_col;
        return 0;
}

/* SPDX-License-Identifier: MIT */
#pragma once

/* Our own terminal during `shell` and `exec -t`: raw mode (every key, Ctrl-C included, goes to
 * the remote PTY as a byte) and the window size. The saved mode comes back on every way out:
 * terminal_restore() on the normal path, an atexit() handler for exit() calls, and a handler
 * for the fatal signals (SIGSEGV, SIGBUS, SIGABRT, SIGFPE, SIGILL) that restores and re-raises.
 * The terminating signals (SIGINT, SIGTERM, SIGHUP, SIGQUIT) are the caller's to turn into
 * events so that they take the normal path. */

#include <stdbool.h>

/* Switch fd (a terminal) to raw mode. 0, or a negative errno (-ENOTTY when it is not one). */
int terminal_make_raw(int fd);
/* Put the saved mode back (no-op when not raw). Async-signal-safe. */
void terminal_restore(void);

/* The window size of the terminal on fd; -ENOTTY when it is not one. */
int terminal_get_size(int fd, unsigned *ret_rows, unsigned *ret_cols);

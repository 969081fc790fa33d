/* SPDX-License-Identifier: MIT */
#pragma once

/* Pseudo-terminals for interactive commands. The caller keeps the master; the child opens the
 * slave by path right after setsid(), which makes it the child's controlling terminal. */

#include <stdbool.h>

#define PTY_SIZE_MAX 65535u

/* Allocate a PTY of rows × cols. Returns the master (O_CLOEXEC, O_NONBLOCK) and the slave's
 * path ("/dev/pts/N", malloc()ed). */
int pty_open(unsigned rows, unsigned cols, int *ret_master, char **ret_slave_path);

/* Set the terminal size; the kernel sends SIGWINCH to the foreground process group. */
int pty_resize(int master, unsigned rows, unsigned cols);

/* The byte that ends input on this terminal (VEOF, normally ^D). */
int pty_eof_char(int master, unsigned char *ret);

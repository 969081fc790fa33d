/* SPDX-License-Identifier: MIT */
#include <fcntl.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <termios.h>

#include "macro.h"
#include "pty.h"

int pty_resize(int master, unsigned rows, unsigned cols) {
        struct winsize ws = {
                .ws_row = (unsigned short) rows,
                .ws_col = (unsigned short) cols,
        };

        if (rows == 0 || cols == 0 || rows > PTY_SIZE_MAX || cols > PTY_SIZE_MAX)
                return -EINVAL;
        if (ioctl(master, TIOCSWINSZ, &ws) < 0)
                return negative_errno();
        return 0;
}

int pty_open(unsigned rows, unsigned cols, int *ret_master, char **ret_slave_path) {
        _cleanup_close_ int master = -EBADF;
        char path[64];
        char *p;
        int r;

        master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC | O_NONBLOCK);
        if (master < 0)
                return negative_errno();
        if (grantpt(master) < 0 || unlockpt(master) < 0)
                return negative_errno();
        r = ptsname_r(master, path, sizeof(path));
        if (r != 0)
                return -r;

        r = pty_resize(master, rows, cols);
        if (r < 0)
                return r;

        p = strdup(path);
        if (!p)
                return -ENOMEM;
        *ret_master = TAKE_FD(master);
        *ret_slave_path = p;
        return 0;
}

int pty_eof_char(int master, unsigned char *ret) {
        struct termios t;

        if (tcgetattr(master, &t) < 0)
                return negative_errno();
        *ret = t.c_cc[VEOF];
        return 0;
}

/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "agentixctl.h"
#include "fail.h"
#include "output.h"

int print_json(json_t *j) {
        return print_json_flags(j, 0);
}

int print_json_flags(json_t *j, size_t flags) {
        char *s;

        if (!j)
                return fail(EXIT_SOFTWARE, "out of memory");
        s = json_dumps(j, JSON_COMPACT | JSON_ENCODE_ANY | flags);
        json_decref(j);
        if (!s)
                return fail(EXIT_SOFTWARE, "out of memory");
        fputs(s, stdout);
        fputc('\n', stdout);
        free(s);
        return EXIT_OK;
}

int write_all(int fd, const void *data, size_t size) {
        const char *p = data;

        while (size > 0) {
                ssize_t k = write(fd, p, size);
                if (k < 0) {
                        if (errno == EINTR)
                                continue;
                        if (errno == EAGAIN) {
                                struct pollfd pfd = { .fd = fd, .events = POLLOUT };
                                (void) poll(&pfd, 1, -1);
                                continue;
                        }
                        return -errno;
                }
                p += k;
                size -= (size_t) k;
        }
        return 0;
}

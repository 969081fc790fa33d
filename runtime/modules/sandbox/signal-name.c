/* SPDX-License-Identifier: MIT */
#include <signal.h>
#include <strings.h>

#include "macro.h"
#include "signal-name.h"

int signal_from_number(long long n) {
        if (n < 1 || n >= NSIG)
                return -EINVAL;
        return (int) n;
}

int signal_from_string(const char *s) {
        char *end;
        long long n;

        if (strempty(s))
                return -EINVAL;

        errno = 0;
        n = strtoll(s, &end, 10);
        if (errno == 0 && end != s && *end == '\0')
                return signal_from_number(n);

        if (strncasecmp(s, "SIG", 3) == 0)
                s += 3;
        for (int sig = 1; sig < NSIG; sig++) {
                const char *name = sigabbrev_np(sig); /* "INT", "TERM", …; NULL for unnamed ones */

                if (name && strcasecmp(name, s) == 0)
                        return sig;
        }
        return -EINVAL;
}

/* SPDX-License-Identifier: MIT */
#pragma once

/* Signal names as a person types them: "INT", "SIGINT", "sigint", "9". */

/* Returns the signal number (1 ≤ sig < NSIG), or -EINVAL. */
int signal_from_string(const char *s);

/* Returns the signal number for a number given as an integer, or -EINVAL if out of range. */
int signal_from_number(long long n);

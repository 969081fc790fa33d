/* SPDX-License-Identifier: MIT */
#include <string.h>

#include "path-clean.h"

void path_clean(char *p) {
        char *out = p + 1, *in = p + 1;

        while (*in) {
                size_t n = strcspn(in, "/");
                const char *component = in;

                /* Step past the component (and its '/') first: out never runs ahead of in, and
                 * the separator written below lands where a '/' of the input was. */
                in += n;
                if (*in == '/')
                        in++;
                if (n == 0 || (n == 1 && component[0] == '.'))
                        continue;
                if (n == 2 && component[0] == '.' && component[1] == '.') {
                        while (out > p + 1 && out[-1] == '/')
                                out--;
                        while (out > p + 1 && out[-1] != '/')
                                out--;
                        continue;
                }
                memmove(out, component, n);
                out += n;
                if (out < in)
                        *out++ = '/';
        }
        if (out > p + 1 && out[-1] == '/')
                out--;
        *out = 0;
}

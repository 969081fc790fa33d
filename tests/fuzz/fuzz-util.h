/* SPDX-License-Identifier: MIT */
#pragma once

/* Shared bits of the libFuzzer targets. Invariant checks abort() (a crash libFuzzer records)
 * instead of using assert(), which NDEBUG would compile out. */

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define CHECK(cond)                                                                     \
        do {                                                                            \
                if (!(cond)) {                                                          \
                        fprintf(stderr, "%s:%d: invariant broken: %s\n", __FILE__, __LINE__, #cond); \
                        abort();                                                        \
                }                                                                       \
        } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
